#!/usr/bin/env bash
# demo.sh: a small fuzzing campaign on a fresh local lease table, in about ten
# seconds. It builds lease, fills the table's queue with seeds (lease add),
# starts three workers, each one `lease work` (fuzz the next free item under
# a 3 s lease renewed every second, item after item; each seed's fuzzer adds
# a child to the queue as it runs), kills one holder with kill -9, shows its item
# reclaimed after expiry with a larger token and its late publish refused
# (fencing), checks the table with lease fsck, and prints a summary.
#
#   ./examples/demo.sh                 # table in ./demo-table (removed first)
#   DEMO_ROOT=/tmp/t ./examples/demo.sh
#
# DEMO_BIN_DIR (default ./bin) is where lease is built, as make builds it
# (-tags mpi when pkg-config finds Open MPI). Exit 0 when the
# campaign ended as described, 1 otherwise.
set -u -o pipefail

cd "$(dirname "$0")/.." || exit 1
bindir=${DEMO_BIN_DIR:-./bin}
table=${DEMO_ROOT:-./demo-table}
items=${DEMO_ITEMS:-6} # seeds; each adds a child
workers=${DEMO_WORKERS:-3}

say() { printf '%s\n' "$*"; }
fail() { say "demo: FAILED: $*" >&2; exit 1; }
short() { printf '%s' "${1:0:12}"; }

# Built as make builds it (with MPI support when Open MPI is installed), so
# that the demo never replaces a bin/lease that mpirun needs by one without.
tags=
pkg-config --exists ompi 2> /dev/null && tags=mpi
say "== building lease into $bindir/lease${tags:+ (with MPI support)}"
mkdir -p "$bindir" && go build -tags "$tags" -o "$bindir/lease" . || fail "go build"
PATH="$(cd "$bindir" && pwd):$PATH"
export PATH

say "== fresh table at $table"
rm -rf "$table" || fail "cannot remove $table"
mkdir -p "$table"
LEASE_ROOT=$(cd "$table" && pwd)
export LEASE_ROOT
# Short leases so that the demo is quick: a 3 s TTL renewed every second; a
# holder that dies loses its item 3 s after its last renewal.
export LEASE_TTL=3 LEASE_RENEW_INTERVAL=1 LEASE_GRACE=1 LEASE_LOCK_TIMEOUT=2
unset LEASE_CONFIG LEASE_OWNER
lease init --shards 4 || fail "lease init"
work=$LEASE_ROOT/../.demo-$$
mkdir -p "$work"
trap 'rm -rf "$work"' EXIT

# The campaign's seeds: one ID (SHA-256 of an input name) per line, into
# the table's own queue. Each seed's fuzzer finds one child, which it adds
# to the queue while it runs (deduplicated by its ID, as SHA-256 of content
# is), so the campaign grows as it goes: items = 2 x seeds.
for i in $(seq 1 "$items"); do
  printf 'demo-input-%02d\n' "$i"
done | lease id - > "$work/seeds" || fail "lease id"
lease add < "$work/seeds" > /dev/null || fail "lease add"
total=$((2 * items))
say "queue: $items seeds (each will add one child: $total items)"

# summary NAME prints one count of lease status --summary --json.
summary() { lease status --summary --json | sed -n "s/.*\"$1\":\([0-9]*\).*/\1/p"; }
# records prints "ID STATUS OWNER TOKEN" for every work record.
records() {
  lease status --json | sed -n 's/^{"kind":"work","id":"\([0-9a-f]*\)","status":"\([a-z]*\)","owner":"\([^"]*\)","token":\([0-9]*\).*/\1 \2 \3 \4/p'
}

# The "fuzzer" each worker runs under lease work: a shell loop that writes
# findings into its staging directory (LEASE_STAGE, its token's own), adds
# the child it found (seeds only) to the queue, then publishes its findings,
# fenced by its token.
fuzzer='
  out="$LEASE_STAGE/$LEASE_ID.t$LEASE_TOKEN"
  for round in 1 2 3; do
    echo "round $round: input $(od -An -N4 -tx1 /dev/urandom | tr -d " ")" >> "$out"
    sleep 0.4
  done
  if grep -qx "$LEASE_ID" "$SEEDS"; then
    lease id "child-of-$LEASE_ID" | lease add > /dev/null
  fi
  echo "$LEASE_ID $LEASE_TOKEN" | lease complete --publish "${out##*/}" > /dev/null
