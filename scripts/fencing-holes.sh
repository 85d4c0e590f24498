#!/usr/bin/env bash
# scripts/fencing-holes.sh LEASE: replays the eight holes of issue 17 (Fencing without holes) against the
# lease binary LEASE, in a scratch directory; prints "hole N: HOLE (...)" or "hole N: closed (...)" per case.
L=$1; set -u; export LEASE_CLOCK_SKEW=0.1
W=$(mktemp -d); cd "$W"
id() { printf '%s' "$1" | sha256sum | cut -c1-64; }
fresh() { rm -rf t; $L init --root t --shards 4 >/dev/null 2>&1 || mkdir -p t; export LEASE_ROOT=$PWD/t; }
now() { date +%s.%N; }
verdict() { if [ "$2" = bad ]; then echo "hole $1: HOLE ($3)"; else echo "hole $1: closed ($3)"; fi; }
shard() { printf '%02x' $(( 0x${1:0:8} % 4 )); }
# 1. abandoned publish (committing, result in public/) then a claim after expiry
fresh; I=$(id one); $L claim --ttl 1 $I >/dev/null
f=t/work/$(shard $I)/$I.json; n=$(now)
printf '{"schema":"lease.work/v1","id":"%s","status":"committing","owner":"a","token":1,"claimed_at":%s,"renewed_at":%s,"expires_at":%s,"publish":"r.txt"}\n' $I $n $n $n > $f
echo result > t/public/r.txt; sleep 1.5
out=$($L claim --ttl 30 $I 2>&1); if grep -q " 2$" <<< "$out"; then verdict 1 bad "claim took over the abandoned publish: $out"; else verdict 1 ok "$(cut -c1-60 <<< "$out")"; fi
# 2. late stdin
fresh; I=$(id two); (sleep 3; echo $I) | $L claim --ttl 2 - >/dev/null 2>&1
e=$(sed 's/.*"expires_at":\([0-9.]*\).*/\1/' t/work/$(shard $I)/$I.json)
if awk -v e=$e -v n=$(now) 'BEGIN{exit !(e < n)}'; then verdict 2 bad "granted with expires_at $e already past"; else verdict 2 ok "expires_at in the future"; fi
# 3. token after quarantine
fresh; I=$(id three); printf '{"schema":"lease.work/v1","id":"%s","status":"leased","owner":"","token":7,"claimed_at":1,"renewed_at":1,"expires_at":2}\n' $I > t/work/$(shard $I)/$I.json
$L fsck --repair >/dev/null 2>&1; out=$($L claim $I 2>&1)
if [ "$out" = "$I 1" ]; then verdict 3 bad "token 1 after quarantining token 7"; else verdict 3 ok "$out"; fi
# 4. lease run after an outside release
fresh; I=$(id four); s=$(date +%s); $L run --ttl 3 $I -- sleep 4 2>/dev/null & p=$!; sleep 0.5
echo "$I 1" | $L release >/dev/null 2>&1; wait $p; rc=$?; d=$(( $(date +%s) - s ))
if [ $rc -ne 124 ]; then verdict 4 bad "lease run exit $rc after ${d}s, command ran on"; else verdict 4 ok "exit 124 after ${d}s"; fi
# 5. staged bytes fenced (old layout: stage/NAME; new: stage/ID.TOKEN/NAME)
fresh; I=$(id five); $L claim --ttl 1 $I >/dev/null; sleep 1.3; $L claim --ttl 30 $I >/dev/null
mkdir -p t/stage/$I.2; echo B > t/stage/r5; echo B > t/stage/$I.2/r5; echo A-stale > t/stage/r5   # A writes late, same name
echo "$I 1" | $L complete --publish r5 >/dev/null 2>&1; echo "$I 2" | $L complete --publish r5 >/dev/null 2>&1
if [ "$(cat t/public/r5 2>/dev/null)" = A-stale ]; then verdict 5 bad "the stale holder's bytes were published"; else verdict 5 ok "public/r5: $(cat t/public/r5 2>/dev/null)"; fi
# 6. takeover within clock skew
fresh; I=$(id six); LEASE_CLOCK_SKEW=1 $L claim --ttl 1.5 $I >/dev/null; sleep 1.8
out=$(LEASE_CLOCK_SKEW=1 $L claim $I 2>&1); if grep -q " 2$" <<< "$out"; then verdict 6 bad "taken over 0.3 s after expiry (clock_skew 1)"; else verdict 6 ok "$(cut -c1-40 <<< "$out")"; fi
# 7. a mistyped root
I=$(id seven); $L claim --root $W/no/such/dir $I >/dev/null 2>&1; if [ -d $W/no ]; then verdict 7 bad "made a table at a mistyped root"; else verdict 7 ok "nothing created"; fi
# 8. claim --first --json exit
fresh; A=$(id eight-a); B=$(id eight-b); $L claim $A >/dev/null; out=$(printf '%s\n%s\n' $A $B | $L claim --first 1 --json -); rc=$?
if grep -q '"exit":1' <<< "$out" && [ $rc -eq 0 ]; then verdict 8 bad "--json says exit 1, process exits 0"; else verdict 8 ok "rc $rc, json $(grep -o '"exit":[0-9]' <<< "$out")"; fi
rm -rf "$W"
