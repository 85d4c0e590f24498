package commands_test

// Tables used by several accounts: lease init --shared group, and what
// happens without it, with real second users (other uids in one group,
// run with syscall.Credential and a strict umask).

import (
	"bytes"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"testing"

	"github.com/leasetool/lease/internal/testenv"
)

// The accounts of these tests: alice and bob, both in the group campaign
// (their primary groups are their own, as with user private groups).
const (
	sharedGroup = 47100
	aliceUID    = 47101
	bobUID      = 47102
)

// sharedEnv is a directory every account can reach and a copy of the
// lease binary they can run.
type sharedEnv struct {
	t     *testing.T
	dir   string
	bin   string
	umask string // of every process run as another account
}

func newSharedEnv(t *testing.T) *sharedEnv {
	t.Helper()
	testenv.NeedRoot(t, "running lease as other accounts")
	dir := t.TempDir()
	// t.TempDir's directories are 0700: open the way for the other uids.
	for d := dir; d != os.TempDir() && d != "/"; d = filepath.Dir(d) {
		if err := os.Chmod(d, 0o755); err != nil {
			t.Fatal(err)
		}
	}
	bin := filepath.Join(dir, "lease")
	src, err := os.Open(procBin)
	if err != nil {
		t.Fatal(err)
	}
	defer src.Close()
	dst, err := os.OpenFile(bin, os.O_CREATE|os.O_WRONLY, 0o755)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := io.Copy(dst, src); err != nil {
		t.Fatal(err)
	}
	dst.Close()
	return &sharedEnv{t: t, dir: dir, bin: bin, umask: "022"}
}

// as runs lease as uid (primary group uid, member of sharedGroup) under
// the umask of s, and returns what it did.
func (s *sharedEnv) as(uid int, stdin string, args ...string) uxResult {
	s.t.Helper()
	cmd := exec.Command("/bin/sh", append([]string{"-c", "umask " + s.umask + `; exec "$0" "$@"`, s.bin}, args...)...)
	cmd.Dir = s.dir
	cmd.Env = []string{"PATH=" + s.dir + ":/usr/bin:/bin", "USER=u" + strconv.Itoa(uid), "HOME=" + s.dir, "XDG_CONFIG_HOME=" + filepath.Join(s.dir, "no-config")}
	cmd.SysProcAttr = &syscall.SysProcAttr{Credential: &syscall.Credential{Uid: uint32(uid), Gid: uint32(uid), Groups: []uint32{sharedGroup}}}
	var out, errb bytes.Buffer
	cmd.Stdin, cmd.Stdout, cmd.Stderr = strings.NewReader(stdin), &out, &errb
	err := cmd.Run()
	code := 0
	if ee, ok := err.(*exec.ExitError); ok {
		code = ee.ExitCode()
	} else if err != nil {
		s.t.Fatal(err)
	}
	return uxResult{code, out.String(), errb.String()}
}

func (s *sharedEnv) must(want, uid int, stdin string, args ...string) uxResult {
	s.t.Helper()
	r := s.as(uid, stdin, args...)
	if r.code != want {
		s.t.Fatalf("as uid %d: lease %s: exit %d, want %d\nstdout:\n%sstderr:\n%s", uid, strings.Join(args, " "), r.code, want, r.out, r.errOut)
	}
	return r
}

// root makes the table's root directory, owned by alice in the group
// campaign, as an administrator would for a campaign.
func (s *sharedEnv) root() string {
	s.t.Helper()
	root := filepath.Join(s.dir, "table")
	if err := os.Mkdir(root, 0o755); err != nil {
		s.t.Fatal(err)
	}
	if err := os.Chown(root, aliceUID, sharedGroup); err != nil {
		s.t.Fatal(err)
	}
	return root
}

// modeOf is the mode (with setgid) and group of path.
func modeOf(t *testing.T, path string) (uint32, uint32) {
	t.Helper()
	fi, err := os.Lstat(path)
	if err != nil {
		t.Fatal(err)
	}
	st := fi.Sys().(*syscall.Stat_t)
	return uint32(st.Mode) & 0o7777, st.Gid
}

