#!/usr/bin/env bash
# cephfs-up.sh — bring up a one-machine Ceph cluster and a CephFS mounted by
# two independent ceph-fuse clients (two "nodes" of a cluster), for testing
# `lease` on a real multi-client filesystem whose metadata go through a
# server that hands out capabilities (the MDS's caps).
#
# The cluster: one monitor on $CEPH_HOST with auth none, one manager, one
# OSD with `osd objectstore = memstore` (the objects live in the OSD's
# memory, and do not survive a stop), every pool of size 1,
# one MDS and one file system (`ceph fs new`). Every daemon listens on
# $CEPH_HOST, the monitor at port $CEPH_PORT, the others in the ports above
# it up to 6999 (msgr2 only): all above 6900, away from Slurm's 6817/6818.
#
# The clients: one ceph-fuse process per mount point ($CEPH/mA as client.a,
# $CEPH/mB as client.b by default), each with its own MDS session (its own
# caps), its own client cache and its own FUSE connection (so its own kernel
# dentry, attribute and page caches). They are mounted in the caller's mount
# namespace, not each in one of its own: the tests and the benchmarks run
# lease through both paths from one process, and what makes two clients two
# "nodes" for CephFS is the session and the caches, which a mount namespace
# does not change. For nodes with their own namespaces (network, host name,
# mounts) see scripts/clusterbox-up.sh (LEASE_BOX_FS=cephfs), which mounts a
# client per node with CEPH_MOUNTS and CEPH_NETNS.
#
# No systemd, nothing under /etc/ceph, /var/lib/ceph, /var/log/ceph or
# /var/run/ceph: the configuration, the daemons' data, admin sockets, pid
# files and logs all live under $CEPH. Idempotent: re-running it keeps
# whatever is already up (each daemon, the pools, the file system, each
# mount). cephfs-down.sh undoes it: it stops the daemons and drops the data
# (a stopped memstore OSD comes back empty), so the next run makes a new
# cluster; --purge also removes the configuration and the logs.
#
# Prerequisites (Debian 12, as root):
#   apt-get install -y --no-install-recommends ceph-mon ceph-mgr ceph-osd ceph-mds ceph-fuse ceph-common
# Needs /dev/fuse. About 1.1 GiB of memory under load (the OSD's memstore,
# the MDS cache capped at $CEPH_MDS_CACHE, the manager's Python modules).
#
# Environment (all optional):
#   CEPH             base directory                                (default /tmp/lease-ceph)
#   CEPH_HOST        the address every daemon binds to             (default 127.0.0.1)
#   CEPH_PORT        the monitor's port; daemons take ports above  (default 6910)
#   CEPH_MOUNTS      "NAME:ID ..." mount points under $CEPH and    (default "mA:a mB:b")
#                    the client id of each (ceph-fuse --id ID)
#   CEPH_NETNS       "NAME:NETNS ...": start the client of mount NAME inside
#                    the network namespace /run/netns/NETNS (the cluster in a box)
#   CEPH_CLIENT_OPTS extra "key=value ..." options for every client's [client]
#                    section, e.g. "client_cache_size=0 fuse_use_invalidate_cb=false"
#                    (written to $CEPH/etc/client.conf; remount to apply:
#                    cephfs-down.sh --mounts; cephfs-up.sh)
#   CEPH_MDS_OPTS    extra "key=value ..." options for the MDS's [mds] section
#                    (a new cluster applies them: cephfs-down.sh; cephfs-up.sh)
#   CEPH_MDS_CACHE   mds_cache_memory_limit in bytes              (default 268435456)
#   CEPH_OSD_BYTES   memstore_device_bytes, the OSD's capacity    (default 1073741824)
set -euo pipefail

