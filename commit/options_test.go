package commit_test

import (
	"testing"
	"time"

	"github.com/leasetool/lease/commit"
	"github.com/leasetool/lease/leasefmt"
)

// TestOptionsZeroIsDefault: a zero field of Options is the default, and a
// negative LockTimeout is the lock timeout of 0 s (one try), which lease
// --lock-timeout 0 and leases.WithLockTimeout(0) ask for.
func TestOptionsZeroIsDefault(t *testing.T) {
	t.Parallel()
	root := t.TempDir()
	st, err := commit.Open(root, commit.Options{Create: &leasefmt.Table{WorkShards: 1, TargetShards: 1, CreatedAt: 1000}})
	if err != nil {
		t.Fatal(err)
	}
	defer st.Close()
	if got := st.LockTimeout(); got != commit.DefaultLockTimeout {
		t.Errorf("LockTimeout of Options{} = %v, want %v", got, commit.DefaultLockTimeout)
	}
	for _, tc := range []struct{ in, want time.Duration }{{-1, 0}, {-time.Hour, 0}, {time.Second, time.Second}} {
		st, err := commit.Open(root, commit.Options{LockTimeout: tc.in})
		if err != nil {
			t.Fatal(err)
		}
		if got := st.LockTimeout(); got != tc.want {
			t.Errorf("LockTimeout of Options{LockTimeout: %v} = %v, want %v", tc.in, got, tc.want)
		}
		st.Close()
	}
}
