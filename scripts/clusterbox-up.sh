#!/usr/bin/env bash
# clusterbox-up.sh — a cluster in a box (issue #19): N "nodes" on this one
# machine, each a set of Linux namespaces with its own network address, its
# own host name and its own FUSE client of one shared filesystem (GlusterFS
# or CephFS: LEASE_BOX_FS), so that `mpirun --host nodeA:2,nodeB:2 lease ...`
# runs one program across "hosts" over a real distributed filesystem. scripts/clusterbox-agent is
# the launch agent mpirun uses instead of ssh; clusterbox-down.sh undoes
# all of this. Idempotent: what is already up is kept.
#
# What a node X (A, B, ...) is:
#   network   the netns leasebox$X (/run/netns/leasebox$X, `ip netns`), a veth
#             pair on the bridge leasebox0 of the host (10.77.0.1/24); node
#             A is 10.77.0.2, B 10.77.0.3, ...
#   host name a persistent UTS namespace ($BOX/ns/uts$X) named node$X
#   storage   its own client process (glusterfs, or ceph-fuse as client.node$X),
#             started inside the node's netns (it talks to the bricks, or to
#             the Ceph daemons, over the bridge); its FUSE mount lands in the
#             host's mount namespace at $GL/node$X (CephFS: $CEPHDIR/node$X)
#   files     a persistent mount namespace ($BOX/ns/mnt$X), a copy of the
#             host's in which $BOX/shared is the node's own client mount (and
#             the other nodes' mounts are detached): every node names the
#             table by the same path, as on a real cluster
#
# The volume: GL_SAFE=1 (the client caches that make lease unsafe across
# clients turned off: see gluster-up.sh), 2 x 2 distributed-replicate over 4
# bricks addressed as 10.77.0.1 (reachable from the host and every node),
# brought up by gluster-up.sh with its own state under $GL, which also mounts
# one client on the host at $GL/host for looking at the volume from outside.
# Only one glusterd can serve a machine (its brick processes fetch their
# volfiles from port 24007 whatever glusterd's listen port), so this takes
# the lock the tests' GlusterFS takes (internal/glustertest, /tmp/lease-gluster.lock)
# and holds it until clusterbox-down.sh: a holder process (sleep) keeps it,
# its pid in $BOX/lock.pid. While the box is up, internal/multiclient waits.
#
# LEASE_BOX_FS=cephfs puts the box on CephFS instead: a one-machine Ceph
# cluster brought up by cephfs-up.sh with its state under $CEPHDIR, every
# daemon listening on 10.77.0.1 (reachable from the host and every node), a
# client on the host at $CEPHDIR/host and one per node; it takes
# /tmp/lease-ceph.lock, the lock of the machine's one Ceph cluster (the tests'
# internal/cephtest takes it too), instead of the GlusterFS lock. The box is
# on one of the two at a time: bring it down before switching.
#
# Environment (all optional):
#   LEASE_BOX            state directory (namespace files, node map)  (default /run/lease-box)
#   LEASE_BOX_GL         GlusterFS state, bricks, logs, mounts        (default /tmp/lease-box-gluster)
#   LEASE_BOX_NODES      node letters                                 (default "A B")
#   LEASE_BOX_LOCK_WAIT  seconds to wait for the filesystem's lock     (default 600)
#   LEASE_BOX_FS         gluster or cephfs                            (default gluster)
#   LEASE_BOX_CEPH       the Ceph cluster's state, logs, mounts       (default /tmp/lease-box-ceph)
#
# Use (as root; Open MPI 4.1):
#   scripts/clusterbox-up.sh
#   lease init --root /tmp/lease-box-gluster/host/t      # from the host (CephFS: /tmp/lease-box-ceph/host/t), or in a node: /run/lease-box/shared/t
#   mpirun --mca plm_rsh_agent "$PWD/scripts/clusterbox-agent" --mca plm_rsh_no_tree_spawn 1 \
#       --mca oob_tcp_if_include 10.77.0.0/24 --mca btl_tcp_if_include 10.77.0.0/24 \
#       --host nodeA:2,nodeB:2 --stdin none lease qualify --json --root /run/lease-box/shared/t
#   scripts/clusterbox-down.sh [--purge]
set -euo pipefail
BOX=${LEASE_BOX:-/run/lease-box}
GL=${LEASE_BOX_GL:-/tmp/lease-box-gluster}
NODES=${LEASE_BOX_NODES:-"A B"}
WAIT=${LEASE_BOX_LOCK_WAIT:-600}
FS=${LEASE_BOX_FS:-gluster}
CEPHDIR=${LEASE_BOX_CEPH:-/tmp/lease-box-ceph}
case $FS in
    gluster) LOCK=/tmp/lease-gluster.lock MNT=$GL ;;
    cephfs) LOCK=/tmp/lease-ceph.lock MNT=$CEPHDIR ;;
    *) echo "clusterbox-up: LEASE_BOX_FS=$FS: want gluster or cephfs" >&2; exit 2 ;;
