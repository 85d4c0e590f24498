#!/usr/bin/env bash
# cephfs-down.sh — undo cephfs-up.sh: unmount the ceph-fuse clients, stop the
# MDS, the OSD, the manager and the monitor. Idempotent.
#
#   cephfs-down.sh            stop everything and drop the cluster's data: the memstore OSD
#                             does not bring its objects back after a stop (tried), so the
#                             next cephfs-up.sh makes a new cluster and file system (seconds);
#                             the configuration and the logs stay
#   cephfs-down.sh --mounts   only unmount the clients (e.g. to remount with other options;
#                             the cluster and the file system's data stay)
#   cephfs-down.sh --purge    also delete the configuration, the logs and the mount points
#
# Only processes named by the pid files under $CEPH are signalled, and only
# when the pid runs a Ceph program with this cluster's configuration on its
# command line, never by name.
# Environment: CEPH, CEPH_MOUNTS as for cephfs-up.sh.
set -uo pipefail
CEPH=${CEPH:-/tmp/lease-ceph}
MOUNTS=${CEPH_MOUNTS:-"mA:a mB:b"}
RUN=$CEPH/run CONF=$CEPH/etc/ceph.conf
MODE=${1:-}
case $MODE in ""|--mounts|--purge) ;; *) echo "cephfs-down: unknown argument $MODE" >&2; exit 2 ;; esac
[ "$(id -u)" = 0 ] || { echo "cephfs-down: must run as root" >&2; exit 1; }

# alive PIDFILE: as in cephfs-up.sh.
alive() {
    local pid
    pid=$(cat "$1" 2>/dev/null) || return 1
    [ -n "$pid" ] && kill -0 "$pid" 2>/dev/null || return 1
    tr '\0' ' ' <"/proc/$pid/cmdline" 2>/dev/null | grep -q "ceph-[a-z]* .*$CONF"
}

# stop_pid PIDFILE NAME: SIGTERM, wait up to 15 s, then SIGKILL.
stop_pid() {
    local pf=$1 name=$2 pid
    alive "$pf" || { rm -f "$pf"; return 0; }
    pid=$(cat "$pf")
    kill -TERM "$pid" 2>/dev/null
    for _ in $(seq 150); do kill -0 "$pid" 2>/dev/null || break; sleep 0.1; done
    if kill -0 "$pid" 2>/dev/null; then
        echo "cephfs-down: $name (pid $pid) ignored SIGTERM; SIGKILL"
        kill -KILL "$pid" 2>/dev/null; sleep 0.5
    fi
    rm -f "$pf"
    echo "cephfs-down: stopped $name (pid $pid)"
}

# --- 1. the clients --------------------------------------------------------------
# A ceph-fuse client unmounts and exits on SIGTERM. One that does not (or a
# mount whose client was killed) is detached with umount -l; killing the
# client aborts the FUSE connection, which also releases every process stuck
# in a request on it.
mps=()
for m in $MOUNTS; do mps+=("$CEPH/${m%%:*}"); done
for pf in "$RUN"/client.*.pid; do
    [ -e "$pf" ] || continue
    stop_pid "$pf" "$(basename "$pf" .pid)"
done
# Every mount of this cluster, named or not (a client started with other
# CEPH_MOUNTS): the FUSE mounts below $CEPH.
while read -r _ mp typ _; do
    case $typ in fuse|fuse.ceph-fuse) ;; *) continue ;; esac
    case $mp in "$CEPH"/*) mps+=("$mp") ;; esac
done </proc/mounts
for mp in "${mps[@]}"; do
    if mountpoint -q "$mp" 2>/dev/null || grep -q " $mp fuse" /proc/mounts; then
        umount "$mp" 2>/dev/null || umount -l "$mp" 2>/dev/null || true
        echo "cephfs-down: unmounted $mp"
    fi
done
[ "$MODE" = --mounts ] && exit 0

# --- 2. the daemons, the file system's first ---------------------------------------
for d in mds.a osd.0 mgr.x mon.a; do stop_pid "$RUN/$d.pid" "$d"; done

rm -rf "$CEPH/data" "$CEPH/run"
rm -f "$CEPH/etc/fsid"
if [ "$MODE" = --purge ]; then
    for mp in "${mps[@]}"; do rmdir "$mp" 2>/dev/null; done
    rm -rf "$CEPH/etc" "$CEPH/log" "$CEPH/crash"
    rmdir "$CEPH" 2>/dev/null
    echo "cephfs-down: purged the cluster's state and logs under $CEPH"
else
    echo "cephfs-down: dropped the cluster's data under $CEPH (the configuration and logs stay)"
fi
echo "cephfs-down: done"
