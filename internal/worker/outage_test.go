package worker

import (
	"context"
	"fmt"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/leasetool/lease/commit"
)

// TestOutageOf: only a claim blocked by the machine's errors (ENOSPC,
// EROFS, EIO, ESTALE) is an outage; a corrupt record, another I/O error
// or a claim that got something is not.
func TestOutageOf(t *testing.T) {
	t.Parallel()
	io := func(err error) commit.Result { return commit.Result{Outcome: commit.IOError, Cause: err} }
	for _, c := range []struct {
		nx   commit.Next
		want bool
	}{
		{commit.Next{Answer: commit.Blocked, Results: []commit.Result{io(fmt.Errorf("create: %w", syscall.ENOSPC))}}, true},
		{commit.Next{Answer: commit.Blocked, Results: []commit.Result{io(syscall.EROFS), io(syscall.ESTALE)}}, true},
		{commit.Next{Answer: commit.Blocked, Results: []commit.Result{io(syscall.EIO)}}, true},
		{commit.Next{Answer: commit.Blocked, Results: []commit.Result{io(syscall.EACCES)}}, false},
		{commit.Next{Answer: commit.Blocked, Results: []commit.Result{io(syscall.ENOSPC), {Outcome: commit.Corrupt}}}, false},
		{commit.Next{Answer: commit.Granted, Results: []commit.Result{{Outcome: commit.OK}, io(syscall.ENOSPC)}}, false},
		{commit.Next{Answer: commit.Busy}, false},
	} {
		if got := OutageOf(c.nx) != nil; got != c.want {
			t.Errorf("OutageOf(%+v) = %v, want %v", c.nx, got, c.want)
		}
	}
}

// TestOutageWait: the first wait says so once, MaxWait ends the wait
// with a message, a done context ends it at once, and Over says the end.
func TestOutageWait(t *testing.T) {
	t.Parallel()
	var said []string
	o := &Outage{MaxWait: 50 * time.Millisecond, Say: func(m string) { said = append(said, m) }}
	tries := 0
	for o.Wait(context.Background(), syscall.ENOSPC) {
		tries++
		if tries > 10 {
			t.Fatal("MaxWait did not end the wait")
		}
	}
	if len(said) != 2 || !strings.Contains(said[0], "cannot be written") || !strings.Contains(said[1], "giving up") {
		t.Errorf("messages %q", said)
	}
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	o2 := &Outage{}
	if o2.Wait(ctx, syscall.EROFS) || !o2.Waiting() {
		t.Error("a done context did not end the wait")
	}
	said = nil
	o.began = time.Now()
	o.Over()
	if o.Waiting() || len(said) != 1 || !strings.Contains(said[0], "writable again") {
		t.Errorf("Over: %q", said)
	}
}
