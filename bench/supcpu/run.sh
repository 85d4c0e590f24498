#!/bin/sh
# bench/supcpu/run.sh LEASE [N [DIR]]: the CPU time of lease work's
# supervisor over N items of /bin/true with one worker (issue 39): its
# utime+stime from /proc/PID/stat, sampled every 2 ms until it exits (the
# last sample lost is at most one item's), and the worker's own, in ms an
# item. DIR (default /var/tmp) holds the table.
set -eu
LEASE=$1
N=${2:-500}
DIR=$(mktemp -d "${3:-/var/tmp}/supcpu.XXXXXX")
trap 'rm -rf "$DIR"' EXIT
T=$DIR/t
"$LEASE" init --root "$T" >/dev/null
seq 1 "$N" | "$LEASE" id | "$LEASE" add --root "$T" >/dev/null
"$LEASE" work --root "$T" -- /bin/true &
W=$!
S=
while [ -z "$S" ]; do S=$(pgrep -P "$W" -f lease-supervisor || true); done
HZ=$(getconf CLK_TCK)
last=0 wlast=0
while [ -r /proc/"$S"/stat ]; do
	v=$(awk '{print $14+$15}' /proc/"$S"/stat 2>/dev/null) && [ -n "$v" ] && last=$v
	v=$(awk '{print $14+$15}' /proc/"$W"/stat 2>/dev/null) && [ -n "$v" ] && wlast=$v
	sleep 0.002
done
wait "$W"
awk -v s="$last" -v w="$wlast" -v n="$N" -v hz="$HZ" 'BEGIN{printf "supervisor %.3f ms/item, worker %.3f ms/item (%d items)\n", s*1000/hz/n, w*1000/hz/n, n}'
