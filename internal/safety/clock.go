package safety

import "github.com/leasetool/lease/commit"

// at sets st's clock to now and returns st: how the scenarios run an
// operation at a given time.
func at(st *commit.Store, now float64) *commit.Store {
	st.Clock = commit.FixedClock(now)
	return st
}
