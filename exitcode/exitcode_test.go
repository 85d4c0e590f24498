package exitcode_test

import (
	"testing"

	"github.com/leasetool/lease/commit"
	"github.com/leasetool/lease/exitcode"
)

// TestOfAndWorse: the exit status of each outcome and the order in which a
// batch picks the most serious one (4 over 3 over 5 over 1 over 0).
func TestOfAndWorse(t *testing.T) {
	for _, tc := range []struct{ a, b, want int }{
		{0, 1, 1}, {1, 5, 5}, {5, 3, 3}, {3, 4, 4}, {4, 3, 4}, {3, 5, 3}, {5, 1, 5}, {4, 0, 4}, {0, 0, 0}, {4, 2, 2}, {2, 4, 2}, {2, 16, 2},
	} {
		if got := exitcode.Worse(tc.a, tc.b); got != tc.want {
			t.Errorf("Worse(%d, %d) = %d, want %d", tc.a, tc.b, got, tc.want)
		}
	}
	for o, want := range map[commit.Outcome]int{
		commit.OK: 0, commit.StaleToken: 1, commit.Expired: 1, commit.Held: 1, commit.Done: 1, commit.Released: 1,
		commit.Missing: 1, commit.Exists: 1, commit.Corrupt: 3, commit.LockTimeout: 5, commit.IOError: 4,
	} {
		if got := exitcode.Of(o); got != want {
			t.Errorf("Of(%s) = %d, want %d", o.Reason(), got, want)
		}
		for p := range 11 {
			q := commit.Outcome(p)
			if o.Graver(q) != (exitcode.Worse(exitcode.Of(q), exitcode.Of(o)) != exitcode.Of(q) && exitDiffers(o, q)) {
				t.Errorf("%s.Graver(%s) = %v disagrees with the exit order", o.Reason(), q.Reason(), o.Graver(q))
			}
		}
	}
	if got, want := exitcode.Order(), "4 over 3 over 5 over 1 over 0"; got != want {
		t.Errorf("Order() = %q, want %q", got, want)
	}
}

// exitDiffers: two outcomes whose exit statuses differ.
func exitDiffers(a, b commit.Outcome) bool { return exitcode.Of(a) != exitcode.Of(b) }
