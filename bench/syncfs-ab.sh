#!/usr/bin/env bash
# renew-batch of N=1024 held leases in K=16 shards on 2 GiB loop images
# (ext4, XFS; FSES to choose) under /var/tmp: interleaved rounds of
# --sync record, --sync syncfs, --sync auto, the no-fsync floor (lease built
# with -tags lease_powercut_nosync, then sync -f) and the seed's F324
# (bench/leasebench --strategy sequential); whole command timed, medians in
# ms. Then the dirty writer: dd of 1 GiB to the same filesystem, one round
# of record, auto and syncfs each with its own dd. Needs root.
# docs/performance.md "Group commit by the filesystem".
set -euo pipefail
repo=$(cd "$(dirname "$0")/.." && pwd)
W=${W:-/var/tmp/syncfs-ab.$$}
REPS=${REPS:-9}
FSES=${FSES:-"ext4 xfs"}
N=1024
B=$W/bin
mkdir -p "$B"
(cd "$repo" && go build -o "$B/lease" . && go build -tags lease_powercut_nosync -o "$B/lease-nosync" . &&
	cd bench && go build -o "$B/leasebench" ./leasebench)
mnt=$W/mnt img=$W/fs.img
cleanup() {
	mountpoint -q "$mnt" 2>/dev/null && umount "$mnt"
	rm -rf "$W"
}
trap cleanup EXIT
ms() { local a b; a=$(date +%s%N); "$@" >/dev/null; b=$(date +%s%N); echo $(((b - a) / 1000000)); }
median() { sort -n | awk '{v[NR]=$1} END {print v[int((NR+1)/2)]}'; }
dirty() { awk '/^(Dirty|Writeback):/ {s+=$2} END {print int(s/1024)}' /proc/meminfo; }
for fs in $FSES; do
	mkdir -p "$mnt"
	truncate -s 2G "$img"
	case $fs in
	xfs) mkfs.xfs -q -f "$img" ;;
	*) mkfs."$fs" -q -F "$img" ;;
	esac
	mount -o loop "$img" "$mnt"
	export LEASE_ROOT=$mnt/t LEASE_OWNER=bench@host
	"$B/lease" init --shards 16 >/dev/null
	for i in $(seq 1 $N); do printf '%s' "$i" | sha256sum | cut -c1-64; done >"$W/ids"
	"$B/lease" claim --ttl 36000 - <"$W/ids" >"$W/held"
	rb() { "$B/lease" renew-batch --ttl 36000 --sync "$1" "$W/held"; }
	floor() { "$B/lease-nosync" renew-batch --ttl 36000 "$W/held" && sync -f "$mnt"; }
	f324() { "$B/leasebench" --strategy sequential renew-batch --ttl 36000 "$W/held"; }
	: >"$W/t"
	for r in $(seq 1 "$REPS"); do
		for v in record syncfs auto floor f324; do
			sync -f "$mnt"
			case $v in
			floor | f324) t=$(ms $v) ;;
			*) t=$(ms rb $v) ;;
			esac
			echo "$v $t" >>"$W/t"
		done
	done
	echo "$fs: N=$N K=16, $REPS interleaved rounds, medians (min-max) in ms; load $(cut -d' ' -f1-3 /proc/loadavg)"
	for v in record syncfs auto floor f324; do
		m=$(awk -v v=$v '$1==v {print $2}' "$W/t" | median)
		lo=$(awk -v v=$v '$1==v {print $2}' "$W/t" | sort -n | head -1)
		hi=$(awk -v v=$v '$1==v {print $2}' "$W/t" | sort -n | tail -1)
		echo "  $v $m ($lo-$hi)"
	done
	for v in record auto syncfs; do
		dd if=/dev/zero of="$mnt/big" bs=1M count=1024 status=none &
		dd=$!
		while [ "$(dirty)" -lt 300 ] && kill -0 $dd 2>/dev/null; do sleep 0.1; done
		d=$(dirty)
		t=$(ms rb $v)
		wait $dd
		echo "  dirty writer: $v $t ms (Dirty+Writeback $d MiB at the start)"
		rm -f "$mnt/big"
		sync -f "$mnt"
	done
	umount "$mnt"
	rm -f "$img"
done
