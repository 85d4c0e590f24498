//go:build mpi

package mpi

// empi's cgo files link Open MPI with `#cgo pkg-config: ompi`; this file
// does the same for the one call empi does not offer: its Comm.Abort always
// passes error code 0, which mpirun turns into a successful exit.

/*
#cgo pkg-config: ompi
#include <mpi.h>

static int leaseAbort(int code) { return MPI_Abort(MPI_COMM_WORLD, code); }
static int leaseMajor(void) { return OMPI_MAJOR_VERSION; }
static int leaseMinor(void) { return OMPI_MINOR_VERSION; }
static int leaseRelease(void) { return OMPI_RELEASE_VERSION; }
*/
import "C"

import (
	"bufio"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"sync/atomic"
	"time"

	empi "github.com/emer/empi/mpi"
)

// Compiled reports whether this binary was built with -tags mpi, and so can
// join an mpirun job as one of several ranks. Here it was.
const Compiled = true

// abortGrace bounds MPI_Abort itself: should it hang (its runtime daemon
// gone), the rank exits on its own.
const abortGrace = 10 * time.Second

// initTimeoutFloor is the least time MPI_Init gets when Init has a timeout.
const initTimeoutFloor = 30 * time.Second

// join initializes MPI for a process started by a launcher that announced
// size ranks (0 when unknown) and this process as rank.
func join(w *World, size, rank int) error {
	if empi.IsOn() {
		return errors.New("mpi: MPI is already initialized (Init called twice?)")
	}
	t := &ompi{}
	// Until MPI answers, the launcher's numbers name this rank in the
	// watchdog's line.
	w.rank, w.size, w.t = rank, max(size, 1), t
	// MPI_Init wires up the whole job, which may take longer than any
	// collective after it, the more so on a loaded host.
	timeout := w.timeout
	if timeout > 0 {
		w.timeout = max(timeout, initTimeoutFloor)
	}
	err := w.collective("Init", 0, t.init)
	w.timeout = timeout
	if err != nil {
		return err
	}
	w.rank, w.size = t.comm.Rank(), t.comm.Size()
	if size > 0 && size != w.size {
		err := fmt.Errorf("mpi: the launcher announced %d ranks but MPI's world has %d (is the binary linked against another MPI than the launcher's?)", size, w.size)
		if ferr := w.Finalize(); ferr != nil {
			err = errors.Join(err, ferr)
		}
		return err
	}
	return nil
}

// ompi is the transport over Open MPI's world communicator, through empi.
type ompi struct {
	comm *empi.Comm
	live atomic.Bool // between MPI_Init and MPI_Finalize: MPI_Abort is allowed
}

func (t *ompi) init() error {
	empi.LogErrors = false // errors are returned, not logged
	// InitThreadSafe asks for MPI_THREAD_MULTIPLE so that the watchdog may
	// call MPI_Abort while another thread blocks in a collective. It
	// reports a lower level as an error after MPI is up; Open MPI aborts
	// from any thread in practice, and os.Exit backs the abort anyway, so
	// a lower level is not a reason to fail.
	_ = empi.InitThreadSafe()
	t.live.Store(true)
	comm, err := empi.NewComm(nil)
	if err != nil {
		return err
	}
	t.comm = comm
	return nil
}

func (t *ompi) bcast(root int, buf []byte) error {
	return t.comm.BcastU8(root, buf)
}

func (t *ompi) gather(root int, dst, src []byte) error {
	if len(dst) == 0 {
		// MPI ignores the receive buffer off root, but empi takes &dst[0].
		dst = make([]byte, 1)
	}
	return t.comm.GatherU8(root, dst, src)
}

func (t *ompi) allGather(dst, src []byte) error {
	return t.comm.AllGatherU8(dst, src)
}

func (t *ompi) allMax(v int64) (int64, error) {
	out := make([]int64, 1)
	err := t.comm.AllReduceI64(empi.OpMax, out, []int64{v})
	return out[0], err
}

func (t *ompi) barrier() error { return t.comm.Barrier() }

func (t *ompi) finalize() error {
	empi.Finalize()
	t.live.Store(false)
	return nil
}

func (t *ompi) abort(code int) {
	time.AfterFunc(abortGrace, func() { os.Exit(code) })
	if t.live.Load() {
		C.leaseAbort(C.int(code))
	}
	os.Exit(code)
}

// library names the MPI library this binary was compiled against.
func library() string {
	return fmt.Sprintf("Open MPI %d.%d.%d", C.leaseMajor(), C.leaseMinor(), C.leaseRelease())
}

// speaks reports whether Open MPI can join a job through pmi. It always
// speaks PMIx (its own mpirun's, and srun --mpi=pmix's). It speaks Slurm's
// PMI-2 and PMI-1 only in 4.x and older, and only when it was configured
// with Slurm's PMI libraries, which installs the components
// mca_pmix_s2.so and mca_pmix_s1.so; 5.x has no such support at all.
// Debian 12's Open MPI 4.1.4 has neither component (its pmix components
// are ext3x, flux and isolated): under srun --mpi=pmi2 its MPI_Init fails.
func speaks(pmi string) bool {
	switch pmi {
	case "pmix":
		return true
	case "pmi2", "pmi":
		if C.leaseMajor() >= 5 {
			return false
		}
		name := "mca_pmix_s2.so"
		if pmi == "pmi" {
			name = "mca_pmix_s1.so"
		}
		for _, dir := range componentDirs() {
			if _, err := os.Stat(filepath.Join(dir, name)); err == nil {
				return true
			}
		}
	}
	return false
}

// componentDirs are the directories where Open MPI's components may be:
// beside the libopen-pal this process mapped, in openmpi/ (upstream's
// pkglibdir), openmpi*/ or openmpi/lib/openmpi*/ (Debian's).
func componentDirs() []string {
	f, err := os.Open("/proc/self/maps")
	if err != nil {
		return nil
	}
	defer f.Close()
	var dirs []string
	seen := map[string]bool{}
	sc := bufio.NewScanner(f)
	for sc.Scan() {
		fields := strings.Fields(sc.Text())
		if len(fields) < 6 || !strings.Contains(filepath.Base(fields[5]), "libopen-pal.so") {
			continue
		}
		lib := filepath.Dir(fields[5])
		if seen[lib] {
			continue
		}
		seen[lib] = true
		for _, pat := range []string{"openmpi*", "openmpi/lib/openmpi*"} {
			m, _ := filepath.Glob(filepath.Join(lib, pat))
			dirs = append(dirs, m...)
		}
	}
	return dirs
}
