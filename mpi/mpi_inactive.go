//go:build !mpi

package mpi

import "fmt"

// Compiled reports whether this binary was built with -tags mpi, and so can
// join an mpirun job as one of several ranks. Here it was not.
const Compiled = false

// join is called by Init under a launcher. Without MPI every process would
// believe it is rank 0 of 1, so several of them would each do the whole
// job: refuse unless the launcher started exactly one rank.
func join(w *World, size, rank int) error {
	if size > 1 || rank > 0 {
		return fmt.Errorf("mpi: started as rank %d of %d by an MPI launcher, but built without MPI support (rebuild with -tags mpi)", rank, size)
	}
	return nil
}
