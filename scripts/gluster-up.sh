#!/usr/bin/env bash
# gluster-up.sh — bring up a single-machine GlusterFS volume mounted by two
# independent FUSE clients (two "nodes" of a cluster), for testing `lease`
# on a real multi-client distributed filesystem.
#
# The project's copy of ../shared/env/gluster-up.sh, used by internal/glustertest,
# .ci/run and bench/gluster. Changes from it: each volume's bricks live in
# $GL/bricks/$GL_VOL, so several volumes (e.g. one with the default options
# and one with GL_SAFE=1) can share one glusterd (run the script once per
# volume, with its own GL_VOL and GL_MOUNTS); GL_BASE_PORT moves the brick
# ports away from another glusterd's; `ss` is optional.
#
# Prerequisites (Debian 12, as root):
#   apt-get update && apt-get install -y glusterfs-server glusterfs-client
# Needs /dev/fuse and a kernel with FUSE. No systemd is needed: glusterd is
# started by hand with its own volfile so that ALL state (glusterd working
# directory, sockets, pid files, logs, bricks, mounts) lives under $GL and
# nothing in /var/lib/glusterd or /var/run is touched.
#
# Idempotent: re-running it skips whatever is already up (glusterd, the
# volume, each mount). gluster-down.sh undoes it (and --purge wipes state).
#
# Environment (all optional):
#   GL            base directory                     (default /tmp/gl)
#   GL_VOL        volume name                        (default leasevol)
#   GL_HOST       brick/volfile host name            (default: $(hostname) if it resolves, else first IPv4)
#   GL_BRICKS     number of bricks                   (default 4)
#   GL_REPLICA    replica count (1 = pure distribute) (default 2 -> 2 x 2 distributed-replicate)
#   GL_MOUNTS     mount point names under $GL        (default "mA mB": two separate client processes)
#   GL_MOUNT_OPTS extra glusterfs client options, e.g. "--attribute-timeout=0 --entry-timeout=0"
#   GL_VOLSET     extra "key=value ..." volume options applied with `gluster volume set`
#   GL_PORT       glusterd management port           (default 24007)
#   GL_BASE_PORT  first brick port glusterd hands out (default 49152)
#   GL_SAFE=1     turn off the client-side caches that make `lease` unsafe across clients
#                 (performance.open-behind, performance.stat-prefetch, performance.quick-read);
#                 see gluster-results.md: with the defaults lease double-grants across mounts.
#
# Known GlusterFS 10.3 client bug, not fixable by options here: a signal delivered to a
# process while its fcntl(F_OFD_SETLK/F_SETLK) is in flight makes the FUSE client send an
# interrupt, and the client's epoll threads deadlock (gluster issue #4371); Go programs get
# such signals all the time (async preemption, SIGURG). Run Go lockers with
# GODEBUG=asyncpreemptoff=1 on GlusterFS FUSE mounts; gluster-down.sh recovers a hung mount.
set -euo pipefail

GL=${GL:-/tmp/gl}
VOL=${GL_VOL:-leasevol}
BRICKS=${GL_BRICKS:-4}
REPLICA=${GL_REPLICA:-2}
MOUNTS=${GL_MOUNTS:-"mA mB"}
MOUNT_OPTS=${GL_MOUNT_OPTS:-}
VOLSET=${GL_VOLSET:-}
if [ "${GL_SAFE:-0}" = 1 ]; then
    VOLSET="$VOLSET performance.open-behind=off performance.stat-prefetch=off performance.quick-read=off"
fi
PORT=${GL_PORT:-24007}
BASE_PORT=${GL_BASE_PORT:-49152}

ETC=$GL/etc; RUN=$GL/run; LOG=$GL/log; WD=$GL/glusterd; BR=$GL/bricks/$VOL
SOCK=$RUN/glusterd.socket
t0=$(date +%s.%N)
say() { printf '[gluster-up %6.2fs] %s\n' "$(echo "$(date +%s.%N) - $t0" | bc)" "$*"; }
die() { echo "gluster-up: $*" >&2; exit 1; }

for b in glusterd gluster glusterfs mountpoint bc; do
    command -v "$b" >/dev/null || die "$b not found (apt-get install -y glusterfs-server glusterfs-client bc util-linux)"
done
[ -c /dev/fuse ] || die "/dev/fuse missing: the FUSE client cannot mount"
[ "$(id -u)" = 0 ] || die "must run as root (glusterd sets trusted.* xattrs on the bricks, mounts need FUSE)"
(( BRICKS % REPLICA == 0 )) || die "GL_BRICKS=$BRICKS is not a multiple of GL_REPLICA=$REPLICA"

# The brick host must be a name or address the CLI accepts: it refuses the
# literals "localhost" and "127.0.0.1" for bricks, but a hostname that
# resolves to a loopback address is fine (glusterd only checks that it is
# one of this machine's addresses).
if [ -z "${GL_HOST:-}" ]; then
    if getent hosts "$(hostname)" >/dev/null; then GL_HOST=$(hostname)
    else GL_HOST=$(hostname -I | awk '{print $1}'); fi
fi
HOST=$GL_HOST
mkdir -p "$ETC" "$RUN" "$LOG" "$WD" "$BR"

# The CLI talks to glusterd over a unix socket; point it at ours, script
# mode answers "y" to the replica-2 split-brain and same-host questions.
cli() { gluster --mode=script --glusterd-sock="$SOCK" --log-file="$LOG/cli.log" "$@"; }

