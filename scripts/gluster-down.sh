#!/usr/bin/env bash
# gluster-down.sh — undo gluster-up.sh: unmount the FUSE clients, stop the
# volume's brick and self-heal processes and glusterd. Idempotent.
#
#   gluster-down.sh            stop everything, keep the volume definition and bricks
#                              (gluster-up.sh brings the same volume back with its data)
#   gluster-down.sh --mounts   only unmount the clients (e.g. to remount with other options)
#   gluster-down.sh --purge    also delete the volume, the bricks, glusterd's state and the
#                              brick/shd logs glusterd wrote under /var/log/glusterfs
#
# Only processes whose pid files live under $GL are signalled, never by name.
# The project's copy of ../shared/env/gluster-down.sh (see gluster-up.sh): --purge
# deletes every volume of this glusterd and the bricks of all of them.
# Environment: GL, GL_VOL, GL_MOUNTS as for gluster-up.sh.
set -uo pipefail
GL=${GL:-/tmp/gl}
VOL=${GL_VOL:-leasevol}
MOUNTS=${GL_MOUNTS:-"mA mB"}
RUN=$GL/run; LOG=$GL/log
MODE=${1:-}
SOCK=$RUN/glusterd.socket
cli() { timeout 60 gluster --mode=script --glusterd-sock="$SOCK" --log-file="$LOG/cli.log" "$@"; }
# alive PIDFILE: the pid in it runs a GlusterFS program (a pid file left by
# a run that was killed may name a pid reused by another process since).
alive() { [ -s "$1" ] && kill -0 "$(cat "$1")" 2>/dev/null && tr '\0' ' ' <"/proc/$(cat "$1")/cmdline" 2>/dev/null | grep -q gluster; }

# stop_pid PIDFILE NAME: SIGTERM, wait up to 10 s, then SIGKILL.
stop_pid() {
    local pf=$1 name=$2 pid i
    alive "$pf" || { rm -f "$pf"; return 0; }
    pid=$(cat "$pf")
    kill -TERM "$pid" 2>/dev/null
    for i in $(seq 100); do kill -0 "$pid" 2>/dev/null || break; sleep 0.1; done
    if kill -0 "$pid" 2>/dev/null; then
        echo "gluster-down: $name (pid $pid) ignored SIGTERM; SIGKILL"
        kill -KILL "$pid" 2>/dev/null; sleep 0.5
    fi
    rm -f "$pf"
    echo "gluster-down: stopped $name (pid $pid)"
}

# --- 1. the FUSE clients ---------------------------------------------------
# A glusterfs client unmounts its mount point when it gets SIGTERM. A client
# whose threads are deadlocked (see gluster issue #4371: interrupted setlk)
# does not; killing it aborts the FUSE connection, which also releases any
# process stuck in a request on it, and `umount -l` then detaches the dead
# mount point.
for m in $MOUNTS; do
    mp=$GL/$m
    stop_pid "$RUN/$m.pid" "client $m"
    if mountpoint -q "$mp" 2>/dev/null || grep -q " $mp fuse" /proc/mounts; then
        umount "$mp" 2>/dev/null || umount -l "$mp" 2>/dev/null || true
        echo "gluster-down: unmounted $mp"
    fi
done
[ "$MODE" = --mounts ] && exit 0

# --- 2. the volume's processes and glusterd ----------------------------------
# Brick and self-heal daemon sockets (-S, hardcoded under /var/run/gluster) are
# not removed when those daemons stop; note them now so --purge removes exactly those.
socks=()
for pf in "$RUN"/vols/*/*.pid "$RUN"/shd/*/*.pid; do
    if [ -e "$pf" ] && alive "$pf"; then
        s=$(tr '\0' '\n' < "/proc/$(cat "$pf")/cmdline" | sed -n '/^-S$/{n;p}')
        [ -n "$s" ] && socks+=("$s")
    fi
done
if alive "$RUN/glusterd.pid"; then
    if [ "$MODE" = --purge ]; then
        for v in $(cli volume list 2>/dev/null); do
            cli volume stop "$v" force >/dev/null 2>&1 || true
            cli volume delete "$v" >/dev/null 2>&1 || true
            echo "gluster-down: volume $v stopped and deleted"
        done
    fi
fi
# Brick and self-heal daemons keep running when glusterd stops, so stop them
# by their pid files (glusterd writes them under its run-directory).
for pf in "$RUN"/vols/*/*.pid "$RUN"/shd/*/*.pid; do
    [ -e "$pf" ] || continue
    stop_pid "$pf" "$(basename "$pf" .pid)"
done
stop_pid "$RUN/glusterd.pid" glusterd

if [ "$MODE" = --purge ]; then
    # glusterd hardcodes brick and shd logs under /var/log/glusterfs and their
    # sockets under /var/run/gluster; remove only the ones naming our bricks.
    tag=$(echo "$GL" | sed 's#^/##; s#/#-#g')
    rm -f /var/log/glusterfs/bricks/"$tag"-bricks-*.log
    for sk in "${socks[@]}"; do case $sk in /var/run/gluster/*.socket) rm -f "$sk";; esac; done
    # glusterd's and the self-heal daemon's own default-location logs (only ours run here)
    rm -f /var/log/glusterfs/glustershd.log /var/log/glusterfs/cmd_history.log
    rm -rf "$GL/bricks" "$GL/glusterd" "$RUN" "$GL/etc"
    for m in $MOUNTS; do rmdir "$GL/$m" 2>/dev/null || true; done
    echo "gluster-down: purged bricks, glusterd state and logs under $GL"
fi
echo "gluster-down: done"
