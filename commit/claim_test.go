package commit_test

// Claims: tokens only grow, and ClaimFirst holds at most n, trying the
// items in input order.

import (
	"context"
	"os"
	"slices"
	"strings"
	"testing"

	"github.com/leasetool/lease/commit"
	"github.com/leasetool/lease/leasefmt"
)

// TestClaimTokens: tokens only grow; a claim of a released or expired
// record gets the next token and keeps unknown keys.
func TestClaimTokens(t *testing.T) {
	t.Parallel()
	st, _ := hookedTable(t, 16)
	id := shardID(3, 1)
	path := st.Abs(st.RecordPath(leasefmt.Work, id))
	claim := func(now float64) commit.Result {
		return at(st, now).Claim(context.Background(), []commit.Item{{ID: id}}, "host/w", 10)[0]
	}
	if r := claim(100); r.Outcome != commit.OK || r.Token != 1 {
		t.Fatalf("first claim: %+v", r)
	}
	if r := claim(105); r.Outcome != commit.Held {
		t.Fatalf("claim of a live lease: %s", r.Outcome.Reason())
	}
	if r := claim(110); r.Outcome != commit.OK || r.Token != 2 {
		t.Fatalf("claim at expiry: %+v", r)
	}
	if r := at(st, 111).Release(context.Background(), []commit.Item{{ID: id, Token: 2}})[0]; r.Outcome != commit.OK || r.Record.Status != leasefmt.Released {
		t.Fatalf("release: %+v", r)
	}
	// Another program adds a key; the next claim keeps it.
	data, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	data = []byte(strings.Replace(string(data), "}\n", `,"x_campaign":{"a":[1,2]}}`+"\n", 1))
	if err := os.WriteFile(path, data, 0o644); err != nil {
		t.Fatal(err)
	}
	if r := claim(112); r.Outcome != commit.OK || r.Token != 3 {
		t.Fatalf("claim after release: %+v", r)
	}
	data, _ = os.ReadFile(path)
	if !strings.HasSuffix(string(data), `,"x_campaign":{"a":[1,2]}}`+"\n") || !strings.Contains(string(data), `"token":3,`) {
		t.Errorf("record after claim: %s", data)
	}
	if r := at(st, 113).Complete(context.Background(), []commit.Item{{ID: id, Token: 3}})[0]; r.Outcome != commit.OK {
		t.Fatalf("complete: %+v", r)
	}
	if r := claim(1e6); r.Outcome != commit.Done {
		t.Fatalf("claim of done work: %s", r.Outcome.Reason())
	}
}

// TestClaimFirst: never holds more than n, tries in input order.
func TestClaimFirst(t *testing.T) {
	t.Parallel()
	st, _ := hookedTable(t, 4)
	items := spread(10, 4)
	at(st, 100).Claim(context.Background(), items[1:3], "other", 60) // 1 and 2 are held
	res := at(st, 100).ClaimFirst(context.Background(), items, 3, "me", 60)
	var got []leasefmt.ID
	for _, r := range res {
		if r.Outcome == commit.OK {
			got = append(got, r.ID)
		}
	}
	if want := []leasefmt.ID{items[0].ID, items[3].ID, items[4].ID}; !slices.Equal(got, want) {
		t.Errorf("ClaimFirst granted %v, want %v", got, want)
	}
	for _, it := range items[5:] {
		if r := readRecord(t, st, it.ID); r != nil {
			t.Errorf("%s claimed beyond n: %+v", it.ID, r)
		}
	}
}
