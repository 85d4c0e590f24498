#!/bin/bash
# bench/wake/run.sh LEASE [ROUNDS [DIR]]: the two waits of issue 39 that
# end when the holder lets go, in seconds, one line each round:
#   takeover: a `lease claim --next 1 --wait` waits 3 s on an item another
#     owner holds (its backoff is at 2 s by then); the time from the start
#     of `lease release` of that item to the waiter's exit;
#   drain: two `lease work -- sleep 1` workers over three items: one runs
#     the third item while the other waits on the busy queue; the time
#     between the two workers' exits (the waiter sees the queue empty).
# DIR (default /var/tmp) holds the tables.
set -eu
LEASE=$1
ROUNDS=${2:-5}
DIR=$(mktemp -d "${3:-/var/tmp}/wake.XXXXXX")
trap 'rm -rf "$DIR"' EXIT
now() { date +%s.%N; }
for r in $(seq 1 "$ROUNDS"); do
	T=$DIR/t$r
	"$LEASE" init --root "$T" >/dev/null
	echo one | "$LEASE" id | "$LEASE" add --root "$T" >/dev/null
	"$LEASE" claim --root "$T" --owner holder --next 1 >"$DIR/tok"
	"$LEASE" claim --root "$T" --owner waiter --next 1 --wait >/dev/null &
	W=$!
	sleep 3
	t0=$(now)
	"$LEASE" release --root "$T" --owner holder <"$DIR/tok" >/dev/null
	wait "$W"
	t1=$(now)
	D=$DIR/d$r
	"$LEASE" init --root "$D" >/dev/null
	printf 'a\nb\nc\n' | "$LEASE" id | "$LEASE" add --root "$D" >/dev/null
	for w in 1 2; do ( "$LEASE" work --root "$D" -- sleep 1; now >"$DIR/end$w" ) & done
	wait
	awk -v a="$t0" -v b="$t1" -v e1="$(cat "$DIR/end1")" -v e2="$(cat "$DIR/end2")" \
		'BEGIN{d=e1-e2; if(d<0)d=-d; printf "takeover %.3f s  drain %.3f s\n", b-a, d}'
	rm -rf "$T" "$D"
done
