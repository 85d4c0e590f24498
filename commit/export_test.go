package commit_test

import "github.com/leasetool/lease/commit"

// at sets st's clock to now and returns st: the tests' way to run an
// operation at a given time.
func at(st *commit.Store, now float64) *commit.Store {
	st.Clock = commit.FixedClock(now)
	return st
}
