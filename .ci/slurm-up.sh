#!/usr/bin/env bash
# The project's copy of ../shared/env/slurm-up.sh: .ci/run runs it before the
# tests, and internal/testenv.NeedSlurm runs it when Slurm is installed but
# not up (commands/slurm_test.go's job-script tests).
#
# slurm-up.sh — bring up a single-node Slurm cluster on this machine (Debian 12,
# Slurm 22.05 from Debian, munge), as root, so that job scripts can be tried with
# `sbatch`/`srun` exactly as HPC users run them. Re-runnable: a second run
# finds the packages installed and the daemons running and changes nothing
# (unless the node is DOWN/DRAIN, which it resumes).
#
#   bash slurm-up.sh            # install (if needed), configure, start, check
#   bash slurm-down.sh          # stop the daemons this script started
#
# Environment:
#   SLURM_CPUS   CPUs the node announces (default 4: oversubscribed on a
#                2-core box so that `-n 4` jobs fit; set to $(nproc) for a
#                faithful node)
#   SLURM_STATE  directory for pid files, logs, spool (default /var/lib/slurm-up)
#
# Nothing here uses cgroups (ProctrackType=proctrack/linuxproc,
# TaskPlugin=task/none), so it works inside containers without systemd and
# without a writable cgroup tree. Daemons run as root (SlurmUser=root); they
# are started directly (no systemd), their pids kept in $SLURM_STATE/*.pid so
# that slurm-down.sh ends exactly these processes and nothing else.
set -euo pipefail

CPUS=${SLURM_CPUS:-4}
STATE=${SLURM_STATE:-/var/lib/slurm-up}
HOST=$(hostname -s)
t0=$(date +%s%N)
say() { local ms=$((($(date +%s%N) - t0) / 1000000)); printf '[slurm-up %4d.%01ds] %s\n' $((ms / 1000)) $((ms % 1000 / 100)) "$*"; }

