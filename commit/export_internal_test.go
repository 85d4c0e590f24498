package commit

import "time"

// SetLockTimeout changes the bound of every later lock wait of s: for the
// lock tests, which wait briefly for a lock another process holds and
// then long for it once that process is gone. Commands bound one call's
// wait through its context instead.
func (s *Store) SetLockTimeout(d time.Duration) { s.lockWait.Store(int64(d)) }
