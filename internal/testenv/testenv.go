// Package testenv gives tests one way to meet their prerequisites (root,
// tools, loop mounts, services): a test that cannot run here skips with the
// reason, and when LEASE_TEST_REQUIRE says the prerequisite must be there
// (CI sets LEASE_TEST_REQUIRE=all) it fails instead, so that in CI a skip is
// a failure.
package testenv

import (
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
)

// RequireEnv names the variable: "all", or a comma-separated list of the
// prerequisite kinds that must be present (e.g. "mpi,fuse").
const RequireEnv = "LEASE_TEST_REQUIRE"

// Required reports whether RequireEnv demands prerequisites of this kind
// ("root", "mpi", "fuse", "slurm", "gluster", a tool's name, ...).
func Required(kind string) bool {
	for _, w := range strings.Split(os.Getenv(RequireEnv), ",") {
		if w = strings.TrimSpace(w); w == "all" || (w != "" && w == kind) {
			return true
		}
	}
	return false
}

// SkipsEnv names the variable that make test sets to a file: every skip
// through Missing appends one line to it, "DIR TEST: why", which
// scripts/test-skips.sh lists at the end of the run.
const SkipsEnv = "LEASE_TEST_SKIPS"

// Missing skips t because a prerequisite of this kind is missing, saying
// why, or fails it when Required(kind).
func Missing(t testing.TB, kind, why string) {
	t.Helper()
	if Required(kind) {
		t.Fatalf("%s (%s=%s forbids skipping)", why, RequireEnv, os.Getenv(RequireEnv))
	}
	recordSkip(t.Name(), why)
	t.Skipf("skipping: %s (set %s=all to make this a failure)", why, RequireEnv)
}

// recordSkip appends the skip of test name to the file SkipsEnv names, if
// any: one write of one line, O_APPEND, so that the test binaries make test
// runs at once do not interleave their lines.
func recordSkip(name, why string) {
	path := os.Getenv(SkipsEnv)
	if path == "" {
		return
	}
	dir, _ := os.Getwd()
	if rel, ok := moduleRelative(dir); ok {
		dir = rel
	}
	line := strings.ReplaceAll(dir+" "+name+": "+why, "\n", " ") + "\n"
	f, err := os.OpenFile(path, os.O_WRONLY|os.O_APPEND|os.O_CREATE, 0o644)
	if err != nil {
		return // the list is a convenience: the skip itself is said by t.Skip
	}
	f.WriteString(line)
	f.Close()
}

// moduleRelative is dir relative to the closest parent holding a go.mod
// (the package's path in its module, "." for the root).
func moduleRelative(dir string) (string, bool) {
	for root := dir; ; {
		if _, err := os.Stat(filepath.Join(root, "go.mod")); err == nil {
			rel, err := filepath.Rel(root, dir)
			return "./" + rel, err == nil
		}
		parent := filepath.Dir(root)
		if parent == root {
			return "", false
		}
		root = parent
	}
}

// debianPackage names the Debian package that brings each tool a test
// looks for, for the skip message.
var debianPackage = map[string]string{
	"mpirun": "openmpi-bin", "mpicc": "libopenmpi-dev", "pkg-config": "pkg-config",
	"mkfs.ext4": "e2fsprogs", "mkfs.xfs": "xfsprogs", "mkfs.btrfs": "btrfs-progs",
	"mount": "mount", "umount": "mount", "nsenter": "util-linux", "unshare": "util-linux",
	"flock": "util-linux", "setsid": "util-linux", "ip": "iproute2", "ss": "iproute2",
	"zsh": "zsh", "fish": "fish", "groff": "groff", "man": "man-db", "make": "make",
	"python3": "python3", "promtool": "prometheus", "afl-fuzz": "afl++", "afl-cc": "afl++",
	"clang": "clang", "bash": "bash", "sh": "dash", "sha256sum": "coreutils", "od": "coreutils",
	"install": "coreutils", "cut": "coreutils", "tail": "coreutils", "grep": "grep",
	"jq": "jq", "bc": "bc", "getfattr": "attr", "glusterd": "glusterfs-server",
	"glusterfs": "glusterfs-client", "sbatch": "slurm-wlm", "srun": "slurm-wlm",
	"sinfo": "slurm-wlm", "scancel": "slurm-wlm", "go": "golang-go", "dd": "coreutils",
	"uml_switch": "uml-utilities", "rpc.nfsd": "nfs-kernel-server", "exportfs": "nfs-kernel-server",
	"mount.nfs": "nfs-common", "rpc.statd": "nfs-common", "rpcbind": "rpcbind", "xz": "xz-utils",
	"cc": "gcc", "strace": "strace", "sqlite3": "sqlite3", "parallel": "parallel",
}

// Install is the clause that says how to get tool on Debian: "apt-get
// install PACKAGE", or "" for a tool no package is known for.
func Install(tool string) string {
	if p, ok := debianPackage[tool]; ok {
		return "apt-get install " + p
	}
	return ""
}

// NeedRoot skips (or fails) t unless it runs as root; what says what needs
// it.
func NeedRoot(t testing.TB, what string) {
	t.Helper()
	if os.Geteuid() != 0 {
		Missing(t, "root", what+" needs root")
	}
}

// NeedTools skips (or fails) t unless every tool is on PATH.
func NeedTools(t testing.TB, tools ...string) {
	t.Helper()
	for _, tool := range tools {
		if _, err := exec.LookPath(tool); err != nil {
			why := tool + " is not installed"
			if in := Install(tool); in != "" {
				why += ": " + in
			}
			Missing(t, tool, why)
		}
	}
}

// LoopMount makes a fresh image of size bytes, formats it with
// mkfs.FSTYPE (extra mkfs arguments before the image), loop-mounts it on a
// new directory and returns the mountpoint; t.Cleanup unmounts it (lazily
// if a normal unmount fails, which also fails the test).
func LoopMount(t testing.TB, fstype string, size int64, mkfsArgs ...string) string {
	t.Helper()
	NeedRoot(t, "loop-mounting "+fstype)
	mkfs := "mkfs." + fstype
	NeedTools(t, mkfs, "mount", "umount")
	dir := t.TempDir()
	img := filepath.Join(dir, fstype+".img")
	f, err := os.Create(img)
	if err != nil {
		t.Fatal(err)
	}
	err = f.Truncate(size)
	f.Close()
	if err != nil {
		t.Fatal(err)
	}
	args := append([]string{"-q"}, mkfsArgs...)
	if fstype == "xfs" || fstype == "btrfs" {
		args = append(args, "-f")
	}
	if out, err := exec.Command(mkfs, append(args, img)...).CombinedOutput(); err != nil {
		t.Fatalf("%s: %v: %s", mkfs, err, out)
	}
	mnt := filepath.Join(dir, "mnt")
	if err := os.Mkdir(mnt, 0o755); err != nil {
		t.Fatal(err)
	}
	if out, err := exec.Command("mount", "-o", "loop", "-t", fstype, img, mnt).CombinedOutput(); err != nil {
		Missing(t, "loop", "mount -o loop "+fstype+": "+strings.TrimSpace(string(out)))
	}
	t.Cleanup(func() {
		if out, err := exec.Command("umount", mnt).CombinedOutput(); err != nil {
			t.Errorf("umount %s: %v: %s", mnt, err, out)
			exec.Command("umount", "-l", mnt).Run()
		}
	})
	return mnt
}