// TestUnsharedTableRefusesOtherAccounts: a table made without --shared
// cannot be written by another member of the group: exit 2, the path and
// the fix named, nothing written.
func TestUnsharedTableRefusesOtherAccounts(t *testing.T) {
	t.Parallel()
	s := newSharedEnv(t)
	root := s.root()
	s.must(0, aliceUID, "", "init", "--root", root)
	id := string(uxID("shared-unshared"))
	before := coreSnapshot(t, root)
	r := s.must(2, bobUID, "", "claim", "--root", root, id)
	for _, want := range []string{
		"lease claim: permission denied: " + root + "/work/",
		"/.lock (owner 47101, group 47101, mode 0600) cannot be opened for writing by 47102; nothing was written",
		"nothing was written",
		"hint: a table used by several accounts must be shared by a group they are in: lease init --shared group",
		"chgrp -R GROUP " + root,
	} {
		if !strings.Contains(r.errOut, want) {
			t.Errorf("bob's claim: stderr lacks %q:\n%s", want, r.errOut)
		}
	}
	if r.out != "" {
		t.Errorf("stdout %q", r.out)
	}
	coreSame(t, "bob's refused claim", before, coreSnapshot(t, root))
	// Reading works for the group where the modes let it: status reads.
	if r := s.as(bobUID, "", "status", "--root", root); r.code == 4 {
		t.Errorf("bob's status: exit 4\n%s", r.errOut)
	}
}