# --- 1. glusterd with a private volfile ----------------------------------
# working-directory: volume definitions, peer UUID (default /var/lib/glusterd)
# run-directory: brick/shd unix sockets and pid files (default /var/run/gluster)
# glusterd-sockfile: the CLI socket (default /var/run/glusterd.socket)
cat >"$ETC/glusterd.vol" <<EOF
volume management
    type mgmt/glusterd
    option working-directory $WD
    option run-directory $RUN
    option glusterd-sockfile $SOCK
    option transport-type socket
    option transport.socket.keepalive-time 10
    option transport.socket.keepalive-interval 2
    option transport.socket.read-fail-log off
    option transport.socket.listen-port $PORT
    option ping-timeout 0
    option event-threads 1
    option base-port $BASE_PORT
    option max-port 60999
end-volume
EOF

# alive PIDFILE: the pid in it runs a GlusterFS program (a pid file left by
# a run that was killed may name a pid reused by another process since).
alive() { [ -s "$1" ] && kill -0 "$(cat "$1")" 2>/dev/null && tr '\0' ' ' <"/proc/$(cat "$1")/cmdline" 2>/dev/null | grep -q gluster; }
if alive "$RUN/glusterd.pid"; then
    say "glusterd already running (pid $(cat "$RUN/glusterd.pid"))"
else
    if command -v ss >/dev/null && ss -ltn "sport = :$PORT" | grep -q LISTEN; then
        die "port $PORT is taken by another process (another glusterd?); set GL_PORT"
    fi
    # -f: our volfile; -p: pid file; -l: glusterd's own log. glusterd hardcodes
    # the brick and self-heal daemon logs (/var/log/glusterfs/bricks/*.log,
    # glustershd.log), their unix sockets (/var/run/gluster/*.socket) and
    # statedumps (/var/run/gluster/*.dump.*); everything else stays under $GL.
    glusterd -f "$ETC/glusterd.vol" -p "$RUN/glusterd.pid" -l "$LOG/glusterd.log" --log-level=INFO
    for _ in $(seq 100); do cli volume list >/dev/null 2>&1 && break; sleep 0.1; done
    cli volume list >/dev/null 2>&1 || die "glusterd did not answer on $SOCK; see $LOG/glusterd.log"
    say "glusterd started (pid $(cat "$RUN/glusterd.pid"))"
fi

# --- 2. the volume --------------------------------------------------------
if cli volume info "$VOL" >/dev/null 2>&1; then
    say "volume $VOL exists"
else
    bricks=()
    for i in $(seq 1 "$BRICKS"); do
        mkdir -p "$BR/b$i"
        bricks+=("$HOST:$BR/b$i")
    done
    typ=()
    (( REPLICA > 1 )) && typ=(replica "$REPLICA")
    # force: the bricks are on the root filesystem and (with replica) several
    # replicas are on the same host; both are refused without it.
    cli volume create "$VOL" "${typ[@]}" transport tcp "${bricks[@]}" force
    say "volume $VOL created: ${typ[*]:-distribute} over $BRICKS bricks on $HOST"
fi
# Volume options are applied on every run (idempotent). Clients switch to the new graph
# live, but remount (gluster-down.sh --mounts; gluster-up.sh) to be sure no old cache survives.
for kv in $VOLSET; do cli volume set "$VOL" "${kv%%=*}" "${kv#*=}" >/dev/null; say "volume set $kv"; done
if cli volume info "$VOL" | grep -q '^Status: Started'; then
    say "volume $VOL already started"
else
    cli volume start "$VOL" force   # force: (re)start bricks that are down
    say "volume $VOL started"
fi
# Wait until every brick process is online (the first mount fails or comes
# up with missing subvolumes otherwise).
for _ in $(seq 100); do
    n=$(cli volume status "$VOL" detail 2>/dev/null | grep -c '^Online.*: Y' || true)
    [ "$n" -ge "$BRICKS" ] && break
    sleep 0.2
done
say "bricks online: $n/$BRICKS"

# --- 3. two (or more) independent FUSE clients ----------------------------
# Each glusterfs process is its own client with its own kernel dentry/attr
# cache and its own gluster client-side caches (md-cache, quick-read,
# open-behind, write-behind, ...): two mounts stand for two cluster nodes.
for m in $MOUNTS; do
    mp=$GL/$m
    mkdir -p "$mp"
    if mountpoint -q "$mp"; then say "$mp already mounted"; continue; fi
    # shellcheck disable=SC2086
    glusterfs --process-name=fuse --volfile-server="$HOST" --volfile-server-port="$PORT" \
        --volfile-id="$VOL" --log-file="$LOG/$m.log" --pid-file="$RUN/$m.pid" $MOUNT_OPTS "$mp"
    for _ in $(seq 100); do mountpoint -q "$mp" && stat -f -c %T "$mp" >/dev/null 2>&1 && break; sleep 0.1; done
    mountpoint -q "$mp" || die "$mp did not mount; see $LOG/$m.log"
    say "$mp mounted (client pid $(cat "$RUN/$m.pid"), $(stat -f -c %T "$mp"))"
done

# --- 4. smoke check: a file written through one client is read through the other
set -- $MOUNTS
if [ $# -ge 2 ]; then
    echo "hello $$" >"$GL/$1/.smoke"
    [ "$(cat "$GL/$2/.smoke")" = "hello $$" ] || die "smoke check: $2 does not see $1's write"
    rm -f "$GL/$1/.smoke"
    say "smoke check passed ($1 -> $2)"
fi
say "up: volume $VOL on $HOST, mounts: $(for m in $MOUNTS; do printf '%s ' "$GL/$m"; done)"
