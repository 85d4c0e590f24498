# Sourced by the guest inits of scripts/nfs-race.sh, which are also the setups (uml.setup=; UML_SETUP is
# the setup's path) of internal/uml kernels (internal/nfstest), inside a User-Mode Linux kernel whose root is the host's
# root, read-only (hostfs): writable /tmp, /run, /etc, /var/lib/nfs, and the UML kernel's modules
# (Debian: /usr/lib/uml/modules/VERSION; the host's /lib/modules is not the UML kernel's). Under
# internal/uml, its guest/init made the first four and the modules' tree already.
export PATH=/usr/local/go/bin:/usr/sbin:/usr/bin:/sbin:/bin
if [ -z "${UML_SETUP:-}" ]; then
  mount -t proc proc /proc; mount -t sysfs sys /sys
  mount -t tmpfs tmpfs /run
  # A checkout under /tmp (a clone there, as CI's may be) is hidden by the guest's own /tmp: the
  # guest scripts (here: the init's directory, set by the init) are copied to /run/setup first.
  case "${here:-}" in /tmp/*) mkdir -p /run/setup && cp -R "$here/." /run/setup/ && here=/run/setup ;; esac
  mount -t tmpfs tmpfs /tmp
  mkdir -p /run/etc; cp -a /etc/. /run/etc/ 2>/dev/null; mount --bind /run/etc /etc
  mkdir -p /run/modroot/lib/modules; ln -s "/usr/lib/uml/modules/$(uname -r)" "/run/modroot/lib/modules/$(uname -r)"
fi
mount -t tmpfs tmpfs /var/lib/nfs
mkdir -p /var/lib/nfs/rpc_pipefs /var/lib/nfs/v4recovery /var/lib/nfs/sm /var/lib/nfs/sm.bak
chown statd /var/lib/nfs /var/lib/nfs/sm /var/lib/nfs/sm.bak 2>/dev/null
mod() { modprobe -d /run/modroot "$1" || echo "guest: modprobe $1 failed"; }
ip link set lo up
arg() { tr ' ' '\n' < /proc/cmdline | sed -n "s/^$1=//p"; }   # a key=value of the kernel command line
