package safety

import (
	"context"
	"strings"
	"testing"

	"github.com/leasetool/lease/commit"
	"github.com/leasetool/lease/commit/seam"
	"github.com/leasetool/lease/layout"
	"github.com/leasetool/lease/leasefmt"
)

// skipSync drops the directory or file fsyncs: the protocol then acks
// records a crash can take away, and the explorer must say so.
type skipSync struct {
	seam.FS
	dirs, files bool
}

func (s skipSync) SyncDir(name string) error {
	if s.dirs {
		return nil
	}
	return s.FS.SyncDir(name)
}

func (s skipSync) CreateExcl(name string) (seam.File, error) {
	f, err := s.FS.CreateExcl(name)
	if err != nil || !s.files {
		return f, err
	}
	return noSyncFile{f}, nil
}

type noSyncFile struct{ seam.File }

// fakeSyncfs says syncfs is a barrier and makes nothing durable: a batch
// under sync = syncfs then has no barrier at all.
type fakeSyncfs struct{ seam.FS }

func (fakeSyncfs) FilesystemType() (string, bool, error)  { return "crashfs", true, nil }
func (fakeSyncfs) OpenSyncfs() (seam.SyncfsHandle, error) { return fakeSyncfsHandle{}, nil }

type fakeSyncfsHandle struct{}

func (fakeSyncfsHandle) Syncfs() error { return nil }
func (fakeSyncfsHandle) Close() error  { return nil }

// skipStageSync drops the fsyncs of what is staged: a directory result's
// files and directories.
type skipStageSync struct{ seam.FS }

func (s skipStageSync) SyncFile(name string) error {
	if strings.HasPrefix(name, layout.StageDir+"/") {
		return nil
	}
	return s.FS.SyncFile(name)
}

func (s skipStageSync) SyncDir(name string) error {
	if strings.HasPrefix(name, layout.StageDir+"/") {
		return nil
	}
	return s.FS.SyncDir(name)
}

func (noSyncFile) Sync() error { return nil }

func scenario(name string) *Scenario {
	for _, sc := range append(WorkScenarios(), CampaignScenarios()...) {
		if sc.Name == name {
			return sc
		}
	}
	panic("no scenario " + name)
}

// TestExplorerFindsBrokenProtocols breaks the durability protocol in ways
// the crash model must catch, so a clean run means something.
func TestExplorerFindsBrokenProtocols(t *testing.T) {
	t.Parallel()
	cases := []struct {
		name     string
		scenario string
		wrap     func(seam.FS) seam.FS
		run      func(r *Run)
		want     string
	}{
		{name: "no directory fsync", scenario: "renew-batch",
			wrap: func(f seam.FS) seam.FS { return skipSync{FS: f, dirs: true} }, want: "acknowledged"},
		{name: "syncfs that syncs nothing", scenario: "renew-batch/syncfs",
			wrap: func(f seam.FS) seam.FS { return fakeSyncfs{f} }, want: "acknowledged"},
		{name: "no file fsync", scenario: "claim",
			wrap: func(f seam.FS) seam.FS { return skipSync{FS: f, files: true} }, want: "acknowledged by claim"},
		{name: "no file fsync, publish", scenario: "complete --publish",
			wrap: func(f seam.FS) seam.FS { return skipSync{FS: f, files: true} }, want: "holder alice (token 3) acknowledged live until 6000, but after recovery the token is"},
		{name: "no fsync of a directory result", scenario: "run --complete, whole staging directory",
			wrap: func(f seam.FS) seam.FS { return skipStageSync{f} }, want: "acknowledged as published (a directory result)"},
		{name: "success before the barrier", scenario: "claim", run: func(r *Run) {
			// report each claim as soon as it is decided, before its write
			// and its directory fsync
			claim := commit.ClaimDecision(leasefmt.Work, "carol", TTL, 0)
			r.At(Now).Apply(context.Background(), leasefmt.Work, items(0, 4, 5), func(it commit.Item, cur *leasefmt.Record, now float64) (*leasefmt.Record, commit.Outcome, string) {
				next, out, d := claim(it, cur, now)
				if out == commit.OK {
					r.Ack(Ack{Op: "early claim", Record: next})
				}
				return next, out, d
			})
		}, want: "acknowledged by early claim"},
		{name: "token goes back", scenario: "claim", run: func(r *Run) {
			rec := &leasefmt.Record{Kind: leasefmt.Work, ID: TestID(0), Status: leasefmt.Leased, Owner: "mallory", Token: 1,
				ClaimedAt: Now, RenewedAt: Now, ExpiresAt: Now + TTL}
			unlock, err := r.Store.Lock(context.Background(), leasefmt.Work, rec.ID)
			if err != nil {
				panic(err)
			}
			defer unlock()
			if err := r.Store.WriteOne(rec); err != nil {
				panic(err)
			}
		}, want: "token went back"},
		{name: "two live holders", scenario: "claim", run: func(r *Run) {
			// grant ID 0, held by alice until 6000, to carol anyway
			rec := &leasefmt.Record{Kind: leasefmt.Work, ID: TestID(0), Status: leasefmt.Leased, Owner: "carol", Token: 4,
				ClaimedAt: Now, RenewedAt: Now, ExpiresAt: Now + TTL}
			r.Ack(Ack{Op: "setup", Record: &leasefmt.Record{Kind: leasefmt.Work, ID: TestID(0), Status: leasefmt.Leased, Owner: "alice", Token: 3,
				ClaimedAt: T0, RenewedAt: T0, ExpiresAt: T0 + 5000}})
			unlock, _ := r.Store.Lock(context.Background(), leasefmt.Work, rec.ID)
			defer unlock()
			if err := r.Store.WriteOne(rec); err != nil {
				panic(err)
			}
		}, want: "holder alice"},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			sc := *scenario(tc.scenario)
			if tc.run != nil {
				sc.Run = tc.run
			}
			x := explorer()
			x.Wrap = tc.wrap
			res, err := x.Explore(&sc)
			if err != nil {
				t.Fatal(err)
			}
			if len(res.Violations) == 0 {
				t.Fatalf("%d crash states of a broken protocol, no violation found", res.States)
			}
			if !strings.Contains(strings.Join(res.Violations, "\n"), tc.want) {
				t.Fatalf("%d violations, none mentions %q; the first:\n%s", len(res.Violations), tc.want, strings.Join(res.Violations[:min(5, len(res.Violations))], "\n"))
			}
			t.Logf("%d states, first violation: %s", res.States, res.Violations[0])
		})
	}
}
