package seam

// SetNoFchmodat2 makes FixPerm set modes as on kernels before 6.6
// (chmod of /proc/self/fd/N), for the tests of both ways.
func SetNoFchmodat2(v bool) { noFchmodat2 = v }

// Handles is how many directory handles o keeps open: cached, and dropped
// but not yet closed.
func (o *OSFS) Handles() int {
	o.mu.Lock()
	defer o.mu.Unlock()
	return len(o.dirs) + len(o.stale)
}
