#!/usr/bin/env bash
# bench/mpi.sh: `lease renew-batch` as one program under mpirun (docs/design.md#mpi)
# with 1, 2 and 4 ranks, renewing 8192 leases spread evenly over 64 shards
# of a table on a freshly made, loop-mounted, journaled ext4 image.
#
# usage: bench/mpi.sh [--reps R] [--leases N] [--out FILE]
#   --reps R     timed repetitions per variant (default 7); medians
#   --leases N   leases renewed per run (default 8192)
#   --out FILE   where the Markdown goes (default bench/results/mpi.md)
#
# Variants: 1 rank, and 2 and 4 ranks twice: with Open MPI as installed,
# and with Open MPI told to use only its shared-memory and TCP transports
# (OMPI_MCA_pml=ob1 OMPI_MCA_btl=self,vader,tcp OMPI_MCA_osc=^ucx), which
# skips probing for UCX/OFI/InfiniBand in MPI_Init: the setting of a host
# without such a fabric. Each timed sample is one whole
# `mpirun -np P lease renew-batch -v HELD` job (the filter's text output,
# as `renew-batch < held > held.new`), fork to wait (bench/benchtool
# time), so it includes starting the ranks and MPI_Init; lease's own
# numbers come from its -v statistics on stderr: duration (the longest
# rank, from its start to its last renewal, MPI_Init included), the
# collective time (the least time any rank spent in collectives: their
# cost without waiting for slower ranks) and ranks. Variants are
# interleaved round-robin with a rotating order, the filesystem is synced
# before each run, and the script waits (at most $QUIET_MAX s, default 5)
# for idle CPUs before each run: the machine is shared. With 1 rank, lease
# runs as a plain process (mpirun -np 1 starts it; MPI is not initialized).
# One untimed --json run per variant checks the fsync counts. Input is a
# FILE argument and mpirun forwards no stdin (--stdin none): Open MPI 4.x's
# mpirun now and then crashes forwarding stdin to a rank that runs for
# seconds (open-mpi/ompi#7483). Needs root (loop mount), Open MPI
# (mpirun, pkg-config ompi), jq.
set -euo pipefail

here=$(cd "$(dirname "$0")" && pwd)
repo=$(dirname "$here")
work=$here/work/mpi
reps=7
n=8192
k=64
out=$here/results/mpi.md
quiet_max=${QUIET_MAX:-5}
variants=(1 2 4 2-ob1 4-ob1)
ob1=(OMPI_MCA_pml=ob1 OMPI_MCA_btl=self,vader,tcp OMPI_MCA_osc=^ucx)

while [ $# -gt 0 ]; do
	case $1 in
	--reps) reps=$2; shift ;;
	--leases) n=$2; shift ;;
	--out) out=$2; shift ;;
	-h|--help) sed -n '2,31p' "$0" | sed 's/^# \{0,1\}//'; exit 0 ;;
	*) echo "bench/mpi.sh: unknown argument $1 (see --help)" >&2; exit 2 ;;
	esac
	shift
done
if [ "$(id -u)" != 0 ]; then
	echo "bench/mpi.sh: needs root to loop-mount the ext4 image" >&2
	exit 2
fi
for tool in mpirun jq mkfs.ext4; do
	if ! command -v "$tool" >/dev/null 2>&1; then
		echo "bench/mpi.sh: $tool not found (apt-get install openmpi-bin libopenmpi-dev jq e2fsprogs)" >&2
		exit 2
	fi
done
if ! pkg-config --exists ompi 2>/dev/null; then
	echo "bench/mpi.sh: pkg-config ompi fails: install libopenmpi-dev pkg-config" >&2
	exit 2
fi
export OMPI_ALLOW_RUN_AS_ROOT=1 OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1

mnt=$work/mnt
img=$work/ext4.img
cleanup() {
	if mountpoint -q "$mnt" 2>/dev/null; then
		umount "$mnt" 2>/dev/null || umount -l "$mnt" 2>/dev/null || true
	fi
	rm -f "$img"
}
trap cleanup EXIT
trap 'exit 130' INT TERM

mkdir -p "$work" "$(dirname "$out")"
echo "building lease (-tags mpi) and benchtool" >&2
(cd "$repo" && go build -tags mpi -o "$work/lease" . && cd "$here" && go build -o "$work/benchtool" ./benchtool)
lease=$work/lease
tool=$work/benchtool
"$lease" version | grep -q "with MPI support" || { echo "bench/mpi.sh: $lease has no MPI support" >&2; exit 1; }

if mountpoint -q "$mnt" 2>/dev/null; then umount "$mnt"; fi
rm -f "$img"
truncate -s 1G "$img"
mkfs.ext4 -q -F "$img" # mkfs defaults: has_journal, data=ordered
mkdir -p "$mnt"
mount -o loop "$img" "$mnt"

