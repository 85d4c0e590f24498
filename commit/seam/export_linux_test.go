package seam

// SetNoFchmodat2 makes FixPerm set modes as on kernels before 6.6
// (chmod of /proc/self/fd/N), for the tests of both ways.
func SetNoFchmodat2(v bool) { noFchmodat2 = v }
