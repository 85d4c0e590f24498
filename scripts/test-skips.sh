#!/bin/sh
# The skips of make test, listed at its end.
#
#   scripts/test-skips.sh skip WHERE WHY   say a part of make test is skipped:
#                                          print it, append "WHERE: WHY" to
#                                          $LEASE_TEST_SKIPS when set, and exit 1
#                                          under LEASE_TEST_REQUIRE=all (CI)
#   scripts/test-skips.sh list [NAME]      print the lines of $LEASE_TEST_SKIPS,
#                                          one per skip, sorted, under NAME (the
#                                          make target; default "make test")
#
# The tests themselves append their skips to $LEASE_TEST_SKIPS through
# internal/testenv.Missing. Listing never changes make test's exit status.
set -u
case "${1-}" in
skip)
	where=$2 why=$3
	case ",${LEASE_TEST_REQUIRE-}," in
	*,all,*)
		echo "$where: $why (LEASE_TEST_REQUIRE=all forbids skipping)" >&2
		exit 1 ;;
	esac
	echo "skipping $where: $why"
	[ -n "${LEASE_TEST_SKIPS-}" ] && echo "$where: $why" >>"$LEASE_TEST_SKIPS"
	exit 0 ;;
list)
	f=${LEASE_TEST_SKIPS-} name=${2-make test}
	if [ -z "$f" ] || [ ! -s "$f" ]; then
		echo "$name: nothing skipped"
		exit 0
	fi
	echo "$name: $(sort -u "$f" | wc -l | tr -d ' ') skipped (install the packages named to run them; LEASE_TEST_REQUIRE=all makes a skip a failure):"
	sort -u "$f" | sed 's/^/  /'
	exit 0 ;;
*)
	echo "usage: $0 skip WHERE WHY | list [NAME]" >&2
	exit 2 ;;
esac
