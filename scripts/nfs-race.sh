#!/usr/bin/env bash
# The reproducer of lease's double grant on NFSv4.2 (docs/safety.md, NFS): an NFS server kernel and two
# client kernels (User-Mode Linux) on a uml_switch reached through a Unix socket (the 10.77.0.0/24
# addresses exist only on that switch). In each client two processes of internal/nfsrace first take an
# OFD lock and create a holder file with O_EXCL under it (an EEXIST: two holders at once), then lock,
# read a record's token, write token+1 by temp file, fsync, rename over and directory fsync, unlock
# (a token written twice: a double grant), reopening the directory and lock file every round and
# pausing up to PAUSE_MS between rounds. Ends every process of each kernel's session it started.
# Needs (as root): apt-get install -y user-mode-linux uml-utilities nfs-kernel-server nfs-common rpcbind gcc
# Usage: [MODE=seam|rec] scripts/nfs-race.sh [VERS=4.2] [ROUNDS=80] [PAUSE_MS=400] [LEASETIME=10]
# MODE=seam (default): the record locked and read through lease's commit/seam; rec: a plain open.
# OFD_ROUNDS (default ROUNDS): lock cycles of the O_EXCL holder-file part.
# Exit 0: no EEXIST, no token written twice; 1: a double grant or stale open (logs kept); 2: setup failed.
set -u
cd "$(dirname "$0")/.." || exit 2
vers=${1:-4.2}; rounds=${2:-80}; pause=${3:-400}; leasetime=${4:-10}; mode=${MODE:-seam}; ofdrounds=${OFD_ROUNDS:-$rounds}
case $mode in rec|seam) ;; *) echo "nfs-race: MODE is rec or seam"; exit 2;; esac
guest=$PWD/scripts/nfs-guest
w=$(mktemp -d /var/tmp/lease-nfs-race-XXXXXX) || exit 2   # not /tmp: the guests mount their own /tmp
X=$w/nfsrace
CGO_ENABLED=0 go build -o "$X" ./internal/nfsrace || exit 2
# linux.uml 6.1 needs it on a host with AMX (internal/uml/xstate/xstate.c, as internal/uml's kernels).
cc -shared -fPIC -O2 -o "$w/xstate.so" internal/uml/xstate/xstate.c -ldl || exit 2
sock=$w/switch.ctl
for n in 2 3; do other=$((5 - n)); cat > "$w/c$n.sh" <<EOS
touch \$NFS_MNT/up-$n; for i in \$(seq 1 300); do [ -e \$NFS_MNT/up-$other ] && break; sleep 0.2; done
mkdir -p \$NFS_MNT/o \$NFS_MNT/r
$X ofd \$NFS_MNT/o c$n-a $ofdrounds > /tmp/oa 2>&1 & $X ofd \$NFS_MNT/o c$n-b $ofdrounds > /tmp/ob 2>&1 & wait
touch \$NFS_MNT/ofd-$n; for i in \$(seq 1 600); do [ -e \$NFS_MNT/ofd-$other ] && break; sleep 0.2; done
export NFSRACE_FRESH=1 NFSRACE_PAUSE_MS=$pause
$X $mode \$NFS_MNT/r c$n-a $rounds > /tmp/ra 2>&1 & $X $mode \$NFS_MNT/r c$n-b $rounds > /tmp/rb 2>&1 & wait
cat /tmp/oa /tmp/ob /tmp/ra /tmp/rb | sed 's/^/RACE /'
EOS
done
sids=()
cleanup() {
  for s in "${sids[@]}"; do pkill -KILL -s "$s" 2>/dev/null; done
  for s in "${sids[@]}"; do for i in $(seq 1 100); do pgrep -s "$s" >/dev/null || break; sleep 0.1; done; done
}
trap cleanup EXIT
setsid uml_switch -unix "$sock" > "$w/switch.log" 2>&1 < /dev/null & sids+=($!); disown $!   # no "Killed" notice
for i in $(seq 1 50); do [ -S "$sock" ] && break; sleep 0.1; done
boot() { # name mem init args...
  local n=$1 m=$2 i=$3; shift 3
  LD_PRELOAD="$w/xstate.so" setsid linux.uml umid="nfsrace-$n-$$" uml_dir="$w" mem="$m" root=/dev/root rootfstype=hostfs rootflags=/ ro init="$i" \
    eth0=daemon,,unix,"$sock" con=null con0=fd:0,fd:1 "$@" < /dev/null > "$w/$n.log" 2>&1 &
  sids+=($!)
}
boot srv 512M "$guest/server" addr=1 leasetime="$leasetime"; disown $!
for i in $(seq 1 240); do grep -aq NFS-SERVER-READY "$w/srv.log" && break; sleep 0.5; done
grep -aq NFS-SERVER-READY "$w/srv.log" || { echo "nfs-race: the server did not start, logs in $w"; exit 2; }
boot c2 384M "$guest/client" addr=2 vers="$vers" run="$w/c2.sh"; c2=$!
boot c3 384M "$guest/client" addr=3 vers="$vers" run="$w/c3.sh"; c3=$!
wait "$c2" "$c3" 2>/dev/null
cleanup; trap - EXIT
for n in 2 3; do grep -aq "NFS-CLIENT-$n-MOUNTED" "$w/c$n.log" || { echo "nfs-race: client $n did not mount, logs in $w"; exit 2; }; done
out=$(cat "$w/c2.log" "$w/c3.log" | tr -d '\r' | grep -a '^RACE ' | cut -d' ' -f2-)
ends=$(grep -c '^END ' <<< "$out"); eexist=$(grep -c '^EEXIST ' <<< "$out"); stale=$(grep -c '^STALE ' <<< "$out")
writes=$(grep -c '^W ' <<< "$out"); twice=$(grep '^W ' <<< "$out" | awk '{print $2}' | sort -n | uniq -d | wc -l)
lost=$(cat "$w/c2.log" "$w/c3.log" | grep -ac 'lost [0-9]* locks')
echo "nfs-race vers=$vers leasetime=${leasetime}s: $((ends / 2)) of 4 processes ended each part; lock cycles with EEXIST: $eexist;" \
  "writes: $writes, tokens written twice: $twice, stale opens (nlink 0): $stale; client kernel messages 'lost N locks': $lost"
if [ "$ends" != 8 ] || [ "$eexist" != 0 ] || [ "$twice" != 0 ] || [ "$stale" != 0 ]; then
  echo "nfs-race: FAILED, logs in $w"; exit 1
fi
rm -rf "$w"
