#!/usr/bin/env bash
# fuzz-wrapper.sh QUEUE: fuzz work items of a campaign until none is free.
#
# QUEUE holds candidate IDs, one per line (lease claim --first reads it as a
# work queue). For each item this wrapper
#   1. claims the first free one:      lease claim --first 1 - < QUEUE
#   2. fuzzes it under its lease:      lease run --token TOKEN ID -- FUZZER
#      (renewed every renewal interval; if the lease is lost the fuzzer gets
#      SIGTERM, then SIGKILL after the grace, and lease run exits 124)
#   3. publishes the findings, fenced: lease complete --publish NAME, run by
#      the fuzzer itself with its LEASE_TOKEN, so that a holder whose lease
#      was lost cannot publish (exit 1, nothing moved).
#
# Environment: LEASE_ROOT (the campaign table, required), LEASE_TTL and
# LEASE_RENEW_INTERVAL as for every lease command, FUZZ_SECONDS (how long to
# fuzz one item, default 5). Run one wrapper per core:
#   for i in $(seq "$(nproc)"); do ./fuzz-wrapper.sh queue & done; wait
set -u -o pipefail

queue=${1:?usage: fuzz-wrapper.sh QUEUE}
: "${LEASE_ROOT:?set LEASE_ROOT to the campaign table}"
export LEASE_OWNER=${LEASE_OWNER:-$(hostname)/fuzz-$$}
export FUZZ_SECONDS=${FUZZ_SECONDS:-5}

# The "fuzzer": a shell loop that writes what it finds into its staging
# directory (LEASE_STAGE, ROOT/stage/ID.TOKEN/, which only this token can
# publish from), then publishes it under its token.
fuzzer='
  out="$LEASE_STAGE/$LEASE_ID.$LEASE_TOKEN.findings"
  end=$(( $(date +%s) + FUZZ_SECONDS ))
  n=0
  while [ "$(date +%s)" -lt "$end" ]; do
    n=$((n + 1))
    input=$(od -An -N8 -tx1 /dev/urandom | tr -d " ")
    case $input in 00*) echo "crash: input $input" >> "$out" ;; esac
    sleep 0.05
  done
  echo "executions: $n" >> "$out"
  echo "$LEASE_ID $LEASE_TOKEN" | lease complete --publish "${out##*/}" > /dev/null
'

# claim --first passes over the candidates that are held or done silently.
while held=$(lease claim --first 1 - < "$queue"); do
  read -r id token <<< "$held"
  echo "$LEASE_OWNER: fuzzing $id (token $token)"
  lease run --token "$token" "$id" -- sh -c "$fuzzer"
  rc=$?
  case $rc in
  0) echo "$LEASE_OWNER: published $LEASE_ROOT/public/$id.$token.findings" ;;
  124) echo "$LEASE_OWNER: lost the lease of $id; another worker will redo it" >&2 ;;
  *) echo "$LEASE_OWNER: $id failed (lease run exit $rc); it is free again" >&2 ;;
  esac
done
echo "$LEASE_OWNER: no free item left"
