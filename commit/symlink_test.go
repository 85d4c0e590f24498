package commit_test

import (
	"context"
	"errors"
	"io/fs"
	"os"
	"path/filepath"
	"testing"

	"golang.org/x/sys/unix"

	"github.com/leasetool/lease/commit"
	"github.com/leasetool/lease/commit/seam"
	"github.com/leasetool/lease/layout"
	"github.com/leasetool/lease/leasefmt"
)

// A symbolic link planted as a record, as a shard directory or as a shard
// lock file is never followed for writing: every operation reports the
// record corrupt and the files outside the table are unchanged.
func TestPlantedSymlinks(t *testing.T) {
	t.Parallel()
	const shards = 4
	id := shardID(2, 5)
	validRecord := func() []byte {
		data, err := leasefmt.Encode(&leasefmt.Record{Kind: leasefmt.Work, ID: id, Status: leasefmt.Leased, Owner: "outside",
			Token: 1, ClaimedAt: 900, RenewedAt: 900, ExpiresAt: 2000})
		if err != nil {
			t.Fatal(err)
		}
		return data
	}()
	for _, tc := range []struct {
		name   string
		noLock bool // a link as the lock file: verify takes no lock and sees no record
		plant  func(t *testing.T, st *commit.Store, outside string)
	}{
		{"record", false, func(t *testing.T, st *commit.Store, outside string) {
			writeFile(t, filepath.Join(outside, "victim.json"), validRecord)
			symlink(t, filepath.Join(outside, "victim.json"), st.Abs(st.RecordPath(leasefmt.Work, id)))
		}},
		{"dangling record", false, func(t *testing.T, st *commit.Store, outside string) {
			symlink(t, filepath.Join(outside, "nothing.json"), st.Abs(st.RecordPath(leasefmt.Work, id)))
		}},
		{"record to a directory", false, func(t *testing.T, st *commit.Store, outside string) {
			symlink(t, outside, st.Abs(st.RecordPath(leasefmt.Work, id)))
		}},
		{"shard directory", false, func(t *testing.T, st *commit.Store, outside string) {
			dir := st.Abs(st.ShardDir(leasefmt.Work, id.Shard(shards)))
			writeFile(t, filepath.Join(outside, id.FileName()), validRecord)
			writeFile(t, filepath.Join(outside, layout.LockFile), nil)
			if err := os.RemoveAll(dir); err != nil {
				t.Fatal(err)
			}
			symlink(t, outside, dir)
		}},
		{"lock file", true, func(t *testing.T, st *commit.Store, outside string) {
			lock := filepath.Join(st.Abs(st.ShardDir(leasefmt.Work, id.Shard(shards))), layout.LockFile)
			writeFile(t, filepath.Join(outside, "lockfile"), []byte("keep"))
			os.Remove(lock)
			symlink(t, filepath.Join(outside, "lockfile"), lock)
		}},
		{"dangling lock file", true, func(t *testing.T, st *commit.Store, outside string) {
			lock := filepath.Join(st.Abs(st.ShardDir(leasefmt.Work, id.Shard(shards))), layout.LockFile)
			os.Remove(lock)
			symlink(t, filepath.Join(outside, "newlock"), lock)
		}},
	} {
		for _, op := range []struct {
			name string
			run  func(st *commit.Store) commit.Result
		}{
			{"claim", func(st *commit.Store) commit.Result {
				return at(st, 5000).Claim(context.Background(), []commit.Item{{ID: id}}, "host/w", 60)[0]
			}},
			{"renew", func(st *commit.Store) commit.Result {
				return at(st, 1000).Renew(context.Background(), []commit.Item{{ID: id, Token: 1}}, 60)[0]
			}},
			{"release", func(st *commit.Store) commit.Result {
				return at(st, 1000).Release(context.Background(), []commit.Item{{ID: id, Token: 1}})[0]
			}},
			{"complete", func(st *commit.Store) commit.Result {
				return at(st, 1000).Complete(context.Background(), []commit.Item{{ID: id, Token: 1}})[0]
			}},
			{"verify", func(st *commit.Store) commit.Result {
				return at(st, 1000).Verify(context.Background(), []commit.Item{{ID: id, Token: 1}})[0]
			}},
		} {
			t.Run(tc.name+"/"+op.name, func(t *testing.T) {
				st, _ := hookedTable(t, shards)
				outside := t.TempDir()
				tc.plant(t, st, outside)
				// A fresh store: nothing resolved before the link was planted.
				st, log := openHooked(t, st.Root(), shards)
				st.SetLockTimeout(0)
				tableBefore, outsideBefore := snapshotTree(t, st.Root()), snapshotTree(t, outside)
				r := op.run(st)
				want := commit.Corrupt
				if tc.noLock && op.name == "verify" {
					want = commit.Missing
				}
				if r.Outcome != want {
					t.Errorf("%s: %s (%s), want %s", op.name, r.Outcome.Reason(), r.Detail, want.Reason())
				}
				if r.Outcome != want {
					t.Errorf("outcome %s, want %s", r.Outcome.Reason(), want.Reason())
				}
				if after := snapshotTree(t, outside); !after.equal(outsideBefore) {
					t.Errorf("outside the table changed: %s", after.diff(outsideBefore))
				}
				if after := snapshotTree(t, st.Root()); !after.equal(tableBefore) {
					t.Errorf("the table changed: %s", after.diff(tableBefore))
				}
				for _, o := range log.snapshot() {
					switch o.op {
					case seam.OpCreate, seam.OpRename, seam.OpFsync, seam.OpSyncDir, seam.OpMkdir, seam.OpRemove:
						t.Errorf("%s %s made for a planted link", o.op, o.name)
					}
				}
			})
		}
	}
}

