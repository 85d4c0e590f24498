package commit_test

// Abandoned first (held.go, docs/design.md#queue): claims name their lease
// in held/, and ClaimNext tries the leases there that may be over before
// the queue.

import (
	"context"
	"math/rand/v2"
	"os"
	"path/filepath"
	"slices"
	"testing"
	"time"

	"github.com/leasetool/lease/commit"
	"github.com/leasetool/lease/layout"
	"github.com/leasetool/lease/leasefmt"
)

// heldTable is a table of 16 work shards with n items queued, a clock skew
// of 2 s and the lock timeout given.
func heldTable(t *testing.T, n int, lockTimeout time.Duration) (*commit.Store, []commit.Item) {
	t.Helper()
	st, err := commit.Open(t.TempDir(), commit.Options{Create: &leasefmt.Table{WorkShards: 16, TargetShards: 4, CreatedAt: 1000}, ClockSkew: 2, LockTimeout: lockTimeout})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { st.Close() })
	items := make([]commit.Item, n)
	for i := range items {
		items[i] = commit.Item{ID: shardID(i%16, i)}
	}
	for _, r := range at(st, 900).Enqueue(context.Background(), items) {
		if r.Outcome != commit.OK {
			t.Fatalf("enqueue %s: %s %s", r.ID, r.Outcome.Reason(), r.Detail)
		}
	}
	return st, items
}

func claimAt(t *testing.T, st *commit.Store, now float64, ttl float64, items ...commit.Item) {
	t.Helper()
	for _, r := range at(st, now).Claim(context.Background(), items, "dead", ttl) {
		if r.Outcome != commit.OK {
			t.Fatalf("claim %s at %g: %s %s", r.ID, now, r.Outcome.Reason(), r.Detail)
		}
	}
}

// heldNames lists held/ (nil when it does not exist).
func heldNames(t *testing.T, st *commit.Store) []string {
	t.Helper()
	ents, err := os.ReadDir(st.Abs("held"))
	if os.IsNotExist(err) {
		return nil
	}
	if err != nil {
		t.Fatal(err)
	}
	var out []string
	for _, e := range ents {
		out = append(out, e.Name())
	}
	return out
}

// TestClaimNextAbandonedFirst: of 3,000 queued items, 3 whose leases
// expired (and 20 still live) are the first three ClaimNext grants, oldest
// expiry first, whatever order the queue's shards are visited in; on the
// code before held/, a claim took a random queued item.
func TestClaimNextAbandonedFirst(t *testing.T) {
	t.Parallel()
	st, items := heldTable(t, 3000, time.Minute)
	dead := []commit.Item{items[2001], items[17], items[1234]}
	for i, it := range dead {
		claimAt(t, st, 1000+float64(i), 10, it) // expire at 1010, 1011, 1012
	}
	claimAt(t, st, 1000, 1000, items[100:120]...) // live until 2000
	for i, want := range dead {
		nx := at(st, 1030).ClaimNext(context.Background(), 1, "w", 60, rand.New(rand.NewPCG(uint64(i), 7)))
		if nx.Answer != commit.Granted || len(nx.Results) != 1 {
			t.Fatalf("claim %d: %s %+v", i, nx.Answer, nx.Results)
		}
		if got := nx.Results[0]; got.ID != want.ID || got.Token != 2 {
			t.Fatalf("claim %d granted %s token %d, want the abandoned %s (token 2)", i, got.ID, got.Token, want.ID)
		}
	}
	// The takeovers renamed the names: the three new leases and the 20
	// live ones, none read again before it can be over.
	names := heldNames(t, st)
	if len(names) != 23 {
		t.Fatalf("held/ has %d names, want 23: %v", len(names), names)
	}
	for _, it := range dead {
		if !slices.Contains(names, layout.HeldName(it.ID, 1090, 2)) {
			t.Errorf("no held/ name of the takeover of %s: %v", it.ID, names)
		}
	}
}

// TestHeldBusyLockPassedOver: a held/ candidate whose record lock is busy
// is tried once and passed over, never waited for (the lock timeout here
// is an hour): the next expired one is granted.
func TestHeldBusyLockPassedOver(t *testing.T) {
	t.Parallel()
	st, items := heldTable(t, 200, time.Hour)
	busy, free := items[5], items[6]
	claimAt(t, st, 1000, 10, busy) // the oldest
	claimAt(t, st, 1001, 10, free)
	unlock, err := st.Lock(context.Background(), leasefmt.Work, busy.ID)
	if err != nil {
		t.Fatal(err)
	}
	defer unlock()
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute) // a bound, not an assertion
	defer cancel()
	nx := at(st, 1030).ClaimNext(ctx, 1, "w", 60, rand.New(rand.NewPCG(1, 2)))
	if ctx.Err() != nil {
		t.Fatal("the claim waited for the busy lock")
	}
	if nx.Answer != commit.Granted || len(nx.Results) != 1 || nx.Results[0].ID != free.ID {
		t.Fatalf("%s %+v, want %s granted", nx.Answer, nx.Results, free.ID)
	}
}

