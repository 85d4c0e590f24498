package commands

import (
	"context"
	"errors"
	"math"
	"strings"
	"testing"
	"time"
)

func TestWaitForStopsWhenDoneOrFailed(t *testing.T) {
	n := 0
	err := waitFor(context.Background(), time.Time{}, func() (bool, error) { n++; return n == 4, nil })
	if err != nil || n != 4 {
		t.Errorf("done on the 4th try: err %v after %d tries", err, n)
	}
	boom := errors.New("boom")
	n = 0
	err = waitFor(context.Background(), time.Time{}, func() (bool, error) { n++; return false, boom })
	if err != boom || n != 1 {
		t.Errorf("a failing try: err %v after %d tries", err, n)
	}
}

func TestWaitForDeadline(t *testing.T) {
	var tries []time.Time
	deadline := time.Now().Add(300 * time.Millisecond)
	err := waitFor(context.Background(), deadline, func() (bool, error) { tries = append(tries, time.Now()); return false, nil })
	if !errors.Is(err, errWaitTimedOut) {
		t.Fatalf("err %v, want errWaitTimedOut", err)
	}
	if len(tries) < 2 {
		t.Fatalf("%d tries", len(tries))
	}
	// The last try is at (or after) the deadline: a grant at the deadline
	// itself is not missed.
	if last := tries[len(tries)-1]; last.Before(deadline) {
		t.Errorf("last try %v before the deadline %v", last, deadline)
	}
	// A deadline already past: one try, no sleep.
	n := 0
	if err := waitFor(context.Background(), time.Now().Add(-time.Second), func() (bool, error) { n++; return false, nil }); !errors.Is(err, errWaitTimedOut) || n != 1 {
		t.Errorf("past deadline: err %v after %d tries", err, n)
	}
}

func TestWaitForContext(t *testing.T) {
	ctx, cancel := context.WithCancel(context.Background())
	n := 0
	err := waitFor(ctx, time.Time{}, func() (bool, error) {
		n++
		if n == 2 {
			cancel()
		}
		return false, nil
	})
	if !errors.Is(err, context.Canceled) || n != 2 {
		t.Errorf("cancelled: err %v after %d tries", err, n)
	}
}

func TestFillOptionalValues(t *testing.T) {
	id := strings.Repeat("1", 64) // an ID that is also a number
	valued := func(name string) bool { return name == "ttl" || name == "token" }
	for _, tc := range []struct{ in, want string }{
		{"--wait ID -- sh", "--wait=forever ID -- sh"},
		{"--wait 30 ID -- sh", "--wait 30 ID -- sh"},
		{"--wait=5 ID", "--wait=5 ID"},
		{"--wait forever ID", "--wait forever ID"},
		{"--ttl 5 --wait ID", "--ttl 5 --wait=forever ID"},
		{"--wait " + id + " -- sh", "--wait=forever " + id + " -- sh"},
		{"--wait", "--wait=forever"},
		{"--wait -- sh", "--wait=forever -- sh"},
		{"ID --wait 5", "ID --wait 5"},             // after the first argument: not a flag
		{"--token --wait ID", "--token --wait ID"}, // --wait is --token's value
	} {
		in := strings.Fields(strings.ReplaceAll(tc.in, "ID", string(holdLikeID)))
		want := strings.ReplaceAll(tc.want, "ID", string(holdLikeID))
		if got := strings.Join(fillOptionalValues(in, valued), " "); got != want {
			t.Errorf("%q: %q, want %q", tc.in, got, want)
		}
	}
}

const holdLikeID = "ca978112ca1bbdcafac231b39a23dc4da786eff8147c4e72b9807785afee48bb"

func TestParseWait(t *testing.T) {
	for s, want := range map[string]float64{"forever": math.Inf(1), "0": 0, "2.5": 2.5} {
		if got, err := parseWait(s); err != nil || got != want {
			t.Errorf("parseWait(%q) = %v, %v", s, got, err)
		}
	}
	for _, s := range []string{"-1", "NaN", "Inf", "soon", ""} {
		if _, err := parseWait(s); err == nil {
			t.Errorf("parseWait(%q) accepted", s)
		}
	}
}
