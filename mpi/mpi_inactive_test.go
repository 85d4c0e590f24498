//go:build !mpi

package mpi

import (
	"strings"
	"testing"
)

func TestInactiveCompiled(t *testing.T) {
	if Compiled {
		t.Error("Compiled is true in a build without -tags mpi")
	}
}

// TestInactiveRefusesRanks: without MPI, several copies started by mpirun
// would each be rank 0 of 1; Init must refuse them, and accept one rank.
func TestInactiveRefusesRanks(t *testing.T) {
	noLauncher(t)
	t.Setenv("OMPI_COMM_WORLD_SIZE", "4")
	t.Setenv("OMPI_COMM_WORLD_RANK", "1")
	if _, err := Init(0); err == nil || !strings.Contains(err.Error(), "built without MPI support") {
		t.Errorf("Init as rank 1 of 4: %v", err)
	}
	t.Setenv("OMPI_COMM_WORLD_SIZE", "1")
	t.Setenv("OMPI_COMM_WORLD_RANK", "0")
	w, err := Init(0)
	if err != nil || w.Size() != 1 || w.Rank() != 0 {
		t.Errorf("Init as rank 0 of 1: %v", err)
	}
}