t=$mnt/table
held=$work/held
"$tool" ids "$n" >"$work/ids"
"$lease" init --root "$t" --shards "$k" >/dev/null
"$lease" claim --root "$t" --now 1000 --ttl 1e9 - <"$work/ids" >"$held"
if [ "$(wc -l <"$held")" != "$n" ]; then
	echo "bench/mpi.sh: claimed $(wc -l <"$held") of $n leases" >&2
	exit 1
fi

# mpijob VARIANT CMD ARGS...: the command line of CMD on the variant's ranks.
mpijob() {
	local v=$1
	shift
	local env=(env)
	case $v in
	*-ob1) env+=("${ob1[@]}") ;;
	esac
	echo "${env[@]}" mpirun --oversubscribe --bind-to none --stdin none -np "${v%-ob1}" "$@"
}

raw=${out%.md}.raw
: >"$raw"
now=1001
# One untimed run per variant: warms the page cache and the binary, and
# checks the statistics: one file fsync per lease, one directory fsync per
# shard, summed over the ranks.
for v in "${variants[@]}"; do
	now=$((now + 1))
	# shellcheck disable=SC2046
	$(mpijob "$v" "$lease" renew-batch --root "$t" --now "$now" --ttl 1e9 --json "$held") </dev/null >"$work/out.json"
	jq -r --arg v "$v" '"C \($v) \(.stats.renewals) \(.stats.file_syncs) \(.stats.directory_syncs) \(.stats.ranks // 1) \(.exit)"' \
		"$work/out.json" >>"$raw"
done
# The cost of starting a job of P ranks that does nothing (no MPI_Init).
for rep in $(seq 1 "$reps"); do
	for v in 1 2 4; do
		# shellcheck disable=SC2046
		ms=$("$tool" time /dev/null /dev/null -- $(mpijob "$v" /bin/true))
		echo "L $v $ms" >>"$raw"
	done
done

