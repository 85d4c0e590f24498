package main

import (
	"slices"
	"testing"

	"github.com/leasetool/lease/bench/strategy"
)

// TestArguments: --strategy S (or --strategy=S) is taken out of the lease
// arguments wherever it stands before a "--", and the seed's algorithms
// lose any --writers.
func TestArguments(t *testing.T) {
	for _, tc := range []struct {
		in   []string
		kind strategy.Kind
		out  []string
	}{
		{[]string{"lb", "renew-batch", "--root", "r"}, strategy.Concurrent, []string{"lb", "renew-batch", "--root", "r"}},
		{[]string{"lb", "renew-batch", "--strategy", "nosync", "--root", "r"}, strategy.NoSync, []string{"lb", "renew-batch", "--root", "r"}},
		{[]string{"lb", "--strategy=sequential", "renew-batch", "--writers", "8", "--root", "r"}, strategy.Sequential, []string{"lb", "renew-batch", "--root", "r"}},
		{[]string{"lb", "renew-batch", "--writers=8", "--strategy", "one-at-a-time"}, strategy.OneAtATime, []string{"lb", "renew-batch"}},
		{[]string{"lb", "run", "ID", "--", "cmd", "--strategy", "nosync", "--writers", "2"}, strategy.Concurrent, []string{"lb", "run", "ID", "--", "cmd", "--strategy", "nosync", "--writers", "2"}},
	} {
		kind, out, err := strategyOf(tc.in)
		if err != nil {
			t.Fatalf("%v: %v", tc.in, err)
		}
		if kind.Writers() > 0 {
			out = withoutWriters(out)
		}
		if kind != tc.kind || !slices.Equal(out, tc.out) {
			t.Errorf("%v: %v %v, want %v %v", tc.in, kind, out, tc.kind, tc.out)
		}
	}
	for _, bad := range [][]string{{"lb", "--strategy"}, {"lb", "--strategy", "f323"}, {"lb", "--strategy="}} {
		if _, _, err := strategyOf(bad); err == nil {
			t.Errorf("%v: no error", bad)
		}
	}
}
