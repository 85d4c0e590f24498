//go:build !mpi

package mpi

import "fmt"

// library names the MPI library this binary was compiled against: none.
func library() string { return "none" }

// speaks reports whether the MPI library joins jobs through pmi: there is
// none.
func speaks(pmi string) bool { return false }

// Compiled reports whether this binary was built with -tags mpi, and so can
// join an mpirun job as one of several ranks. Here it was not.
const Compiled = false

// join is called by Init for one of several tasks, which Launch.Check
// refuses in this build first: without MPI every copy would believe it is
// rank 0 of 1 and do the whole job.
func join(w *World, size, rank int) error {
	return fmt.Errorf("mpi: started as rank %d of %d by an MPI launcher, but built without MPI support (rebuild with -tags mpi)", rank, size)
}