load_start=$(cut -d' ' -f1-3 /proc/loadavg)
nv=${#variants[@]}
for rep in $(seq 1 "$reps"); do
	for i in $(seq 0 $((nv - 1))); do
		v=${variants[$(((i + rep) % nv))]}
		now=$((now + 1))
		waited=$("$tool" quiet "$quiet_max")
		sync -f "$t"
		# shellcheck disable=SC2016,SC2046
		ms=$("$tool" time /dev/null "$work/out.txt" -- sh -c 'exec "$@" 2>"$0"' "$work/err.txt" \
			$(mpijob "$v" "$lease" renew-batch --root "$t" --now "$now" --ttl 1e9 -v "$held"))
		renewals=$(wc -l <"$work/out.txt")
		dur=$(sed -n 's/.* renewals=[0-9]* .* duration=\([0-9.]*\)s .*/\1/p' "$work/err.txt")
		coll=$(sed -n 's/.*collective_time=\([0-9.]*\)s.*/\1/p' "$work/err.txt")
		ranks=$(sed -n 's/.* ranks=\([0-9]*\) .*/\1/p' "$work/err.txt")
		if [ "$renewals" != "$n" ] || [ -z "$dur" ]; then
			echo "bench/mpi.sh: $v printed $renewals of $n lines; stderr: $(cat "$work/err.txt")" >&2
			exit 1
		fi
		echo "T $v $ms $dur ${coll:-0} ${ranks:-1} $rep $waited" >>"$raw"
		printf '\rrep %d/%d %-6s' "$rep" "$reps" "$v" >&2
	done
done
echo >&2
load_end=$(cut -d' ' -f1-3 /proc/loadavg)

# median of the numbers on stdin
median() { sort -g | awk '{ v[NR] = $1 } END { if (NR == 0) { print "nan"; exit } if (NR % 2) print v[(NR + 1) / 2]; else print (v[NR / 2] + v[NR / 2 + 1]) / 2 }'; }
# col VARIANT FIELD: that field of the variant's timed samples
col() { awk -v v="$1" -v c="$2" '$1 == "T" && $2 == v { print $c }' "$raw"; }
# share VARIANT: collective time ÷ lease's duration, per sample
share() { awk -v v="$1" '$1 == "T" && $2 == v && $5 > 0 { print $6 / $5 }' "$raw"; }

{
	echo "# lease renew-batch under mpirun: 1, 2 and 4 ranks"
	echo
	echo "Measured $(date -u +%Y-%m-%dT%H:%MZ) by \`bench/mpi.sh --reps $reps --leases $n\`" \
		"at commit $(cd "$repo" && git rev-parse --short HEAD)$(cd "$repo" && git diff --quiet HEAD -- commit commands leasefmt mpi || echo ' (with uncommitted changes)')."
	echo
	echo "Each run: one \`mpirun --stdin none -np P lease renew-batch -v HELD\` renewing $n leases spread evenly over"
	echo "$k shards of a table on a 1 GiB journaled ext4 image (loop device on the root filesystem). Rank r"
	echo "renews the shards s with s % P == r; rank 0 reads the input, broadcasts it, gathers the results and"
	echo "prints them. Medians of $reps runs per variant, interleaved round-robin. *Job* is fork to wait of"
	echo "mpirun (starting the ranks and MPI_Init included); *lease* is lease's own duration (the longest rank,"
	echo "MPI_Init included); *collectives* is the least time any rank spent in Bcast/AllGather/Gather (their"
	echo "cost, without waiting for slower ranks); *job CPU* is the user+system time of mpirun and its ranks."
	echo "With 1 rank lease runs as a plain process (no MPI_Init). *ob1* variants run Open MPI with"
	echo "\`${ob1[*]}\`: only its shared-memory and TCP transports,"
	echo "without probing for UCX/OFI/InfiniBand in MPI_Init (right for hosts without such a fabric)."
	echo
	echo "## Machine"
	echo
	echo "- CPU: $(nproc) cores, $(grep -m1 'model name' /proc/cpuinfo | cut -d: -f2- | sed 's/^ *//'); 4 ranks are oversubscribed"
	echo "- kernel: $(uname -r); Open MPI $(mpirun --version 2>/dev/null | head -1 | awk '{print $NF}'); $(go version | cut -d' ' -f3)"
	echo "- filesystem: \`$(findmnt -n -o SOURCE,FSTYPE,OPTIONS --target "$mnt" | tr -s ' ')\`"
	echo "- load average (1, 5, 15 min) before the timed runs: $load_start; after: $load_end"
	echo "  (the machine is shared with other engineers' builds and tests; idle waits in the .raw file)"
	echo
	echo "## Fsyncs (one untimed --json run per variant)"
	echo
	echo "| variant | renewals | file fsyncs | directory fsyncs | ranks reported | exit |"
	echo "| --- | ---: | ---: | ---: | ---: | ---: |"
	awk '$1 == "C" { printf "| %s | %s | %s | %s | %s | %s |\n", $2, $3, $4, $5, $6, $7 }' "$raw"
	echo
	echo "## Throughput"
	echo
	echo "| variant | job (ms) | renewals/s (job) | × 1 rank | lease (ms) | renewals/s (lease) | × 1 rank | collectives (ms) | collectives ÷ lease | job CPU (ms) | empty job (ms) |"
	echo "| --- | ---: | ---: | ---: | ---: | ---: | ---: | ---: | ---: | ---: | ---: |"
	base_job=$(col 1 3 | median)
	base_dur=$(col 1 5 | median)
	for v in "${variants[@]}"; do
		job=$(col "$v" 3 | median)
		dur=$(col "$v" 5 | median)
		coll=$(col "$v" 6 | median)
		sh=$(share "$v" | median)
		cpu=$(col "$v" 4 | median)
		empty=$(awk -v np="${v%-ob1}" '$1 == "L" && $2 == np { print $3 }' "$raw" | median)
		awk -v v="$v" -v n="$n" -v job="$job" -v dur="$dur" -v coll="$coll" -v sh="$sh" \
			-v bj="$base_job" -v bd="$base_dur" -v empty="$empty" -v cpu="$cpu" 'BEGIN {
			printf "| %s | %.0f | %.0f | %.2f | %.0f | %.0f | %.2f | %.1f | %.1f%% | %.0f | %.0f |\n",
				v, job, n / (job / 1000), bj / job, dur * 1000, n / dur, bd / dur, coll * 1000, sh * 100, cpu, empty
		}'
	done
	echo
	echo "## Goals"
	echo
	for v in 4 4-ob1; do
		awk -v v="$v" -v j1="$(col 1 3 | median)" -v j4="$(col "$v" 3 | median)" -v d1="$(col 1 5 | median)" -v d4="$(col "$v" 5 | median)" 'BEGIN {
			r = j1 / j4; s = d1 / d4
			printf "- %s ranks no slower than 0.9 × 1 rank: whole job %.2f × (%s), lease alone %.2f × (%s)\n",
				v, r, (r >= 0.9 ? "met" : "NOT met"), s, (s >= 0.9 ? "met" : "NOT met")
		}'
	done
	for v in 2 4 2-ob1 4-ob1; do
		awk -v v="$v" -v s="$(share "$v" | median)" -v w="$(share "$v" | sort -g | tail -1)" 'BEGIN {
			printf "- collectives under 5%% of the time, %s ranks: median %.1f%%, worst run %.1f%% of lease'"'"'s duration (%s)\n",
				v, s * 100, w * 100, (s < 0.05 ? "met" : "NOT met")
		}'
	done
	echo
	echo "Raw samples: \`$(basename "$raw")\` (T variant job_ms cpu_ms duration_s collective_s ranks rep waited_s;"
	echo "L ranks empty_job_ms cpu_ms; C variant renewals file_syncs directory_syncs ranks exit)."
} >"$out"
cat "$out"
