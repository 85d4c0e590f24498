//go:build mpi

package mpi

import (
	"testing"

	empi "github.com/emer/empi/mpi"
)

func TestActiveCompiled(t *testing.T) {
	if !Compiled {
		t.Error("Compiled is false in a build with -tags mpi")
	}
}

// TestActiveWithoutLauncher: outside mpirun the MPI build is one rank and
// leaves MPI alone.
func TestActiveWithoutLauncher(t *testing.T) {
	w := initSingle(t)
	if w.Size() != 1 || w.Rank() != 0 {
		t.Errorf("rank %d of %d; want 0 of 1", w.Rank(), w.Size())
	}
	if empi.IsOn() {
		t.Error("Init called MPI_Init without a launcher")
	}
}