# 1. Packages. slurm-wlm pulls slurmctld, slurmd, the client tools and the
#    basic plugins (mpi/pmi2 and mpi/pmix_v4 among them on Debian 12).
need=()
for p in slurm-wlm munge; do dpkg -s "$p" >/dev/null 2>&1 || need+=("$p"); done
if ((${#need[@]})); then
  say "installing ${need[*]}"
  export DEBIAN_FRONTEND=noninteractive
  apt-get -o DPkg::Lock::Timeout=300 update -qq
  # policy-rc.d 101: keep the packages' init scripts from starting daemons
  # (we start them ourselves below, with our own config and pid files).
  printf '#!/bin/sh\nexit 101\n' >/usr/sbin/policy-rc.d; chmod +x /usr/sbin/policy-rc.d
  apt-get -o DPkg::Lock::Timeout=300 install -y -qq --no-install-recommends "${need[@]}" >/dev/null
  rm -f /usr/sbin/policy-rc.d
fi
say "packages present: $(dpkg-query -W -f='${Package} ${Version}  ' slurmctld slurmd munge)"

mkdir -p "$STATE"/{log,spool/ctld,spool/d} /run/munge /var/log/munge /var/lib/munge /etc/munge
chown munge:munge /run/munge /var/log/munge /var/lib/munge /etc/munge 2>/dev/null || true

# 2. munge: one key (kept across runs), one daemon.
if [ ! -s /etc/munge/munge.key ]; then
  say "creating munge key"
  dd if=/dev/urandom bs=1 count=1024 of=/etc/munge/munge.key status=none
fi
chown munge:munge /etc/munge/munge.key; chmod 400 /etc/munge/munge.key
alive() { [ -s "$1" ] && kill -0 "$(cat "$1")" 2>/dev/null; }
if ! munge -n </dev/null 2>/dev/null | unmunge >/dev/null 2>&1; then
  say "starting munged"
  # --force: start even if a stale socket from an earlier run is left.
  # munged forks; its pid file is /run/munge/munged.pid.
  runuser -u munge -- /usr/sbin/munged --force
  for _ in $(seq 50); do munge -n </dev/null | unmunge >/dev/null 2>&1 && break; sleep 0.1; done
  cp /run/munge/munged.pid "$STATE/munged.pid"
fi
munge -n </dev/null | unmunge >/dev/null && say "munge ok"

# 3. slurm.conf: one node, one partition, no cgroups, root daemons.
mkdir -p /etc/slurm
cat >/etc/slurm/slurm.conf.new <<EOF
# written by slurm-up.sh
ClusterName=leasetest
SlurmctldHost=$HOST
SlurmUser=root
SlurmdUser=root
AuthType=auth/munge
CredType=cred/munge
StateSaveLocation=$STATE/spool/ctld
SlurmdSpoolDir=$STATE/spool/d
SlurmctldPidFile=$STATE/slurmctld.pid
SlurmdPidFile=$STATE/slurmd.pid
SlurmctldLogFile=$STATE/log/slurmctld.log
SlurmdLogFile=$STATE/log/slurmd.log
SlurmctldDebug=info
SlurmdDebug=info
ProctrackType=proctrack/linuxproc
TaskPlugin=task/none
JobAcctGatherType=jobacct_gather/none
# sacct without slurmdbd: a flat job-completion file (sacct -c reads it)
JobCompType=jobcomp/filetxt
JobCompLoc=$STATE/log/jobcomp.txt
AccountingStorageType=accounting_storage/none
SelectType=select/cons_tres
SelectTypeParameters=CR_Core
# srun without --mpi: no PMI at all (the Debian/Slurm default is none too)
MpiDefault=none
ReturnToService=2
# config_overrides: believe NodeName's CPUs= even when it exceeds the real
# core count (else the node goes INVAL: "Low socket*core*thread count")
SlurmdParameters=config_overrides
SchedulerType=sched/backfill
SlurmdTimeout=60
InactiveLimit=0
KillWait=10
MinJobAge=300
# start-up fast on one node
MessageTimeout=20
NodeName=$HOST CPUs=$CPUS Sockets=1 CoresPerSocket=$CPUS ThreadsPerCore=1 RealMemory=4000 State=UNKNOWN
PartitionName=debug Nodes=$HOST Default=YES MaxTime=INFINITE State=UP OverSubscribe=FORCE:4
EOF
if ! cmp -s /etc/slurm/slurm.conf.new /etc/slurm/slurm.conf; then
  mv /etc/slurm/slurm.conf.new /etc/slurm/slurm.conf; changed=1
  say "wrote /etc/slurm/slurm.conf (CPUs=$CPUS)"
else
  rm /etc/slurm/slurm.conf.new; changed=0
fi
# slurmd reads cgroup.conf only with cgroup plugins; none are used.

# 4. Daemons (root, backgrounded by themselves; pids in $STATE).
if alive "$STATE/slurmctld.pid" && ((changed)); then scontrol reconfigure || true; fi
if ! alive "$STATE/slurmctld.pid"; then
  say "starting slurmctld"
  /usr/sbin/slurmctld -i    # -i: ignore state files from an older config
fi
if ! alive "$STATE/slurmd.pid"; then
  say "starting slurmd"
  /usr/sbin/slurmd
fi

# 5. Wait until the node is idle, resume it if a previous run left it DOWN.
for i in $(seq 120); do
  st=$(sinfo -h -N -n "$HOST" -o %T 2>/dev/null || true)
  case "$st" in
    idle*|mixed*|allocated*) break ;;
    down*|drain*|inval*) scontrol update NodeName="$HOST" State=RESUME 2>/dev/null || true ;;
  esac
  sleep 0.5
done
say "sinfo: $(sinfo -h -o '%P %a %D %T %c')"
# 6. Smoke test: a two-task step.
out=$(timeout 60 srun -n2 -t 1 hostname | sort | uniq -c | tr -s ' ')
say "srun -n2 hostname:$out"
say "up"
