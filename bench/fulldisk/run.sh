#!/bin/bash
# The full-disk proof, long version (issue 28; docs/design.md#durability):
# N leases held on a loop-mounted ext4 that another process fills to 100%
# and keeps full, renewed by `lease renew-batch --watch` for DURATION
# seconds; half of them completed midway; claims tried every 10 s.
# Prints the numbers bench/results/fulldisk.md reports: renewals, spares
# used and recycled, renewal rounds that failed, completes, claims refused
# with exit 4, and leases lost (must be 0).
#
#   sudo bench/fulldisk/run.sh [DURATION_S] [N]      (root: loop mount)
set -u
DUR=${1:-600}
N=${2:-1000}
LEASE=${LEASE:-lease}
W=$(mktemp -d /tmp/lease-fulldisk-XXXXXX)
MNT=$W/mnt
cleanup() {
	[ -n "${FILLER:-}" ] && kill "$FILLER" 2>/dev/null
	[ -n "${WATCH:-}" ] && kill "$WATCH" 2>/dev/null
	wait 2>/dev/null
	umount "$MNT" 2>/dev/null
	rm -rf "$W"
}
trap cleanup EXIT
truncate -s 256M "$W/img" && mkfs.ext4 -q -F -b 4096 -m 0 "$W/img" && mkdir "$MNT" && mount -o loop "$W/img" "$MNT" || exit 2
export LEASE_ROOT=$MNT/table
$LEASE init --shards 16 >/dev/null || exit 2
seq -f 'fulldisk-%g' 1 $((N + 100)) | while read -r s; do printf '%s' "$s" | sha256sum | cut -c1-64; done > "$W/ids"
$LEASE add "$W/ids" >/dev/null || exit 2
$LEASE claim --next "$N" --ttl 30 > "$W/held" || exit 2
echo "held $(wc -l < "$W/held") leases (ttl 30 s); $(ls "$LEASE_ROOT/reserve" | wc -l) spares in reserve/"

# Fill the filesystem to 100%, then keep it full: whatever space is freed
# is taken again within 50 ms (a fuzzer writing corpora).
i=0
fallocate -l 240M "$MNT/filler.big" 2>/dev/null
for sz in 16M 1M 64K 4K; do while fallocate -l $sz "$MNT/filler.$i" 2>/dev/null; do i=$((i + 1)); done; done
( j=0; while :; do fallocate -l 4K "$MNT/grab.$j" 2>/dev/null && j=$((j + 1)); touch "$MNT/grabi.$j" 2>/dev/null; sleep 0.05; done ) &
FILLER=$!
df -B1 "$MNT" | tail -1 | awk '{print "filesystem: " $4 " bytes available of " $2}'

$LEASE renew-batch --watch --interval 3 -v "$W/held" > "$W/watch.out" 2> "$W/watch.err" &
WATCH=$!
start=$(date +%s)
claims=0 refused=0 other=0 completed=0 complete_fail=0
half=0
while [ $(($(date +%s) - start)) -lt "$DUR" ]; do
	sleep 10
	$LEASE claim --next 1 >/dev/null 2>>"$W/claim.err"
	rc=$?
	claims=$((claims + 1))
	if [ $rc -eq 4 ]; then refused=$((refused + 1)); else other=$((other + 1)); echo "claim exit $rc" >> "$W/claim.err"; fi
	if [ $half -eq 0 ] && [ $(($(date +%s) - start)) -ge $((DUR / 2)) ]; then
		half=1
		head -n $((N / 2)) "$W/held" > "$W/done.in"
		tail -n +$((N / 2 + 1)) "$W/held" > "$W/keep"
		cp "$W/keep" "$W/held.next" && mv "$W/held.next" "$W/held" # the watch re-reads it
		$LEASE complete -v < "$W/done.in" > "$W/done.out" 2> "$W/complete.err"
		rc=$?
		completed=$(wc -l < "$W/done.out")
		[ $rc -eq 0 ] || { complete_fail=$rc; grep -v '^lease complete' "$W/complete.err" | sort | uniq -c | sort -rn | head -3 | cut -c1-400; }
		echo "t=$(($(date +%s) - start))s: completed $completed (exit $rc); $(df -B1 "$MNT" | tail -1 | awk '{print $4}') bytes available"
	fi
done
kill -TERM $WATCH
wait $WATCH
watch_rc=$?
kill $FILLER 2>/dev/null
wait $FILLER 2>/dev/null
FILLER=
rounds=$(grep "lease renew-batch: batches=" "$W/watch.err" | tail -1 | sed -E "s/.*batches=([0-9]+).*/\1/")
last=$(grep 'lease renew-batch: batches=' "$W/watch.err" | tail -1)
spares=$(grep 'spares_used=' "$W/watch.err" | tail -1)
ioerr=$(grep -c '^io-error' "$W/watch.err")
grep '^io-error' "$W/watch.err" | cut -d' ' -f4- | sort | uniq -c | sort -rn | head -3 | cut -c1-400
lostl=$(grep -vc -e '^lease renew-batch' -e '^done ' "$W/watch.err")
verified=$($LEASE verify < "$W/keep" 2>"$W/verify.err" | wc -l)
echo "watch exit $watch_rc after $rounds rounds; io-error lines $ioerr; other stderr lines (not 'done' of the completed) $lostl"
echo "last stats: $last"
echo "reserve: $spares; $(ls "$LEASE_ROOT/reserve" | wc -l) spares at the end"
echo "complete: $completed of $((N / 2)) (exit ${complete_fail}); $(grep spares_used "$W/complete.err" | head -1)"
echo "claims: $claims tried, $refused refused with exit 4, $other other"
echo "held after: $verified of $((N - N / 2)) still held (verify); lost=$((N - N / 2 - verified))"