CEPH=${CEPH:-/tmp/lease-ceph}
HOST=${CEPH_HOST:-127.0.0.1}
PORT=${CEPH_PORT:-6910}
MOUNTS=${CEPH_MOUNTS:-"mA:a mB:b"}
NETNS=${CEPH_NETNS:-}
CLIENT_OPTS=${CEPH_CLIENT_OPTS:-}
MDS_OPTS=${CEPH_MDS_OPTS:-}
MDS_CACHE=${CEPH_MDS_CACHE:-268435456}
OSD_BYTES=${CEPH_OSD_BYTES:-1073741824}
FS=leasefs

ETC=$CEPH/etc RUN=$CEPH/run LOG=$CEPH/log DATA=$CEPH/data
CONF=$ETC/ceph.conf
t0=$(date +%s.%N)
say() { printf '[cephfs-up %6.2fs] %s\n' "$(echo "$(date +%s.%N) - $t0" | bc)" "$*"; }
die() { echo "cephfs-up: $*" >&2; exit 1; }

[ "$(id -u)" = 0 ] || die "must run as root (the OSD's and the monitor's data, FUSE mounts)"
for b in ceph-mon ceph-mgr ceph-osd ceph-mds ceph-fuse ceph monmaptool mountpoint bc timeout; do
    command -v "$b" >/dev/null || die "$b not found (apt-get install -y --no-install-recommends ceph-mon ceph-mgr ceph-osd ceph-mds ceph-fuse ceph-common bc)"
done
[ -c /dev/fuse ] || die "/dev/fuse missing: ceph-fuse cannot mount"
(( PORT > 6900 && PORT < 6990 )) || die "CEPH_PORT=$PORT: want 6901 to 6989 (the daemons take the ports above it up to 6999)"
mkdir -p "$ETC" "$RUN" "$LOG" "$DATA"

# --- 0. the configuration -----------------------------------------------------
# The fsid is made once and kept: the monitor's store names it.
[ -s "$ETC/fsid" ] || cat /proc/sys/kernel/random/uuid >"$ETC/fsid"
FSID=$(cat "$ETC/fsid")
: >"$ETC/client.conf.tmp"
for kv in $CLIENT_OPTS; do echo "    ${kv%%=*} = ${kv#*=}" >>"$ETC/client.conf.tmp"; done
mv "$ETC/client.conf.tmp" "$ETC/client.conf"
mds_extra=""
for kv in $MDS_OPTS; do mds_extra+="    ${kv%%=*} = ${kv#*=}"$'\n'; done
cat >"$CONF.tmp" <<EOF
# written by scripts/cephfs-up.sh; every path is under $CEPH
[global]
    fsid = $FSID
    mon host = v2:$HOST:$PORT
    public addr = $HOST
    ms bind msgr1 = false
    ms bind port min = $((PORT + 1))
    ms bind port max = 6999
    auth cluster required = none
    auth service required = none
    auth client required = none
    auth supported = none
    run dir = $RUN
    admin socket = $RUN/\$name.asok
    pid file = $RUN/\$name.pid
    log file = $LOG/\$name.log
    crash dir = $CEPH/crash
    exporter sock dir = $RUN
    keyring = $ETC/empty.keyring
    mon data = $DATA/\$name
    mgr data = $DATA/\$name
    osd data = $DATA/\$name
    mds data = $DATA/\$name
    osd pool default size = 1
    osd pool default min size = 1
    osd pool default pg autoscale mode = off
    mon allow pool size one = true
    mon allow pool delete = true
    mon warn on pool no redundancy = false
    mon warn on insecure global id reclaim allowed = false
    osd crush chooseleaf type = 0
    mon data avail warn = 2
    mon data avail crit = 1
[osd]
    osd objectstore = memstore
    memstore device bytes = $OSD_BYTES
    osd memory target = 536870912
    osd op num shards = 1
    osd op num threads per shard = 2
[mds]
    mds cache memory limit = $MDS_CACHE
    # 16 journal segments of 4 MiB, not 128: the journal lives in the OSD's memory
    mds log max segments = 16
$mds_extra[mgr]
    mgr initial modules = status
[client]
    log file = $LOG/\$name.log
    client mount timeout = 30