esac
VOL=leasebox
NET=10.77.0 BRIDGE=leasebox0 HOSTIP=10.77.0.1
HERE=$(cd "$(dirname "$0")" && pwd)
export PATH="$PATH:/usr/sbin:/sbin"
t0=$(date +%s.%N)
say() { printf '[clusterbox-up %6.2fs] %s\n' "$(echo "$(date +%s.%N) - $t0" | bc)" "$*"; }
die() { echo "clusterbox-up: $*" >&2; exit 1; }

[ "$(id -u)" = 0 ] || die "must run as root (namespaces, a bridge, GlusterFS or Ceph)"
for b in ip nsenter unshare flock setsid mountpoint bc; do
    command -v "$b" >/dev/null || die "$b not found (apt-get install -y iproute2 util-linux bc)"
done
if [ "$FS" = gluster ]; then
    for b in glusterd glusterfs; do
        command -v "$b" >/dev/null || die "$b not found (apt-get install -y glusterfs-server glusterfs-client)"
    done
fi
if [ -s "$BOX/fs" ] && [ "$(cat "$BOX/fs")" != "$FS" ]; then
    die "the box is up on $(cat "$BOX/fs"); bring it down first (scripts/clusterbox-down.sh) to put it on $FS"
fi

# --- 1. the filesystem's lock -----------------------------------------------
holder_alive() {
    local pid
    pid=$(cat "$BOX/lock.pid" 2>/dev/null) || return 1
    [ -n "$pid" ] && [ "$(readlink "/proc/$pid/fd/9" 2>/dev/null)" = "$LOCK" ]
}
mkdir -p "$BOX"
if holder_alive; then
    say "holding $LOCK already (holder pid $(cat "$BOX/lock.pid"))"
else
    rm -f "$BOX/lock.pid"
    say "waiting for $LOCK (up to ${WAIT}s: the tests' GlusterFS may be up)"
    # setsid -w: the holder is out of our process group and session (a ^C
    # at this terminal later does not release the lock), and $! lives as
    # long as it does.
    setsid -w bash -c 'exec 9>>"$1"; flock -w "$2" 9 || exit 1; echo $$ >"$3.tmp"; mv "$3.tmp" "$3"; exec sleep infinity' \
        lockholder "$LOCK" "$WAIT" "$BOX/lock.pid" </dev/null >/dev/null 2>&1 &
    hpid=$!
    until [ -s "$BOX/lock.pid" ]; do
        kill -0 "$hpid" 2>/dev/null || die "$LOCK still held after ${WAIT}s (internal/multiclient's $FS, bench, or another box)"
        sleep 0.2
    done
    say "holding $LOCK (holder pid $(cat "$BOX/lock.pid"))"
fi
echo "$FS" >"$BOX/fs"

# --- 2. the network: a bridge, a netns and a veth pair per node ------------
if ! ip link show "$BRIDGE" >/dev/null 2>&1; then
    ip link add "$BRIDGE" type bridge
fi
[[ $(ip -o -4 addr show dev "$BRIDGE") == *"inet $HOSTIP/24"* ]] || ip addr add "$HOSTIP/24" dev "$BRIDGE"
# Bridged frames between nodes must not meet the host's iptables FORWARD
# rules (br_netfilter with a DROP policy, as Docker sets, would cut nodeA
# off from nodeB): this bridge only, where the kernel has the option.
ip link set "$BRIDGE" type bridge nf_call_iptables 0 nf_call_ip6tables 0 2>/dev/null || true
ip link set "$BRIDGE" up
i=2
: >"$BOX/nodes.tmp"
for x in $NODES; do
    ns=leasebox$x addr=$NET.$i
    [ -e "/run/netns/$ns" ] || ip netns add "$ns"
    if ! ip link show "lbox$x" >/dev/null 2>&1; then
        ip link add "lbox$x" type veth peer name eth0 netns "$ns"
    fi
    ip link set "lbox$x" master "$BRIDGE" up
    [[ $(ip -n "$ns" -o -4 addr show dev eth0) == *"inet $addr/24"* ]] || ip -n "$ns" addr add "$addr/24" dev eth0
    ip -n "$ns" link set eth0 up
    ip -n "$ns" link set lo up
    echo "$x node$x $addr" >>"$BOX/nodes.tmp"
    i=$((i + 1))
done
say "network: $BRIDGE $HOSTIP/24; $(awk '{printf "%s %s  ", $2, $3}' "$BOX/nodes.tmp")"

