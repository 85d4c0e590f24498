package groups_test

// The rules of groups: their ID, the input check, and the checks of a
// manifest against its targets that fsck and the engine use.

import (
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"math"
	"slices"
	"strings"
	"testing"

	"github.com/leasetool/lease/groups"
	"github.com/leasetool/lease/internal/testenv"
	"github.com/leasetool/lease/leasefmt"
)

// grpID and grpIDs are realistic IDs (testenv.ID: the SHA-256 of a name).
var grpID, grpIDs = testenv.ID, testenv.IDs

func TestIDHashesSortedTargetsJoinedByNewline(t *testing.T) {
	t.Parallel()
	a, b, c := grpID("a"), grpID("b"), grpID("c")
	ids := []leasefmt.ID{a, b, c}
	slices.Sort(ids)
	want := sha256.Sum256([]byte(string(ids[0]) + "\n" + string(ids[1]) + "\n" + string(ids[2])))
	for _, order := range [][]leasefmt.ID{{a, b, c}, {c, b, a}, {b, c, a}} {
		if got := groups.ID(order); string(got) != hex.EncodeToString(want[:]) {
			t.Errorf("ID(%v) = %s, want %x", order, got, want)
		}
	}
	one := sha256.Sum256([]byte(a))
	if got := groups.ID([]leasefmt.ID{a}); string(got) != hex.EncodeToString(one[:]) {
		t.Errorf("ID of one target = %s, want the digest of the bare ID (no newline) %x", got, one)
	}
}

func TestCheckGroup(t *testing.T) {
	t.Parallel()
	ts := grpIDs("cg", 2)
	gid := groups.ID(ts)
	man := func() *leasefmt.Record {
		return &leasefmt.Record{Kind: leasefmt.Group, ID: gid, Status: leasefmt.Leased, Owner: "o", Token: 5,
			ClaimedAt: 10, RenewedAt: 10, ExpiresAt: 20, Targets: groups.Sorted(ts)}
	}
	tgt := func(id leasefmt.ID) *leasefmt.Record {
		return &leasefmt.Record{Kind: leasefmt.Target, ID: id, Status: leasefmt.Leased, Owner: "o", Token: 5,
			ClaimedAt: 10, RenewedAt: 10, ExpiresAt: 20, Group: gid}
	}
	s := groups.Sorted(ts)
	cases := []struct {
		name  string
		edit  func(m *leasefmt.Record, tm map[leasefmt.ID]*leasefmt.Record)
		wants string // substring of the one disagreement; "" for none
	}{
		{"agree", func(m *leasefmt.Record, tm map[leasefmt.ID]*leasefmt.Record) {}, ""},
		{"released together", func(m *leasefmt.Record, tm map[leasefmt.ID]*leasefmt.Record) {
			for _, r := range append([]*leasefmt.Record{m}, tm[s[0]], tm[s[1]]) {
				r.Status, r.ExpiresAt = leasefmt.Released, 15
			}
		}, ""},
		{"superseded after expiry", func(m *leasefmt.Record, tm map[leasefmt.ID]*leasefmt.Record) {
			tm[s[0]].Token, tm[s[0]].Group, tm[s[0]].ClaimedAt, tm[s[0]].ExpiresAt = 9, grpID("h"), 20, 30
		}, ""},
		{"superseded while held", func(m *leasefmt.Record, tm map[leasefmt.ID]*leasefmt.Record) {
			tm[s[0]].Token, tm[s[0]].Group, tm[s[0]].ClaimedAt = 9, grpID("h"), 19.5
		}, "while group"},
		{"missing", func(m *leasefmt.Record, tm map[leasefmt.ID]*leasefmt.Record) { delete(tm, s[1]) }, "has no record"},
		{"older token", func(m *leasefmt.Record, tm map[leasefmt.ID]*leasefmt.Record) { tm[s[1]].Token = 4 }, "older"},
		{"newer token of the group", func(m *leasefmt.Record, tm map[leasefmt.ID]*leasefmt.Record) { tm[s[1]].Token = 6 }, "newer"},
		{"expiry", func(m *leasefmt.Record, tm map[leasefmt.ID]*leasefmt.Record) { tm[s[1]].ExpiresAt = 25 }, "expires_at"},
		{"status", func(m *leasefmt.Record, tm map[leasefmt.ID]*leasefmt.Record) { tm[s[1]].Status = leasefmt.Released }, "status"},
		{"owner", func(m *leasefmt.Record, tm map[leasefmt.ID]*leasefmt.Record) { tm[s[1]].Owner = "p" }, "owner"},
		{"other group same token", func(m *leasefmt.Record, tm map[leasefmt.ID]*leasefmt.Record) { tm[s[1]].Group = grpID("h") }, "group"},
		{"unlisted member", func(m *leasefmt.Record, tm map[leasefmt.ID]*leasefmt.Record) {
			x := tgt(grpID("stray"))
			tm[x.ID] = x
		}, "does not list it"},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			m := man()
			tm := map[leasefmt.ID]*leasefmt.Record{ts[0]: tgt(ts[0]), ts[1]: tgt(ts[1])}
			tc.edit(m, tm)
			got := groups.Check(m, tm)
			switch {
			case tc.wants == "" && len(got) > 0:
				t.Errorf("disagreements %q, want none", got)
			case tc.wants != "" && (len(got) != 1 || !strings.Contains(got[0], tc.wants)):
				t.Errorf("disagreements %q, want one containing %q", got, tc.wants)
			}
			// CheckTarget, from the target's side, agrees on targets that
			// name the group.
			for id, tr := range tm {
				if tr.Group != gid {
					continue
				}
				named := len(got) > 0 && strings.Contains(got[0], string(id))
				if d := groups.CheckTarget(tr, m); (len(d) > 0) != named {
					t.Errorf("CheckTarget(%s) = %q, but CheckGroup = %q", id.Short(), d, got)
				}
			}
		})
	}
}

func TestCheckGroupInputRefusesOversizeManifest(t *testing.T) {
	t.Parallel()
	gid := grpID("big")
	if err := groups.CheckInput(gid, grpIDs("big", 40), "me", 10); err != nil {
		t.Fatalf("40 targets: %v", err)
	}
	err := groups.CheckInput(gid, grpIDs("big", 60), "me", 10)
	if !errors.Is(err, groups.ErrInput) {
		t.Fatalf("60 targets: %v, want ErrGroupInput", err)
	}
	for _, ttl := range []float64{0, -1, math.Inf(1), math.NaN()} {
		if err := groups.CheckInput(gid, grpIDs("t", 2), "me", ttl); !errors.Is(err, groups.ErrInput) {
			t.Errorf("ttl %v: %v, want ErrGroupInput", ttl, err)
		}
	}
	if err := groups.CheckInput(gid, []leasefmt.ID{grpID("x"), grpID("x")}, "me", 10); !errors.Is(err, groups.ErrInput) {
		t.Errorf("duplicate targets: %v, want ErrGroupInput", err)
	}
}