// TestHeldNames: a claim makes the name, a renewal leaves it, release,
// complete and fail remove it; a name left by a finisher killed before the
// removal is removed by the next claim that reads it, and one of a lease
// renewed since is renamed to the record's expiry.
func TestHeldNames(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	st, items := heldTable(t, 40, time.Minute)
	a, b, c, d := items[0], items[1], items[2], items[3]
	claimAt(t, st, 1000, 10.5, a, b, c, d)
	want := []string{}
	for _, it := range []commit.Item{a, b, c, d} {
		want = append(want, layout.HeldName(it.ID, 1010.5, 1))
	}
	slices.Sort(want)
	if got := heldNames(t, st); !slices.Equal(got, want) {
		t.Fatalf("held/ after the claims: %v, want %v", got, want)
	}
	tok := func(it commit.Item) commit.Item { return commit.Item{ID: it.ID, Token: 1} }
	at(st, 1005).Renew(ctx, []commit.Item{tok(a), tok(b)}, 100)
	if got := heldNames(t, st); !slices.Equal(got, want) {
		t.Fatalf("a renewal changed held/: %v", got)
	}
	if r := at(st, 1006).Release(ctx, []commit.Item{tok(c)}); r[0].Outcome != commit.OK {
		t.Fatal(r[0].Outcome.Reason())
	}
	if r := at(st, 1006).Complete(ctx, []commit.Item{tok(d)}); r[0].Outcome != commit.OK {
		t.Fatal(r[0].Outcome.Reason())
	}
	got := heldNames(t, st)
	if len(got) != 2 || slices.Contains(got, layout.HeldName(c.ID, 1010.5, 1)) || slices.Contains(got, layout.HeldName(d.ID, 1010.5, 1)) {
		t.Fatalf("held/ after release and complete: %v", got)
	}
	// d's completer killed between its done record and the removals: the
	// name and the queue entry are back.
	if err := os.WriteFile(st.Abs("held/"+layout.HeldName(d.ID, 1010.5, 1)), nil, 0o644); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(st.Abs(st.QueuePath(d.ID)), nil, 0o644); err != nil {
		t.Fatal(err)
	}
	// At 1020 a's and b's names (1011 + skew) are read: renewed until 1105,
	// they are renamed; d's is removed with its queue entry; c (released,
	// no name) may be granted from the queue, or another item.
	nx := at(st, 1020).ClaimNext(ctx, 1, "w", 60, rand.New(rand.NewPCG(3, 4)))
	if nx.Answer != commit.Granted || nx.HeldRead != 3 || nx.TakenOver != 0 || nx.Cleaned != 1 {
		t.Fatalf("%s read %d held names, took over %d, cleaned %d; want granted, 3, 0, 1", nx.Answer, nx.HeldRead, nx.TakenOver, nx.Cleaned)
	}
	got = heldNames(t, st)
	for _, n := range []string{layout.HeldName(a.ID, 1105, 1), layout.HeldName(b.ID, 1105, 1)} {
		if !slices.Contains(got, n) {
			t.Errorf("held/ lacks the renamed %s: %v", n, got)
		}
	}
	if slices.Contains(got, layout.HeldName(d.ID, 1010.5, 1)) {
		t.Errorf("the stale name of done %s is still in held/", d.ID)
	}
	if _, err := os.Stat(st.Abs(st.QueuePath(d.ID))); !os.IsNotExist(err) {
		t.Errorf("the queue entry of done %s is still there (%v)", d.ID, err)
	}
	if len(got) != 3 {
		t.Errorf("held/ = %v, want a's, b's and the new lease's", got)
	}
}

// TestHeldTableWithoutHeldDir: a table made before held/ (none there)
// takes claims, and the first claim makes held/ as a directory; a held/
// that is not a directory (a symbolic link) is never followed: the claim
// still succeeds from the queue.
func TestHeldTableWithoutHeldDir(t *testing.T) {
	t.Parallel()
	st, items := heldTable(t, 4, time.Minute)
	if heldNames(t, st) != nil {
		t.Fatal("held/ exists before any claim")
	}
	nx := at(st, 1000).ClaimNext(context.Background(), 1, "w", 60, rand.New(rand.NewPCG(1, 1)))
	if nx.Answer != commit.Granted {
		t.Fatal(nx.Answer)
	}
	if fi, err := os.Lstat(st.Abs("held")); err != nil || !fi.IsDir() {
		t.Fatalf("held/ after the first claim: %v %v", fi, err)
	}
	st2, _ := heldTable(t, 4, time.Minute)
	elsewhere := t.TempDir()
	if err := os.Symlink(elsewhere, st2.Abs("held")); err != nil {
		t.Fatal(err)
	}
	// An expired lease's name behind the link: read through it, a claim
	// would take items[0] over and rename the name.
	planted := layout.HeldName(items[0].ID, 1010, 1)
	if err := os.WriteFile(filepath.Join(elsewhere, planted), nil, 0o644); err != nil {
		t.Fatal(err)
	}
	claimAt(t, st2, 1000, 10, items[0])
	nx = at(st2, 1030).ClaimNext(context.Background(), 1, "w", 60, rand.New(rand.NewPCG(1, 1)))
	if nx.Answer != commit.Granted || nx.HeldRead != 0 || nx.TakenOver != 0 {
		t.Fatalf("%s, %d held names read through the link", nx.Answer, nx.HeldRead)
	}
	if ents, _ := os.ReadDir(elsewhere); len(ents) != 1 || ents[0].Name() != planted {
		t.Fatalf("a claim changed what the symbolic link held/ points to: %v", ents)
	}
}
