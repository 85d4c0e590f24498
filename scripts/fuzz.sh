#!/bin/sh
# Fuzz every go test -fuzz target of the input parsers for a while each and
# print executions and crashes per target.
#
#   scripts/fuzz.sh [SECONDS] [PACKAGE...]
#
# SECONDS defaults to 30 (env FUZZTIME overrides); the packages default to
# every package with a func Fuzz in its tests (make fuzz runs them all). Each new interesting input is minimized for at
# most FUZZMINIMIZE (default 2s): go's default of 60s stalls a short run on
# the first large input found. Crashers are written by go test into
# PACKAGE/testdata/fuzz/TARGET/; the seed corpora are in fixtures/.
# Exit status: 0 when no target crashed, 1 otherwise.
set -u
cd "$(dirname "$0")/.." || exit 2
secs=${1:-${FUZZTIME:-30}}
minimize=${FUZZMINIMIZE:-2s}
[ $# -gt 0 ] && shift
pkgs=${*:-$(grep -rl --include='*_test.go' '^func Fuzz' . | grep -v '^\./bench/' | xargs -n1 dirname | sort -u)}
log=$(mktemp -d "${TMPDIR:-/tmp}/lease-fuzz.XXXXXX")
trap 'rm -rf "$log"' EXIT
status=0
printf '%-12s %-18s %8s %14s %10s %8s\n' package target seconds execs execs/s crashes
for pkg in $pkgs; do
	targets=$(go test -list '^Fuzz' "$pkg" | grep '^Fuzz') || continue
	for t in $targets; do
		out="$log/$(basename "$pkg")-$t.log"
		go test -run '^$' -fuzz "^$t\$" -fuzztime "${secs}s" -fuzzminimizetime "$minimize" "$pkg" >"$out" 2>&1
		rc=$?
		# the last progress line: "fuzz: elapsed: 30s, execs: 123456 (4115/sec), ..."
		execs=$(grep -o 'execs: [0-9]*' "$out" | tail -1 | grep -o '[0-9]*')
		crashes=0
		if [ $rc -ne 0 ]; then
			crashes=$(grep -c 'Failing input written to\|--- FAIL' "$out")
			[ "$crashes" -eq 0 ] && crashes="error"
			status=1
		fi
		rate=$(( ${execs:-0} / secs ))
		printf '%-12s %-18s %8s %14s %10s %8s\n' "$(basename "$pkg")" "$t" "$secs" "${execs:-0}" "$rate" "$crashes"
		if [ $rc -ne 0 ]; then
			sed 's/^/    /' "$out" | tail -20
		fi
	done
done
exit $status
