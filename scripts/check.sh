#!/usr/bin/env bash
# make check: every test of the repository, as CI (.ci/run) runs them.
#
# Two lanes at once, one per core of a 2-core machine, each into a log of its
# own: make test (everything but the cluster suites, internal/safety's crash
# states sampled) and then make test-nfs (NFS in User-Mode Linux kernels),
# beside make test-cluster (GlusterFS, CephFS, Slurm and power cuts, one
# package at a time) and then make test-long (internal/safety's full
# enumeration): about as long as each other. When both lanes are done their logs are
# printed whole, then the skips of each target and the targets that failed.
# The exit status is 1 when any target failed (a skip fails a target only
# under LEASE_TEST_REQUIRE=all, which .ci/run sets).
set -u
cd "$(dirname "$0")/.."
MAKE=${MAKE:-make}
logs=$(mktemp -d)
trap 'rm -rf "$logs"' EXIT

lane() { # lane NAME TARGET...: run make TARGET in turn into $logs/NAME.log
	local name=$1 target
	shift
	for target in "$@"; do
		echo "=== make $target ($(date -u +%T))" >>"$logs/$name.log"
		if ! $MAKE --no-print-directory "$target" >>"$logs/$name.log" 2>&1; then
			echo "make $target" >>"$logs/failed"
		fi
		echo "=== make $target done ($(date -u +%T))" >>"$logs/$name.log"
	done
}

start=$(date +%s)
lane tests test test-nfs &
lane cluster test-cluster test-long &
wait
for name in tests cluster; do
	echo "===== make check: lane $name"
	cat "$logs/$name.log"
done

# The skips, target by target (each target also lists its own at its end,
# in its lane's log above); the files are the Makefile's LEASE_TEST_SKIPS.
echo "===== make check: skips"
for target in test test-nfs test-cluster test-long; do
	f=.test-skips-${target#test-}
	[ "$target" = test ] && f=.test-skips
	LEASE_TEST_SKIPS="$PWD/$f" scripts/test-skips.sh list "make $target"
done
echo "make check: $(($(date +%s) - start)) s"
if [ -s "$logs/failed" ]; then
	echo "make check: failed: $(paste -sd, "$logs/failed")"
	exit 1
fi
echo "make check: make test, make test-nfs, make test-cluster and make test-long passed"
