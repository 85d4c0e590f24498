package safety

import (
	"os"
	"testing"
)

// strict makes known findings fail the tests again.
func strict() bool { return os.Getenv("LEASE_SAFETY_STRICT") == "1" }

// report fails t for every violation that is not a known finding (the
// first 20 printed), and logs the known ones (failing on them too in
// strict mode).
func report(t *testing.T, tally *Tally) {
	t.Helper()
	for i, v := range tally.Unknown {
		if i == 20 {
			t.Errorf("... and %d more violations", len(tally.Unknown)-20)
			break
		}
		t.Error(string(trunc([]byte(v), 1200)))
	}
	for _, l := range tally.Lines() {
		if strict() {
			t.Error(l)
		} else {
			t.Log(l)
		}
	}
}
