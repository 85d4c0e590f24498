#!/usr/bin/env bash
# fuzz-wrapper.sh [CORPUS_DIR]: fuzz the work items of a campaign from the
# table's own queue until every item is done.
#
# With CORPUS_DIR, first enqueues one item per seed file: its ID is the
# SHA-256 of the file's content, and the file is kept as
# $LEASE_ROOT/../inputs/ID (any wrapper on any node finds it there). Then, for
# each item, this wrapper
#   1. takes the next free item of the queue and fuzzes it under its lease:
#        lease run --next --wait -- FUZZER
#      (renewed every renewal interval; if the lease is lost the fuzzer gets
#      SIGTERM, then SIGKILL after the grace, and lease run exits 124; --wait
#      waits while every item left is held; exit 123 once all are done)
#   2. adds the new inputs the fuzzer found to the queue (lease add: by the
#      SHA-256 of their content, so the same child found twice is one item);
#   3. publishes the findings, fenced: lease complete --publish NAME, run by
#      the fuzzer itself with its LEASE_TOKEN, so that a holder whose lease
#      was lost cannot publish (exit 1, nothing moved).
#
# Environment: LEASE_ROOT (the campaign table, made by lease init; required),
# LEASE_TTL and LEASE_RENEW_INTERVAL as for every lease command, FUZZ_SECONDS
# (how long to fuzz one item, default 5), FUZZ_DEPTH (children are found up
# to inputs of this many lines, default 3, so the example campaign ends).
# Run one wrapper per core:
#   ./fuzz-wrapper.sh corpus/            # once: enqueue the seeds
#   for i in $(seq "$(nproc)"); do ./fuzz-wrapper.sh & done; wait
set -u -o pipefail

: "${LEASE_ROOT:?set LEASE_ROOT to the campaign table (made by lease init)}"
export LEASE_OWNER=${LEASE_OWNER:-$(hostname)/fuzz-$$}
export FUZZ_SECONDS=${FUZZ_SECONDS:-5} FUZZ_DEPTH=${FUZZ_DEPTH:-3}
export INPUTS=${INPUTS:-$LEASE_ROOT/../inputs}
mkdir -p "$INPUTS"

# enqueue FILE...: keep each input under its content hash, then add the IDs.
enqueue() {
  local f id
  for f in "$@"; do
    id=$(lease id --content "$f") || exit
    [ -e "$INPUTS/$id" ] || cp "$f" "$INPUTS/$id.tmp.$$" && mv "$INPUTS/$id.tmp.$$" "$INPUTS/$id"
    echo "$id"
  done | lease add
}
export -f enqueue

if [ $# -gt 0 ]; then
  n=$(enqueue "$1"/* | wc -l) || exit
  echo "$LEASE_OWNER: $n seeds added to the queue"
fi

# The "fuzzer": mutates its input for FUZZ_SECONDS, writes what it finds
# into its staging directory (LEASE_STAGE, ROOT/stage/ID.TOKEN/, which only
# this token can publish from), adds new inputs it found to the queue, then
# publishes its findings under its token.
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
      if [ "$(wc -l < "$INPUTS/$LEASE_ID" 2>/dev/null || echo 0)" -lt "$FUZZ_DEPTH" ]; then
        { cat "$INPUTS/$LEASE_ID" 2>/dev/null; echo "$input"; } > "$new/$n"
      fi ;;
    esac
    sleep 0.05
  done
  echo "executions: $n" >> "$out"
  set -- "$new"/*
  [ -e "$1" ] && enqueue "$@" > /dev/null
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