# --- 3. the filesystem and the host's client --------------------------------
if [ "$FS" = cephfs ]; then
    # One call: the cluster on the bridge address, the host's client and a
    # client per node, each of those started inside its node's netns.
    mounts="host:host" netns=""
    for x in $NODES; do mounts="$mounts node$x:node$x" netns="$netns node$x:leasebox$x"; done
    CEPH=$CEPHDIR CEPH_HOST=$HOSTIP CEPH_MOUNTS=$mounts CEPH_NETNS=$netns \
        bash "$HERE/cephfs-up.sh" | sed 's/^/  /'
else
    GL=$GL GL_VOL=$VOL GL_SAFE=1 GL_HOST=$HOSTIP GL_BASE_PORT=49400 GL_MOUNTS=host \
        bash "$HERE/gluster-up.sh" | sed 's/^/  /'
fi

# --- 4. a client per node, started in the node's netns (GlusterFS) ---------
for x in $NODES; do
    [ "$FS" = gluster ] || break
    mp=$GL/node$x
    mkdir -p "$mp"
    if mountpoint -q "$mp" && timeout 10 stat -f "$mp" >/dev/null 2>&1; then
        say "$mp already mounted"; continue
    fi
    grep -q " $mp fuse" /proc/mounts && { umount "$mp" 2>/dev/null || umount -l "$mp"; }
    nsenter --net="/run/netns/leasebox$x" -- glusterfs --process-name=fuse --volfile-server="$HOSTIP" \
        --volfile-server-port=24007 --volfile-id="$VOL" --log-file="$GL/log/node$x.log" \
        --pid-file="$GL/run/node$x.pid" "$mp"
    for _ in $(seq 100); do mountpoint -q "$mp" && stat -f "$mp" >/dev/null 2>&1 && break; sleep 0.1; done
    mountpoint -q "$mp" || die "$mp did not mount; see $GL/log/node$x.log"
    say "$mp mounted by client pid $(cat "$GL/run/node$x.pid") in netns leasebox$x"
done

# --- 5. each node's host name and files -----------------------------------
mkdir -p "$BOX/ns" "$BOX/shared"
# The namespace files are bind mounts; they must sit on a mount that is not
# shared (unshare(1)), so $BOX/ns is a private bind mount of itself.
if ! mountpoint -q "$BOX/ns"; then
    mount --bind "$BOX/ns" "$BOX/ns"
    mount --make-private "$BOX/ns"
fi
for x in $NODES; do
    uts=$BOX/ns/uts$x mnt=$BOX/ns/mnt$x mp=$MNT/node$x
    # Up already when $BOX/shared in the node is its client's mount (the
    # same device as $mp): a client remounted since needs a new namespace.
    if mountpoint -q "$uts" && mountpoint -q "$mnt" &&
        [ "$(timeout 10 nsenter --mount="$mnt" stat -c %d "$BOX/shared" 2>/dev/null)" = "$(stat -c %d "$mp")" ]; then
        say "node$x: namespaces up"; continue
    fi
    for f in "$uts" "$mnt"; do mountpoint -q "$f" && umount "$f"; rm -f "$f"; touch "$f"; done
    # Inside: name the host, put the node's own client at $BOX/shared and
    # detach the box's other client mounts (each node sees its own).
    unshare --uts="$uts" --mount="$mnt" --propagation private -- /bin/sh -c '
        set -e
        hostname "$1"
        mount --bind "$2" "$3"
        for m in $(awk -v gl="$4/" "index(\$2, gl) == 1 && \$3 ~ /^fuse/ {print \$2}" /proc/self/mounts); do
            umount -l "$m"
        done' sh "node$x" "$mp" "$BOX/shared" "$MNT"
    say "node$x: UTS and mount namespaces at $uts, $mnt"
done
mv "$BOX/nodes.tmp" "$BOX/nodes"

# --- 6. smoke check: through the agent, every node names itself and sees
# what the first node wrote to the shared path.
set -- $NODES
tok="box $$ $(date +%s%N)"
"$HERE/clusterbox-agent" "node$1" "echo '$tok' > $BOX/shared/.box-smoke"
for x in $NODES; do
    got=$("$HERE/clusterbox-agent" "node$x" "echo \$(hostname) \$(cat $BOX/shared/.box-smoke)")
    [ "$got" = "node$x $tok" ] || die "smoke check: node$x says '$got', want 'node$x $tok'"
done
[ "$(cat "$MNT/host/.box-smoke")" = "$tok" ] || die "smoke check: the host's client does not see node$1's write"
rm -f "$MNT/host/.box-smoke"
say "smoke check passed: $(for x in $NODES; do printf 'node%s ' "$x"; done)see one $FS at $BOX/shared (the host at $MNT/host)"
say "up: mpirun --mca plm_rsh_agent $HERE/clusterbox-agent --host $(for x in $NODES; do printf 'node%s:2,' "$x"; done | sed 's/,$//') ..."
