package hostile_test

import (
	"context"
	"io/fs"
	"os"
	"path/filepath"
	"strings"
	"syscall"
	"testing"

	"github.com/leasetool/lease/internal/hostile"
)

func init() {
	// replace-table ROOT SHARED: a member renames a TABLE of its own over
	// ROOT/TABLE, the same but for "shared":SHARED (the root is
	// group-writable: any member can).
	hostile.Register("replace-table", func(args []string) int {
		table := filepath.Join(args[0], "TABLE")
		data, err := os.ReadFile(table)
		if err != nil {
			return 2
		}
		i := strings.Index(string(data), `"shared":"`)
		if i < 0 {
			return 3
		}
		j := i + len(`"shared":"`)
		k := j + strings.IndexByte(string(data[j:]), '"')
		out := string(data[:j]) + args[1] + string(data[k:])
		if err := os.WriteFile(table+".b", []byte(out), 0o644); err != nil {
			return 4
		}
		if err := os.Rename(table+".b", table); err != nil {
			return 5
		}
		return 0
	})
}

// TestTableModeNotWidened (case 3 of issue 38): a member (B) renames a
// TABLE of its own over the root's, asking for wider modes than the
// owner (A) chose: "0777" (others write), and "all" or "0664" on a root
// its owner closed to others. No command of A's applies them: no record,
// directory or lock file of the table becomes writable by others or
// reachable by others beyond the root's own mode, the root keeps its
// mode, and A's fsck reports the widened TABLE as an error that --repair
// leaves (never a chmod to 2777). On main, A's claim writes a 0777 record
// and A's fsck --repair makes the root and every directory 2777. The
// root of a table made now is sticky (B cannot replace TABLE at all): the
// test takes the sticky bit away first, as on a table made before.
func TestTableModeNotWidened(t *testing.T) {
	t.Parallel()
	for _, c := range []struct {
		name   string
		shared string // what B writes in TABLE
		closed bool   // A made the root 2770 after init: others kept out
	}{
		{"0777", "0777", false},
		{"0666", "0666", false},
		{"all on a closed root", "all", true},
		{"0664 on a closed root", "0664", true},
	} {
		t.Run(c.name, func(t *testing.T) {
			t.Parallel()
			e := hostile.New(t)
			root := e.Table()
			// The root of a table made now is sticky: B cannot rename
			// anything over A's TABLE.
			if out, err := e.Step(context.Background(), hostile.B, "replace-table", root, c.shared).CombinedOutput(); err == nil {
				t.Errorf("B replaced TABLE in a sticky root: %s", out)
			}
			// One made before the sticky bit was set (or whose owner took
			// it away): B can, and what follows is the bound that holds
			// all the same.
			mode := uint32(0o2775)
			if c.closed {
				mode = 0o2770
			}
			if err := syscall.Chmod(root, mode); err != nil {
				t.Fatal(err)
			}
			rootMode := modeOf(t, root)
			before := modesOf(t, root)
			id := strings.Repeat("0", 63) + "3"
			e.Must(0, hostile.A, id+"\n", "add", "--root", root)
			if out, err := e.Step(context.Background(), hostile.B, "replace-table", root, c.shared).CombinedOutput(); err != nil {
				t.Fatalf("B replacing TABLE: %v %s", err, out)
			}
			// A works on: whatever it does (a refusal is fine), nothing it
			// makes or changes lets others in.
			claim := e.Run(hostile.A, "", "claim", "--root", root, "--next", "1")
			fsck := e.Run(hostile.A, "", "fsck", "--root", root)
			repair := e.Run(hostile.A, "", "fsck", "--root", root, "--repair")
			// fsck --repair gives the root its sticky bit back, nothing else.
			if got := modeOf(t, root); got&^syscall.S_ISVTX != rootMode {
				t.Errorf("the root's mode changed from %04o to %04o\nfsck --repair: %s", rootMode, got, repair)
			}
			limit := uint32(0o775)
			if c.closed {
				limit = 0o770
			}
			// What was there keeps its mode or loses bits; what is new
			// has none beyond the root's; nothing lets others write.
			for p, m := range modesOf(t, root) {
				old, ok := before[p]
				if p == root {
					old |= syscall.S_ISVTX
				}
				switch {
				case m&0o002 != 0:
					t.Errorf("%s: mode %04o: others may write", p, m)
				case ok && m&^old != 0:
					t.Errorf("%s: mode %04o, was %04o", p, m, old)
				case !ok && m&0o777&^limit != 0:
					t.Errorf("%s: mode %04o, beyond the root's %04o", p, m, rootMode)
				}
			}
			if fsck.Code == 0 || !strings.Contains(fsck.Out, "TABLE") {
				t.Errorf("fsck does not report the widened TABLE:\nclaim: %s\nfsck: %s", claim, fsck)
			}
			if repair.Code&4 == 0 {
				t.Errorf("fsck --repair claims to have settled the widened TABLE: %s", repair)
			}
		})
	}
}

// modesOf is modeOf of every entry of the table but lost+found/'s.
func modesOf(t *testing.T, root string) map[string]uint32 {
	t.Helper()
	modes := map[string]uint32{}
	filepath.WalkDir(root, func(p string, d fs.DirEntry, err error) error {
		if err != nil || strings.Contains(p, "lost+found/") {
			return nil
		}
		modes[p] = modeOf(t, p)
		return nil
	})
	return modes
}

// modeOf is the mode bits (permissions, setuid, setgid, sticky) of p,
// never following a link.
func modeOf(t *testing.T, p string) uint32 {
	t.Helper()
	var st syscall.Stat_t
	if err := syscall.Lstat(p, &st); err != nil {
		t.Fatal(err)
	}
	return uint32(st.Mode) & 0o7777 // uint16 on darwin and freebsd
}
