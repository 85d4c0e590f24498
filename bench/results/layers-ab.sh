#!/usr/bin/env bash
# Before/after, one run, interleaved: renew-batch N=1024 K=16 on journaled
# ext4 (loop, 256 MiB journal as bench/matrix) and on lease-faultfs 2 ms
# over tmpfs; before = lease at 3d92f78 with its hidden --strategy, after =
# lease at HEAD (concurrent) and bench/leasebench --strategy S.
set -euo pipefail
W=/tmp/wt-engine-bench
B=$W/bin
REPS=${REPS:-7}
repo=/work/wt-engine
mkdir -p "$B"
(cd "$repo" && go build -o "$B/lease" . && go build -o "$B/lease-faultfs" ./faultfs/cmd/lease-faultfs &&
	cd bench && go build -o "$B/leasebench" ./leasebench && go build -o "$B/matrixtool" ./matrixtool && go build -o "$B/benchtool" ./benchtool)
old=${OLD:-$W/lease-before} # lease built at 3d92f78 (go build -o $W/lease-before .)
mt=$B/matrixtool
ext=$W/mnt-ext4 fuse=$W/mnt-fuse back=$W/back-fuse img=$W/ext4.img
fusepid=
cleanup() {
	[ -n "$fusepid" ] && kill -TERM "$fusepid" 2>/dev/null || true
	sleep 1
	for m in "$fuse" "$back" "$ext"; do mountpoint -q "$m" 2>/dev/null && { umount "$m" || umount -l "$m"; } || true; done
	rm -f "$img"
}
trap cleanup EXIT
mkdir -p "$ext" "$fuse" "$back"
truncate -s 2G "$img"
mkfs.ext4 -q -F -J size=256 "$img"
mount -o loop "$img" "$ext"
mount -t tmpfs -o size=1G tmpfs "$back"
"$B/lease-faultfs" --backing "$back" --mount "$fuse" --delay "fsync=2ms,fsyncdir=2ms,rename=2ms,create=2ms" >"$W/faultfs.out" 2>"$W/faultfs.err" &
fusepid=$!
for i in $(seq 1 100); do grep -q mounted "$W/faultfs.out" 2>/dev/null && break; sleep 0.1; done
grep -q mounted "$W/faultfs.out"
"$B/benchtool" ids 1024 >"$W/ids"
for d in "$ext" "$fuse"; do
	rm -rf "$d/t"
	"$old" init --root "$d/t" --shards 16 >/dev/null
	"$old" claim --root "$d/t" --now 1000 --ttl 1e9 - <"$W/ids" >"$d/t.held"
	[ "$(wc -l <"$d/t.held")" = 1024 ]
done
variants=(before-concurrent before-sequential before-one-at-a-time before-nosync
	after-concurrent after-sequential after-one-at-a-time after-nosync after-concurrent-leasebench)
cmd_of() {
	case $1 in
	before-concurrent) echo "$old renew-batch" ;;
	before-*) echo "$old renew-batch --strategy ${1#before-}" ;;
	after-concurrent) echo "$B/lease renew-batch" ;;
	after-concurrent-leasebench) echo "$B/leasebench renew-batch --strategy concurrent" ;;
	after-*) echo "$B/leasebench renew-batch --strategy ${1#after-}" ;;
	esac
}
raw=${RAW:-$W/ab.raw}
: >"$raw"
echo "# start $(date -u +%FT%TZ) load $(cut -d' ' -f1-3 /proc/loadavg) head $(cd "$repo" && git rev-parse --short HEAD)" >>"$raw"
# fsync counts: one untimed run each (after: the syncs that reached the filesystem, LEASE_BENCH_COUNTS)
now=1001
for fs in ext4 fuse; do
	d=$ext; [ $fs = fuse ] && d=$fuse
	for v in "${variants[@]}"; do
		now=$((now + 1))
		read -r -a c <<<"$(cmd_of "$v")"
		LEASE_BENCH_COUNTS=$W/counts.json "${c[@]}" --root "$d/t" --now $now --ttl 1e9 --json <"$d/t.held" >"$W/out.json"
		if [[ $v == after-* && $v != after-concurrent ]]; then
			echo "C $fs $v $(jq -r '"\(.directory_syncs) \(.file_syncs) \(.syncfs)"' "$W/counts.json")" >>"$raw"
		else
			echo "C $fs $v $(jq -r '"\(.stats.directory_syncs) \(.stats.file_syncs) -"' "$W/out.json")" >>"$raw"
		fi
	done
done
for rep in $(seq 1 "$REPS"); do
	echo "# rep $rep $(date -u +%T) load $(cut -d' ' -f1-3 /proc/loadavg)" >>"$raw"
	for fs in ${FSES:-ext4 fuse}; do
		d=$ext; [ $fs = fuse ] && d=$fuse
		w=$("$B/benchtool" quiet "${QUIET:-5}")
		echo "# rep $rep $fs waited ${w}s for idle CPUs" >>"$raw"
		for i in "${!variants[@]}"; do
			v=${variants[$(((i + rep) % ${#variants[@]}))]}
			now=$((now + 1))
			read -r -a c <<<"$(cmd_of "$v")"
			sync -f "$d/t"
			res=$("$mt" time "$d/t.held" "$W/out" -- "${c[@]}" --root "$d/t" --now $now --ttl 1e9)
			[ "$(wc -l <"$W/out")" = 1024 ] || { echo "$fs $v renewed $(wc -l <"$W/out")" >&2; exit 1; }
			echo "R $fs $v $res $rep" >>"$raw"
			printf '\r%s rep %d %-5s %-28s %s     ' "$(date +%T)" "$rep" "$fs" "$v" "${res%% *}" >&2
		done
	done
done
echo "# end $(date -u +%FT%TZ) load $(cut -d' ' -f1-3 /proc/loadavg)" >>"$raw"
echo >&2