EOF
cat "$ETC/client.conf" >>"$CONF.tmp"
mv "$CONF.tmp" "$CONF"
: >"$ETC/empty.keyring"
cli() { timeout 60 ceph -c "$CONF" --connect-timeout 20 "$@"; }

# alive PIDFILE: the pid in it runs a Ceph program of this cluster (its
# command line names our configuration): a pid file left by a run that was
# killed may name a pid that another process has since.
alive() {
    local pid
    pid=$(cat "$1" 2>/dev/null) || return 1
    [ -n "$pid" ] && kill -0 "$pid" 2>/dev/null || return 1
    tr '\0' ' ' <"/proc/$pid/cmdline" 2>/dev/null | grep -q "ceph-[a-z]* .*$CONF"
}
# wait_for WHAT TRIES CMD...: retry CMD every 0.2 s.
wait_for() {
    local what=$1 n=$2; shift 2
    for _ in $(seq "$n"); do "$@" >/dev/null 2>&1 && return 0; sleep 0.2; done
    die "$what: timed out; see $LOG"
}

# --- 1. the monitor -----------------------------------------------------------
if alive "$RUN/mon.a.pid"; then
    say "mon.a already running (pid $(cat "$RUN/mon.a.pid"))"
else
    if command -v ss >/dev/null && ss -ltnH "( src $HOST:$PORT or src 0.0.0.0:$PORT )" | grep -q .; then
        die "port $PORT is taken by another process (another Ceph cluster?); set CEPH_PORT"
    fi
    if [ ! -e "$DATA/mon.a/done" ]; then
        rm -rf "$DATA/mon.a"
        monmaptool --create --clobber --fsid "$FSID" --addv a "[v2:$HOST:$PORT]" "$ETC/monmap" >/dev/null
        ceph-mon -c "$CONF" --mkfs -i a --monmap "$ETC/monmap" >>"$LOG/mkfs.log" 2>&1 ||
            die "ceph-mon --mkfs failed; see $LOG/mkfs.log"
        touch "$DATA/mon.a/done"
    fi
    ceph-mon -c "$CONF" -i a
    say "mon.a started (pid $(cat "$RUN/mon.a.pid"), v2:$HOST:$PORT)"
fi
wait_for "the monitor answering" 150 cli mon stat

# --- 2. the manager -------------------------------------------------------------
if alive "$RUN/mgr.x.pid"; then
    say "mgr.x already running (pid $(cat "$RUN/mgr.x.pid"))"
else
    mkdir -p "$DATA/mgr.x"
    ceph-mgr -c "$CONF" -i x
    wait_for "mgr.x's pid file" 100 test -s "$RUN/mgr.x.pid"
    say "mgr.x started (pid $(cat "$RUN/mgr.x.pid"))"
fi

# --- 3. the OSD -----------------------------------------------------------------
if [ ! -s "$DATA/osd.0/fsid" ] || ! cli osd find 0 >/dev/null 2>&1; then
    rm -rf "$DATA/osd.0"
    mkdir -p "$DATA/osd.0"
    uuid=$(cat /proc/sys/kernel/random/uuid)
    id=$(cli osd new "$uuid")
    [ "$id" = 0 ] || die "ceph osd new gave id $id, want 0 (an old cluster's state? cephfs-down.sh --purge)"
    ceph-osd -c "$CONF" -i 0 --mkfs --osd-uuid "$uuid" >>"$LOG/mkfs.log" 2>&1 ||
        die "ceph-osd --mkfs failed; see $LOG/mkfs.log"
    say "osd.0 made (memstore, $((OSD_BYTES >> 20)) MiB)"
fi
if alive "$RUN/osd.0.pid"; then
    say "osd.0 already running (pid $(cat "$RUN/osd.0.pid"))"
else
    ceph-osd -c "$CONF" -i 0 >>"$LOG/osd.0.out" 2>&1
    say "osd.0 started (pid $(cat "$RUN/osd.0.pid"))"