'
export SEEDS=$work/seeds

# worker: one lease work, the long-lived worker: it claims the next free
# item of the queue, runs the fuzzer on it under one supervisor, finishes
# it, and goes on; it waits while every item left is held, and exits 0
# once every queued item is done or failed.
worker() {
  local me=$1 rc
  lease work --owner "$me" -- sh -c "$fuzzer"
  rc=$?
  [ $rc -eq 0 ] || say "$me: lease work exited $rc"
  return $rc
}

say "== a holder that will die: lease run with a long job, then kill -9"
held=$(lease claim --owner doomed --next 1) || fail "first claim"
read -r vid vtok <<< "$held"
lease run --owner doomed --token "$vtok" "$vid" -- sleep 30 &
vpid=$!
disown "$vpid" # no "Killed" job notice
sleep 1.5      # at least one renewal
kill -9 "$vpid"
while kill -0 "$vpid" 2> /dev/null; do sleep 0.05; done
say "doomed: killed lease run (pid $vpid) holding $(short "$vid") token $vtok; the lease runs out in <= 3 s"

say "== $workers workers: lease work --owner worker-N"
pids=()
for w in $(seq 1 "$workers"); do
  worker "worker-$w" &
  pids+=($!)
done

# Wait until the doomed item was reclaimed, then replay the dead holder's
# late publish with its old token: refused (exit 1), nothing moved.
refusals=0
for _ in $(seq 1 200); do
  tok=$(records | awk -v id="$vid" '$1 == id { print $4 }')
  [ "${tok:-0}" -gt "$vtok" ] && break
  sleep 0.1
done
[ "${tok:-0}" -gt "$vtok" ] || fail "$(short "$vid") was not reclaimed"
stale_dir="$LEASE_ROOT/stage/$vid.$vtok" # the dead holder's own staging directory
mkdir -p "$stale_dir"
echo "a late result" > "$stale_dir/$vid.stale"
echo "$vid $vtok" | lease complete --publish "$vid.stale" 2> "$work/refusal"
rc=$?
sed 's/^/    /' "$work/refusal"
if [ $rc -eq 1 ] && [ -f "$stale_dir/$vid.stale" ] && [ ! -e "$LEASE_ROOT/public/$vid.stale" ]; then
  refusals=$((refusals + 1))
  say "doomed: late publish with token $vtok refused (exit 1), nothing moved"
else
  fail "the stale publish was not refused (exit $rc)"
fi
rm -rf "$stale_dir"

for p in "${pids[@]}"; do
  wait "$p" || fail "a worker failed"
done

fsck="lease fsck: not available in this build"
if lease fsck --help > /dev/null 2>&1; then
  if lease fsck > "$work/fsck" 2>&1; then
    fsck="lease fsck: clean"
  else
    cat "$work/fsck"
    fail "lease fsck found problems"
  fi
fi

say ""
say "== summary"
records | sort -k4,4n -k1,1 | while read -r id status owner token; do
  printf '  %s  %-5s token %-2s %s\n' "$(short "$id")" "$status" "$token" "$owner"
done
lease status --summary | sed 's/^/  /'
done_n=$(summary done)
reclaimed=$(records | awk '$4 > 1' | wc -l)
published=$(find "$LEASE_ROOT/public" -type f | wc -l)
say "items done:  $done_n of $total ($items seeds, $((total - items)) children found)"
say "published:   $published results in $LEASE_ROOT/public"
say "reclaimed:   $reclaimed (after the holder died, with a larger token)"
say "refusals:    $refusals stale publish refused by fencing"
say "$fsck"
[ "$done_n" -eq "$total" ] || fail "only $done_n of $total items done"
[ "$published" -eq "$total" ] || fail "$published results published, want $total"
[ "$(summary queued)" -eq 0 ] || fail "items left in the queue"
[ "$reclaimed" -ge 1 ] || fail "nothing was reclaimed"
say "demo: OK"
