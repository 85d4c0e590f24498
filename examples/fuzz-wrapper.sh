#!/usr/bin/env bash
# fuzz-wrapper.sh [CORPUS_DIR]: a fuzzing campaign from the table's own
# queue, one wrapper per core.
#
# With CORPUS_DIR, it adds one item per seed file and returns: the item's
# ID is the SHA-256 of the file's content, and the content is stored in the
# table with it (lease add --content; a seed added twice is one item). Run
# it once. Without arguments it is a worker: for each item, it
#   1. takes the next free item of the queue and fuzzes its input, at
#      LEASE_INPUT, under its lease:
#        lease run --next --wait -- FUZZER
#      (renewed every renewal interval; if the lease is lost the fuzzer, and
#      everything it started, gets SIGTERM, then SIGKILL after the grace,
#      and lease run exits 124; --wait waits while every item left is held;
#      exit 123 once all are done)
#   2. adds the new inputs the fuzzer found to the queue, with their
#      content (lease add --content: the same child found twice is one item);
#   3. publishes the findings, fenced: lease complete --publish NAME, run by
#      the fuzzer itself with its LEASE_TOKEN, so that a holder whose lease
#      was lost cannot publish (exit 1, nothing moved).
#
# Environment: LEASE_ROOT (the campaign table, made by lease init; required),
# LEASE_TTL and LEASE_RENEW_INTERVAL as for every lease command, FUZZ_SECONDS
# (how long to fuzz one item, default 5), FUZZ_DEPTH (children are found up
# to inputs of this many lines, default 3, so the example campaign ends).
#   ./fuzz-wrapper.sh corpus/            # once: add the seeds (returns)
#   for i in $(seq "$(nproc)"); do ./fuzz-wrapper.sh & done; wait
set -u -o pipefail

: "${LEASE_ROOT:?set LEASE_ROOT to the campaign table (made by lease init)}"
export LEASE_OWNER=${LEASE_OWNER:-$(hostname)/fuzz-$$}
export FUZZ_SECONDS=${FUZZ_SECONDS:-5} FUZZ_DEPTH=${FUZZ_DEPTH:-3}

if [ $# -gt 0 ]; then
  set -- "$1"/*
  [ -e "$1" ] || { echo "$LEASE_OWNER: no seed files" >&2; exit 2; }
  n=$(lease add --content "$@" | wc -l) || exit
  echo "$LEASE_OWNER: $n seeds added to the queue"
  exit 0
fi

# The "fuzzer": mutates its input ($LEASE_INPUT) for FUZZ_SECONDS, writes
# what it finds into its staging directory (LEASE_STAGE, ROOT/stage/ID.TOKEN/,
# which only this token can publish from), adds new inputs it found to the
# queue, then publishes its findings under its token.
fuzzer='
  out="$LEASE_STAGE/$LEASE_ID.$LEASE_TOKEN.findings"
  new=$(mktemp -d)
  end=$(( $(date +%s) + FUZZ_SECONDS ))
  n=0
  while [ "$(date +%s)" -lt "$end" ]; do
    n=$((n + 1))
    input=$(od -An -N8 -tx1 /dev/urandom | tr -d " ")
    case $input in
    00*) echo "crash: input $input" >> "$out" ;;
    f*) # "new coverage": a child input, the parent plus one line, up to FUZZ_DEPTH lines
      if [ "$(wc -l < "$LEASE_INPUT")" -lt "$FUZZ_DEPTH" ]; then
        { cat "$LEASE_INPUT"; echo "$input"; } > "$new/$n"
      fi ;;
    esac
    sleep 0.05
  done
  echo "executions: $n" >> "$out"
  set -- "$new"/*
  if [ -e "$1" ]; then lease add --content "$@" > /dev/null || exit; fi
  rm -rf "$new"
  echo "$LEASE_ID $LEASE_TOKEN" | lease complete --publish "${out##*/}" > /dev/null
'

while :; do
  lease run --next --wait -- bash -c "$fuzzer"
  case $? in
  0) ;;
  123) break ;; # every queued item is done
  124) echo "$LEASE_OWNER: lost a lease; another worker will redo its item" >&2 ;;
  *) echo "$LEASE_OWNER: an item failed; it is free again" >&2 ;;
  esac
done
echo "$LEASE_OWNER: the queue is empty: campaign done"