fi
osd_up() { cli osd dump 2>/dev/null | grep -q '^osd\.0 up '; }
wait_for "osd.0 up" 300 osd_up

# --- 4. the pools and the file system ----------------------------------------------
if ! cli fs ls 2>/dev/null | grep -q "name: $FS,"; then
    for p in cephfs_metadata cephfs_data; do
        cli osd pool ls | grep -qx "$p" || cli osd pool create "$p" 8 8 >/dev/null 2>&1
        cli osd pool set "$p" size 1 --yes-i-really-mean-it >/dev/null 2>&1 || true
    done
    cli fs new "$FS" cephfs_metadata cephfs_data >/dev/null 2>&1
    say "file system $FS made (pools cephfs_metadata, cephfs_data; size 1)"
else
    say "file system $FS exists"
fi

# --- 5. the MDS -------------------------------------------------------------------
if alive "$RUN/mds.a.pid"; then
    say "mds.a already running (pid $(cat "$RUN/mds.a.pid"))"
else
    mkdir -p "$DATA/mds.a"
    ceph-mds -c "$CONF" -i a >>"$LOG/mds.a.out" 2>&1
    say "mds.a started (pid $(cat "$RUN/mds.a.pid"))"
fi
mds_active() { cli mds stat 2>/dev/null | grep -q "^$FS:1 {0=a=up:active}"; }
wait_for "mds.a active" 300 mds_active
say "cluster up: $(cli -s 2>/dev/null | awk '/health:/ {print $2}'), fs $FS active"

# --- 6. the clients ------------------------------------------------------------
netns_of() {
    local kv
    for kv in $NETNS; do [ "${kv%%:*}" = "$1" ] && { echo "${kv#*:}"; return 0; }; done
    return 0
}
for m in $MOUNTS; do
    name=${m%%:*} id=${m#*:} mp=$CEPH/${m%%:*}
    [ "$name" != "$m" ] || die "CEPH_MOUNTS entry $m: want NAME:ID"
    if mountpoint -q "$mp" 2>/dev/null && timeout 10 stat -f "$mp" >/dev/null 2>&1; then
        say "$mp already mounted"; continue
    fi
    # A mount whose client is gone (killed): detach it first.
    grep -q " $mp fuse" /proc/mounts && { umount "$mp" 2>/dev/null || umount -l "$mp"; say "$mp: detached the mount of a client that is gone"; }
    mkdir -p "$mp"
    ns=$(netns_of "$name")
    run=()
    [ -n "$ns" ] && run=(nsenter --net="/run/netns/$ns" --)
    # ceph-fuse daemonizes once the mount is up; its pid file is
    # $RUN/client.ID.pid (the pid file option above).
    "${run[@]}" ceph-fuse -c "$CONF" --id "$id" "$mp" >>"$LOG/client.$id.out" 2>&1 ||
        die "ceph-fuse --id $id $mp failed; see $LOG/client.$id.out and $LOG/client.$id.log"
    for _ in $(seq 100); do mountpoint -q "$mp" && stat -f "$mp" >/dev/null 2>&1 && break; sleep 0.1; done
    mountpoint -q "$mp" || die "$mp did not mount; see $LOG/client.$id.log"
    say "$mp mounted (client.$id, pid $(cat "$RUN/client.$id.pid")${ns:+, in netns $ns})"
done

# --- 7. smoke check: a file written through one client is read through the other
set -- $MOUNTS
if [ $# -ge 2 ]; then
    a=$CEPH/${1%%:*} b=$CEPH/${2%%:*}
    echo "hello $$" >"$a/.smoke"
    [ "$(cat "$b/.smoke")" = "hello $$" ] || die "smoke check: $b does not see $a's write"
    rm -f "$a/.smoke"
    say "smoke check passed ($a -> $b)"
fi
say "up: fs $FS, mon v2:$HOST:$PORT, mounts: $(for m in $MOUNTS; do printf '%s ' "$CEPH/${m%%:*}"; done)"
