#!/usr/bin/env bash
# mpirun-job.sh: a batch job (Slurm shown; PBS works the same) that keeps
# every lease of a campaign alive from 4 ranks while the workers run.
#
# Workers append the `ID TOKEN` lines they claim to $HELD; one
# `lease renew-batch --watch` job step renews all of them every renewal
# interval, each rank renewing the shards s with s % 4 == rank (docs/design.md#mpi), so
# the fsync load is spread over 4 nodes. It re-reads $HELD every round,
# reports lost leases on stderr as they happen, and when told to stop
# (SIGUSR1 to mpirun, which forwards it to every rank) prints the leases it
# still holds and exits 0. (SIGTERM to mpirun also stops every rank, but
# mpirun then aborts the job and exits non-zero.)
#
# Needs lease built with MPI support (`make` with Open MPI installed); a
# binary without it refuses to run as several ranks (exit 2).
#
#SBATCH --job-name=lease-campaign
#SBATCH --nodes=4
#SBATCH --ntasks-per-node=1
#SBATCH --time=12:00:00
set -u -o pipefail

export LEASE_ROOT=${LEASE_ROOT:-/scratch/$USER/campaign/table}
export LEASE_TTL=${LEASE_TTL:-120}          # a worker that dies loses its items after 2 minutes
export LEASE_RENEW_INTERVAL=${LEASE_RENEW_INTERVAL:-30}
HELD=${HELD:-$LEASE_ROOT/../held}
QUEUE=${QUEUE:-$LEASE_ROOT/../queue}
touch "$HELD"

# The keeper: 4 ranks, one per node, renewing every lease listed in $HELD.
mpirun -np 4 --map-by node lease renew-batch --watch -v "$HELD" > "$HELD.final" 2> keeper.log &
keeper=$!

# The workers: claim items and append them to $HELD; the keeper renews them.
# (Here each claims up to 64 items at once; a real worker would fuzz them.)
srun --ntasks=4 bash -c '
  while held=$(lease claim --first 64 - < "'"$QUEUE"'"); do
    echo "$held" >> "'"$HELD"'"
    # ... work on the claimed items; for each one finished: grep "^$id " "$HELD" | lease complete
    break
  done
'

# End of the job: stop the keeper; it prints what it still holds.
kill -USR1 "$keeper"
wait "$keeper"
echo "keeper exited $?; still held: $(wc -l < "$HELD.final")"
