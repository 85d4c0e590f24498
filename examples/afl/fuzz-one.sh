#!/bin/sh
# fuzz-one.sh: fuzz one work item with AFL++, under lease work (or lease
# run --next --complete). The item's
# input is LEASE_INPUT (the item was added with lease add --content); the
# fuzzer runs for FUZZ_SECONDS (afl-fuzz -V), its findings are left in
# LEASE_STAGE for lease work (or lease run --complete) to publish as its result
# (ROOT/public/ID/: crashes/ and fuzzer_stats, the same names in every
# instance, never colliding), and new inputs it found are added to the
# queue with their content, so the campaign grows (a failed lease add of
# them fails the item, which then runs again). A seed that itself
# crashes the target (seeds/poison-00) makes afl-fuzz refuse to start: the
# run fails (exit 1, the end of afl-fuzz's log on stderr), an attempt is
# counted, and after max_attempts the item is failed.
#
#   lease add --content seeds/* > /dev/null
#   lease work -- ./fuzz-one.sh          # on every core
#
# Environment: FUZZ_TARGET (default: ./target beside this script, made by
# build.sh), FUZZ_SECONDS (default 2), FUZZ_CHILDREN (new inputs added per
# item, default 2), FUZZ_MAX_ITEMS (no children are added once the table
# holds this many items, default 60, so that the campaign ends; workers
# adding at once may pass it by a few).
set -eu
: "${LEASE_INPUT:?fuzz-one.sh runs under lease work, for an item added with lease add --content}"
: "${LEASE_STAGE:?fuzz-one.sh runs under lease work}"
here=$(cd "$(dirname "$0")" && pwd)
target=${FUZZ_TARGET:-$here/target}
seconds=${FUZZ_SECONDS:-2}
children=${FUZZ_CHILDREN:-2}
max_items=${FUZZ_MAX_ITEMS:-60}

work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT
mkdir "$work/in"
cp "$LEASE_INPUT" "$work/in/input"

# One instance per item, no UI, no CPU binding (workers share the cores),
# and no complaints about the machine's core_pattern or CPU governor.
export AFL_SKIP_CPUFREQ=1 AFL_NO_AFFINITY=1 AFL_I_DONT_CARE_ABOUT_MISSING_CRASHES=1 AFL_NO_UI=1
if ! afl-fuzz -V "$seconds" -i "$work/in" -o "$work/out" -- "$target" @@ > "$work/afl.log" 2>&1; then
  tail -n 20 "$work/afl.log" >&2
  exit 1
fi
found=$work/out/default

# The findings: the item's result, published whole by lease run --complete.
if [ -n "$(find "$found/crashes" -name 'id:*' 2>/dev/null | head -n 1)" ]; then
  mkdir "$LEASE_STAGE/crashes"
  cp "$found"/crashes/id:* "$LEASE_STAGE/crashes/"
fi
cp "$found/fuzzer_stats" "$LEASE_STAGE/"

# New inputs (not the item's own, orig:), while the campaign is small:
# its items are the records plus the queued items never claimed (free).
# A lease add that fails (a full disk, an I/O error) fails the item: done,
# it would never be fuzzed again and the new inputs would be lost; failed,
# it runs again (with no attempt counted when the table's filesystem had
# no room).
# (The top-level counts, before the first nested object: "inodes" has a
# "free" of its own.)
summary=$(lease status --summary --json)
records=$(printf '%s\n' "$summary" | sed 's/^{[^{}]*"records":\([0-9]*\).*/\1/')
free=$(printf '%s\n' "$summary" | sed 's/^{[^{}]*"free":\([0-9]*\).*/\1/')
if [ $((records + free)) -lt "$max_items" ]; then
  if ! find "$found/queue" -maxdepth 1 -type f -name 'id:*' ! -name '*orig:*' | head -n "$children" |
    tr '\n' '\0' | lease add --content --null - > /dev/null; then
    echo "fuzz-one.sh: lease add of the new inputs failed: the item fails, to be fuzzed again" >&2
    exit 1
  fi
fi
