#!/usr/bin/env bash
# renew-batch of N held leases (NS, default "64 1024 16384") in K=16 shards
# on 2 GiB loop images (ext4, XFS, btrfs) under /var/tmp and on tmpfs (FSES
# to choose): interleaved rounds of --sync record, --sync syncfs, --sync
# auto, the no-fsync floor (lease built with -tags lease_powercut_nosync,
# then sync -f) and the seed's F324 (bench/leasebench --strategy
# sequential); whole command timed, medians (min-max) in ms, and the ratios
# issue 41 asks for. REPS rounds (default 9; REPS_LARGE, default 5, for N >
# 4096). Then the dirty writer (DIRTY_REPS rounds, default 3; not on
# tmpfs): dd of 1 GiB to the same filesystem, the batch (N=1024) started
# once Dirty+Writeback passed 300 MiB, record, auto and syncfs each with
# its own dd. A filesystem whose mkfs is missing is skipped with a
# message naming its package. Needs root. docs/performance.md "Group
# commit by the filesystem".
set -euo pipefail
repo=$(cd "$(dirname "$0")/.." && pwd)
W=${W:-/var/tmp/syncfs-ab.$$}
REPS=${REPS:-9}
REPS_LARGE=${REPS_LARGE:-5}
DIRTY_REPS=${DIRTY_REPS:-3}
FSES=${FSES:-"ext4 xfs btrfs tmpfs"}
export PATH=$PATH:/usr/sbin:/sbin
fses=
for fs in $FSES; do
	# A filesystem whose mkfs is missing is skipped up front, with the
	# package to install, not met halfway through the run.
	if [ "$fs" = tmpfs ] || command -v "mkfs.$fs" >/dev/null; then
		fses="$fses $fs"
		continue
	fi
	case $fs in xfs) pkg=xfsprogs ;; btrfs) pkg=btrfs-progs ;; ext[234]) pkg=e2fsprogs ;; *) pkg= ;; esac
	echo "bench/syncfs-ab.sh: skipping $fs: mkfs.$fs is not installed${pkg:+ (apt-get install $pkg)}" >&2
done
NS=${NS:-"64 1024 16384"}
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
summ() { # summ FILE V: "median (min-max)" of V's times in FILE
	local m lo hi
	m=$(awk -v v="$2" '$1==v {print $2}' "$1" | median)
	lo=$(awk -v v="$2" '$1==v {print $2}' "$1" | sort -n | head -1)
	hi=$(awk -v v="$2" '$1==v {print $2}' "$1" | sort -n | tail -1)
	echo "$m ($lo-$hi)"
}
med() { awk -v v="$2" '$1==v {print $2}' "$1" | median; }
ratio() { awk -v a="$1" -v b="$2" 'BEGIN {printf "%.2f", a / b}'; }
echo "| fs | N | record | syncfs | auto | floor | F324 | syncfs ÷ floor | auto ÷ floor | record ÷ floor | F324 ÷ syncfs | F324 ÷ auto |"
echo "|---|---:|---|---|---|---|---|---:|---:|---:|---:|---:|"
rb() { "$B/lease" renew-batch --ttl 36000 --sync "$1" "$W/held"; }
floor() { "$B/lease-nosync" renew-batch --ttl 36000 "$W/held" && sync -f "$mnt"; }
f324() { "$B/leasebench" --strategy sequential renew-batch --ttl 36000 "$W/held"; }
for fs in $fses; do
	mkdir -p "$mnt"
	case $fs in
	tmpfs) mount -t tmpfs -o size=2G tmpfs "$mnt" ;;
	*)
		truncate -s 2G "$img"
		case $fs in
		xfs) mkfs.xfs -q -f "$img" ;;
		btrfs) mkfs.btrfs -q -f "$img" ;;
		*) mkfs."$fs" -q -F "$img" ;;
		esac
		mount -o loop "$img" "$mnt"
		;;
	esac
	for N in $NS; do
		export LEASE_ROOT=$mnt/t$N LEASE_OWNER=bench@host
		"$B/lease" init --shards 16 >/dev/null
		for i in $(seq 1 "$N"); do printf '%s' "$i" | sha256sum | cut -c1-64; done >"$W/ids"
		"$B/lease" claim --ttl 36000 - <"$W/ids" >"$W/held$N"
		cp "$W/held$N" "$W/held"
		reps=$REPS
		[ "$N" -gt 4096 ] && reps=$REPS_LARGE
		: >"$W/t"
		for r in $(seq 1 "$reps"); do
			for v in record syncfs auto floor f324; do
				sync -f "$mnt"
				case $v in
				floor | f324) t=$(ms $v) ;;
				*) t=$(ms rb $v) ;;
				esac
				echo "$v $t" >>"$W/t"
			done
		done
		sed "s/^/$fs $N /" "$W/t" >>"$W/raw"
		echo "| $fs | $N | $(summ "$W/t" record) | $(summ "$W/t" syncfs) | $(summ "$W/t" auto) | $(summ "$W/t" floor) | $(summ "$W/t" f324) |" \
			"$(ratio "$(med "$W/t" syncfs)" "$(med "$W/t" floor)") | $(ratio "$(med "$W/t" auto)" "$(med "$W/t" floor)") |" \
			"$(ratio "$(med "$W/t" record)" "$(med "$W/t" floor)") | $(ratio "$(med "$W/t" f324)" "$(med "$W/t" syncfs)") |" \
			"$(ratio "$(med "$W/t" f324)" "$(med "$W/t" auto)") |"
	done
	if [ "$fs" != tmpfs ] && [ "$DIRTY_REPS" -gt 0 ]; then
		export LEASE_ROOT=$mnt/t1024
		if [ ! -s "$W/held1024" ]; then
			"$B/lease" init --shards 16 >/dev/null
			for i in $(seq 1 1024); do printf '%s' "$i" | sha256sum | cut -c1-64; done >"$W/ids"
			"$B/lease" claim --ttl 36000 - <"$W/ids" >"$W/held1024"
		fi
		cp "$W/held1024" "$W/held"
		: >"$W/d"
		for r in $(seq 1 "$DIRTY_REPS"); do
			for v in record auto syncfs; do
				dd if=/dev/zero of="$mnt/big" bs=1M count=1024 status=none &
				dd=$!
				while [ "$(dirty)" -lt 300 ] && kill -0 $dd 2>/dev/null; do sleep 0.1; done
				d=$(dirty)
				t=$(ms rb $v)
				wait $dd
				echo "$v $t $d" >>"$W/d"
				rm -f "$mnt/big"
				sync -f "$mnt"
			done
		done
		echo "dirty writer on $fs (N=1024, $DIRTY_REPS rounds, 1 GiB dd): record $(summ "$W/d" record), auto $(summ "$W/d" auto), syncfs $(summ "$W/d" syncfs) ms; Dirty+Writeback at the start $(awk '{print $3}' "$W/d" | sort -n | head -1)-$(awk '{print $3}' "$W/d" | sort -n | tail -1) MiB"
	fi
	umount "$mnt"
	rm -f "$img" "$W"/held*
done
echo "load $(cut -d' ' -f1-3 /proc/loadavg); raw: ${RAW:-not kept (RAW=FILE keeps it)}"
[ -n "${RAW:-}" ] && cp "$W/raw" "$RAW"
true
