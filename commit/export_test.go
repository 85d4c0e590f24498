package commit_test

import (
	"time"

	"github.com/leasetool/lease/census"
	"github.com/leasetool/lease/commit"
)

// at is st read at the clock now: the tests' way to run an operation at a
// given time.
func at(st *commit.Store, now float64) *commit.Store { return st.At(now) }

// SetTallyQuiet sets how long a bucket must have been unchanged before a
// census keeps its counts, for the test's duration.
func SetTallyQuiet(t interface{ Cleanup(func()) }, d time.Duration) {
	old := census.TallyQuietForTest(d)
	t.Cleanup(func() { census.TallyQuietForTest(old) })
}