// TestSharedTableAcrossAccounts: with lease init --shared group, alice and
// bob, each under umask 077, claim, read each other's records, publish,
// revoke and check the table; every directory made is setgid and
// group-writable, every lock file group-writable, every record
// group-readable; lease fsck finds nothing wrong, and reports (and
// repairs) a lock file that lost its group write bit.
func TestSharedTableAcrossAccounts(t *testing.T) {
	t.Parallel()
	s := newSharedEnv(t)
	s.umask = "077" // the strictest: lease, not the umask, gives the group its bits
	root := s.root()
	r := s.must(0, aliceUID, "", "init", "--root", root, "--shared", "group", "--shards", "4")
	if !strings.Contains(r.out, "shared (group) by group 47100") {
		t.Errorf("init: %q", r.out)
	}
	if data, _ := os.ReadFile(filepath.Join(root, "TABLE")); !strings.Contains(string(data), `"shared":"group"`) {
		t.Errorf("TABLE does not record the sharing: %s", data)
	}
	a, b := string(uxID("shared-alice")), string(uxID("shared-bob"))
	heldA := s.must(0, aliceUID, "", "claim", "--root", root, a).out
	heldB := s.must(0, bobUID, "", "claim", "--root", root, b).out
	// Each reads the other's record, and renews its own.
	for _, uid := range []int{aliceUID, bobUID} {
		out := s.must(0, uid, "", "status", "--root", root, "-o", "id-token").out
		if !strings.Contains(out, heldA) || !strings.Contains(out, heldB) {
			t.Errorf("uid %d: status shows %q", uid, out)
		}
	}
	s.must(0, bobUID, heldB, "renew-batch", "--root", root)
	// The queue: bob adds, alice takes the item and completes it, which
	// removes bob's queue entry.
	q := string(uxID("shared-queued"))
	s.must(0, bobUID, q+"\n", "add", "--root", root)
	got := s.must(0, aliceUID, "", "claim", "--root", root, "--next", "1").out
	if !strings.HasPrefix(got, q+" ") {
		t.Fatalf("alice's claim --next: %q", got)
	}
	s.must(0, aliceUID, got, "complete", "--root", root)
	// Bob publishes through lease run: his staging directory, made under
	// umask 077, is usable by the group.
	s.must(0, bobUID, "", "release", "--root", root, "-")
	s.must(0, bobUID, heldB, "release", "--root", root)
	s.must(0, bobUID, "", "run", "--root", root, "--complete", b, "--", "sh", "-c",
		`echo result > "$LEASE_STAGE/r.out" && echo "$LEASE_ID $LEASE_TOKEN" | lease complete --publish r.out`)
	// A stage left behind by bob (a second run that leaves a file) is
	// debris: bob's alone (mode 2700), which alice's fsck --repair reports
	// and leaves to bob (or root).
	c := string(uxID("shared-carol"))
	s.must(0, bobUID, "", "run", "--root", root, c, "--", "sh", "-c", `echo left > "$LEASE_STAGE/left.txt"`)
	// Alice revokes nothing of bob's but takes his released item over.
	s.must(0, aliceUID, "", "claim", "--root", root, c)
	s.must(0, aliceUID, "", "fsck", "--root", root, "--repair") // debris: swept, not an error
	s.must(0, aliceUID, "", "fsck", "--root", root)
	s.must(0, bobUID, "", "fsck", "--root", root)
	// The modes of what lease made, whoever ran it (what lease fsck moved
	// to lost+found/ keeps the modes its makers gave it, and a staging
	// directory is its claimer's alone until its result is published).
	err := filepath.Walk(root, func(p string, fi os.FileInfo, err error) error {
		if err != nil {
			return err
		}
		mode, gid := modeOf(t, p)
		rel, _ := filepath.Rel(root, p)
		if strings.HasPrefix(rel, "lost+found/") {
			return nil
		}
		if strings.HasPrefix(rel, "stage/") {
			if fi.IsDir() && mode != 0o2700 {
				t.Errorf("%s: mode %04o, want 2700 (its claimer's alone)", rel, mode)
			}
			return nil
		}
		switch {
		case gid != sharedGroup:
			t.Errorf("%s: group %d, want %d", rel, gid, sharedGroup)
		case fi.IsDir() && mode&0o2770 != 0o2770:
			t.Errorf("%s: directory mode %04o, want setgid and rwx for the group", rel, mode)
		case fi.Name() == ".lock" && mode&0o660 != 0o660:
			t.Errorf("%s: lock file mode %04o, want rw for the group", rel, mode)
		case !fi.IsDir() && mode&0o040 == 0:
			t.Errorf("%s: mode %04o, not readable by the group", rel, mode)
		}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := os.Stat(filepath.Join(root, "public", "r.out")); err != nil {
		t.Errorf("bob's result was not published: %v", err)
	}
	// A lock file that lost the group's write bit: bob cannot claim in its
	// shard (exit 2), fsck reports it (exit 4), alice, its owner, repairs
	// it (exit 1), and bob can claim again.
	var lock string
	for _, sh := range []string{"00", "01", "02", "03"} {
		p := filepath.Join(root, "work", sh, ".lock")
		if _, gid := modeOf(t, p); gid == sharedGroup {
			if fi, _ := os.Stat(p); fi.Sys().(*syscall.Stat_t).Uid == aliceUID {
				lock = p
				break
			}
		}
	}
	if lock == "" {
		t.Fatal("no lock file of alice's")
	}
	os.Chmod(lock, 0o600)
	var inShard string
	for i := 0; inShard == ""; i++ {
		id := uxID("shared-in-" + strconv.Itoa(i))
		var n uint64
		for _, ch := range id[:8] {
			n = n*16 + uint64(strings.IndexRune("0123456789abcdef", ch))
		}
		if filepath.Base(filepath.Dir(lock)) == "0"+strconv.FormatUint(n%4, 16) {
			inShard = string(id)
		}
	}
	if r := s.must(2, bobUID, "", "claim", "--root", root, inShard); !strings.Contains(r.errOut, "permission denied: "+lock) {
		t.Errorf("claim in a shard whose lock lost g+w: %s", r.errOut)
	}
	r = s.must(4, bobUID, "", "fsck", "--root", root)
	if !strings.Contains(r.out, "error permission "+lock+": lock file mode 0600 lacks 0060") {
		t.Errorf("fsck does not report the lock file:\n%s", r.out)
	}
	s.must(4, bobUID, "", "fsck", "--root", root, "--repair") // not his: he cannot fix it
	s.must(1, aliceUID, "", "fsck", "--root", root, "--repair")
	s.must(0, bobUID, "", "claim", "--root", root, inShard)
}

// TestSharedRefusals: a bad --shared, and --shared on an existing table
// that is shared otherwise, are usage errors that change nothing.
func TestSharedRefusals(t *testing.T) {
	t.Parallel()
	root := uxTable(t)
	for _, v := range []string{"groups", "0777x", "0060", "", "0666", "0602"} { // 0666, 0602: others would write
		if r := uxMust(t, 2, "", "init", "--root", filepath.Join(t.TempDir(), "t"), "--shared", v); !strings.Contains(r.errOut, "want group, all, or an octal mode") {
			t.Errorf("--shared %q: %q", v, r.errOut)
		}
	}
	before := coreSnapshot(t, root)
	if r := uxMust(t, 2, "", "init", "--root", root, "--shared", "group"); !strings.Contains(r.errOut, "is not shared") {
		t.Errorf("--shared on an unshared table: %q", r.errOut)
	}
	coreSame(t, "--shared on an unshared table", before, coreSnapshot(t, root))
}
