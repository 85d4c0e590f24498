#!/usr/bin/env bash
# The project's copy of ../shared/env/slurm-down.sh (see .ci/slurm-up.sh).
# slurm-down.sh — stop the daemons slurm-up.sh started (slurmd, slurmctld,
# munged), by the pids it recorded in $SLURM_STATE (default /var/lib/slurm-up).
# Cancels this cluster's jobs first. Never ends processes by name.
#   PURGE=1 bash slurm-down.sh   also removes $SLURM_STATE (logs, spool)
set -uo pipefail
STATE=${SLURM_STATE:-/var/lib/slurm-up}
command -v scancel >/dev/null && [ -s "$STATE/slurmctld.pid" ] && timeout 10 scancel --full -u root 2>/dev/null
stop() { # stop NAME PIDFILE
  local f=$2 pid
  [ -s "$f" ] || return 0
  pid=$(cat "$f")
  if kill -0 "$pid" 2>/dev/null; then
    kill -TERM "$pid"
    for _ in $(seq 50); do kill -0 "$pid" 2>/dev/null || break; sleep 0.1; done
    kill -0 "$pid" 2>/dev/null && kill -KILL "$pid"
    echo "stopped $1 ($pid)"
  fi
  rm -f "$f"
}
stop slurmd "$STATE/slurmd.pid"
stop slurmctld "$STATE/slurmctld.pid"
stop munged "$STATE/munged.pid"
[ "${PURGE:-0}" = 1 ] && rm -rf "$STATE" && echo "removed $STATE"
exit 0