// The engine refuses the same things when they are not links: a directory
// or a FIFO where a record should be.
func TestNonRegularRecord(t *testing.T) {
	t.Parallel()
	st, _ := hookedTable(t, 4)
	id, fifo := shardID(1, 1), shardID(1, 2)
	if err := os.Mkdir(st.Abs(st.RecordPath(leasefmt.Work, id)), 0o755); err != nil {
		t.Fatal(err)
	}
	if err := mkfifo(st.Abs(st.RecordPath(leasefmt.Work, fifo))); err != nil {
		t.Fatal(err)
	}
	for _, r := range at(st, 1000).Claim(context.Background(), []commit.Item{{ID: id}, {ID: fifo}}, "host/w", 60) {
		if r.Outcome != commit.Corrupt {
			t.Errorf("%s: %s (%s), want corrupt", r.ID, r.Outcome.Reason(), r.Detail)
		}
	}
	if _, err := st.Read(context.Background(), leasefmt.Work, fifo); !errors.Is(err, leasefmt.ErrCorrupt) {
		t.Errorf("Read of a FIFO = %v, want ErrCorrupt", err)
	}
	if r, err := st.Read(context.Background(), leasefmt.Work, shardID(1, 3)); r != nil || err != nil {
		t.Errorf("Read of a missing record = %v, %v; want nil, nil", r, err)
	}
	big := shardID(1, 4)
	writeFile(t, st.Abs(st.RecordPath(leasefmt.Work, big)), make([]byte, 5<<10))
	if _, err := st.Read(context.Background(), leasefmt.Work, big); !errors.Is(err, leasefmt.ErrCorrupt) {
		t.Errorf("Read of a 5 KiB file = %v, want ErrCorrupt", err)
	}
}

func writeFile(t *testing.T, name string, data []byte) {
	t.Helper()
	if err := os.WriteFile(name, data, 0o644); err != nil {
		t.Fatal(err)
	}
}

func symlink(t *testing.T, target, name string) {
	t.Helper()
	if err := os.Symlink(target, name); err != nil && !errors.Is(err, fs.ErrExist) {
		t.Fatal(err)
	}
}

func mkfifo(name string) error { return unix.Mkfifo(name, 0o644) }
