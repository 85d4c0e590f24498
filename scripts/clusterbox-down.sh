#!/usr/bin/env bash
# clusterbox-down.sh — undo clusterbox-up.sh: stop what still runs in the
# nodes, drop their namespaces, unmount the clients, stop the box's
# GlusterFS (gluster-down.sh with the box's $GL) or Ceph cluster
# (cephfs-down.sh with the box's $CEPHDIR: the box is on the filesystem
# $BOX/fs names, else LEASE_BOX_FS), remove the network and release the
# filesystem's lock. Idempotent.
#
#   clusterbox-down.sh           keep the volume and its bricks (clusterbox-up.sh brings the data back)
#   clusterbox-down.sh --purge   also delete the volume, bricks and glusterd state under $GL
#                                (the Ceph cluster's state under $CEPHDIR)
#
# Processes are signalled only by pid: those `ip netns pids` lists in the
# box's network namespaces (what mpirun left there: orted, ranks) and the
# pid files under $GL (or $CEPHDIR) and $BOX. Environment: LEASE_BOX,
# LEASE_BOX_GL, LEASE_BOX_CEPH, LEASE_BOX_FS, LEASE_BOX_NODES as for
# clusterbox-up.sh.
set -uo pipefail
BOX=${LEASE_BOX:-/run/lease-box}
GL=${LEASE_BOX_GL:-/tmp/lease-box-gluster}
NODES=${LEASE_BOX_NODES:-"A B"}
[ -r "$BOX/nodes" ] && NODES=$(awk '{printf "%s ", $1}' "$BOX/nodes")
FS=${LEASE_BOX_FS:-gluster}
[ -s "$BOX/fs" ] && FS=$(cat "$BOX/fs")
CEPHDIR=${LEASE_BOX_CEPH:-/tmp/lease-box-ceph}
case $FS in
    cephfs) LOCK=/tmp/lease-ceph.lock ;;
    *) LOCK=/tmp/lease-gluster.lock ;;
esac
BRIDGE=leasebox0
HERE=$(cd "$(dirname "$0")" && pwd)
export PATH="$PATH:/usr/sbin:/sbin"
say() { echo "clusterbox-down: $*"; }
[ "$(id -u)" = 0 ] || { echo "clusterbox-down: must run as root" >&2; exit 1; }

# --- 1. what runs in the nodes, except their filesystem clients ------------
for x in $NODES; do
    ns=leasebox$x
    [ -e "/run/netns/$ns" ] || continue
    if [ "$FS" = cephfs ]; then
        client=$(cat "$CEPHDIR/run/client.node$x.pid" 2>/dev/null || true)
    else
        client=$(cat "$GL/run/node$x.pid" 2>/dev/null || true)
    fi
    for sig in TERM KILL; do
        pids=$(ip netns pids "$ns" 2>/dev/null | grep -vx "${client:-none}" || true)
        [ -n "$pids" ] || break
        say "node$x: SIG$sig to $(echo $pids)"
        kill -"$sig" $pids 2>/dev/null
        for _ in $(seq 30); do
            [ -z "$(ip netns pids "$ns" 2>/dev/null | grep -vx "${client:-none}")" ] && break
            sleep 0.1
        done
    done
done

# --- 2. the nodes' UTS and mount namespaces ---------------------------------
for f in "$BOX"/ns/uts* "$BOX"/ns/mnt*; do
    [ -e "$f" ] || continue
    mountpoint -q "$f" && umount "$f"
    rm -f "$f"
done
mountpoint -q "$BOX/ns" && umount "$BOX/ns"

# --- 3. the filesystem: the node clients, the host client, the servers -----
if [ "$FS" = cephfs ]; then
    mounts="host:host"
    for x in $NODES; do mounts="$mounts node$x:node$x"; done
    if [ -d "$CEPHDIR" ]; then
        CEPH=$CEPHDIR CEPH_MOUNTS=$mounts bash "$HERE/cephfs-down.sh" ${1:+"$1"} | sed 's/^/  /'
    fi
else
    mounts="host"
    for x in $NODES; do mounts="$mounts node$x"; done
    if [ -d "$GL" ]; then
        GL=$GL GL_VOL=leasebox GL_MOUNTS=$mounts bash "$HERE/gluster-down.sh" ${1:+"$1"} | sed 's/^/  /'
    fi
fi

# --- 4. the network ----------------------------------------------------------
for x in $NODES; do
    ip link show "lbox$x" >/dev/null 2>&1 && ip link del "lbox$x"
    [ -e "/run/netns/leasebox$x" ] && ip netns del "leasebox$x"
done
ip link show "$BRIDGE" >/dev/null 2>&1 && ip link del "$BRIDGE"
say "network removed"

# --- 5. the lock -------------------------------------------------------------
pid=$(cat "$BOX/lock.pid" 2>/dev/null || true)
if [ -n "$pid" ] && [ "$(readlink "/proc/$pid/fd/9" 2>/dev/null)" = "$LOCK" ]; then
    kill "$pid"
    say "released $LOCK (holder pid $pid)"
fi
rm -f "$BOX/lock.pid" "$BOX/nodes" "$BOX/nodes.tmp" "$BOX/owner.test" "$BOX/fs"
rmdir "$BOX/shared" "$BOX/ns" "$BOX" 2>/dev/null
say "done"
