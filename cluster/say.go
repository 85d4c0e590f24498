package cluster

import (
	"io"

	"github.com/leasetool/lease/mpi"
)

// Say makes msg reach the job's log before any rank exits: rank 0 writes
// it to out (the other ranks write nothing, so the job says it once), and
// then every rank waits at a barrier until rank 0's write has returned.
// Without it the ranks that have nothing to say exit at once with the
// agreed non-zero status, the launcher kills the job as soon as the first
// of them does (mpirun's default), and rank 0, still on its way to print
// the reason, dies with it: `mpirun -np 4 lease renew-batch --root
// /nonexistent held` lost its "no lease table" in 4 of 10 runs. Call it on
// every rank with the error they agreed on ([Agree]); an error of the
// barrier itself is returned (the message was written all the same).
func Say(w *mpi.World, out io.Writer, msg string) error {
	if w.Rank() == 0 && msg != "" {
		io.WriteString(out, msg+"\n")
		if f, ok := out.(interface{ Flush() error }); ok {
			f.Flush() // a buffered writer; os.Stderr writes at once
		}
	}
	return w.Barrier()
}
