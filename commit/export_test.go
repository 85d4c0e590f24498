package commit_test

import "github.com/leasetool/lease/commit"

// at is st read at the clock now: the tests' way to run an operation at a
// given time.
func at(st *commit.Store, now float64) *commit.Store { return st.At(now) }
