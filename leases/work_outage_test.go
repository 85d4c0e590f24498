package leases_test

// Table.Work waits out a table that cannot be written (issue 36): every
// create, rename, write and sync failing with EROFS, as a read-only
// filesystem does, from inside an item's run. Before, Work ended with an
// error wrapping ErrIO at the item's finish.

import (
	"context"
	"errors"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/leasetool/lease/faultfs"
	"github.com/leasetool/lease/faultfs/faultfstest"
	"github.com/leasetool/lease/leases"
)

func readOnly(t *testing.T, m *faultfstest.Mounted, on bool) {
	t.Helper()
	var rules []faultfs.Rule
	if on {
		rules = faultfstest.ReadOnly()
	}
	if err := m.SetRules(rules); err != nil {
		t.Fatal(err)
	}
}

func TestWorkWaitsOutReadOnly(t *testing.T) {
	for _, bounded := range []bool{false, true} {
		name := "unbounded"
		if bounded {
			name = "max-wait"
		}
		t.Run(name, func(t *testing.T) {
			m := faultfstest.Mount(t, faultfs.Options{})
			root := filepath.Join(m.Dir, "table")
			tb, err := leases.Create(root, leases.WithShards(4, 4), leases.WithClockSkew(100*time.Millisecond), leases.WithOwner("test/outage"))
			if err != nil {
				t.Fatal(err)
			}
			defer tb.Close()
			ctx := context.Background()
			if _, err := tb.AddContent(ctx, []byte("a"), []byte("b"), []byte("c")); err != nil {
				t.Fatal(err)
			}
			var mu sync.Mutex
			var said []string
			opts := leases.WorkOptions{TTL: 30 * time.Second, Waiting: func(msg string) {
				mu.Lock()
				said = append(said, msg)
				mu.Unlock()
				if !bounded && strings.Contains(msg, "cannot be written") {
					readOnly(t, m, false) // the table takes writes again
				}
			}}
			if bounded {
				opts.MaxWait = 1500 * time.Millisecond
			}
			first := true
			stats, err := tb.Work(ctx, func(ctx context.Context, it leases.Item) error {
				if first {
					first = false
					readOnly(t, m, true) // the finish of this item meets it
				}
				return nil
			}, opts)
			mu.Lock()
			defer mu.Unlock()
			if bounded {
				if !errors.Is(err, leases.ErrIO) || len(said) == 0 || !strings.Contains(said[len(said)-1], "giving up") {
					t.Fatalf("Work past MaxWait: %v, %+v, said %q; want an error wrapping ErrIO", err, stats, said)
				}
				readOnly(t, m, false)
				return
			}
			if err != nil || stats.Finishes["done"] != 3 {
				t.Fatalf("Work through a read-only episode: %v, %+v, said %q; want every item done", err, stats, said)
			}
			if len(said) != 2 || !strings.Contains(said[1], "writable again") {
				t.Errorf("Work's messages: %q, want the wait's start and end", said)
			}
			if m.Injected()[faultfs.OpCreate]+m.Injected()[faultfs.OpRename] == 0 {
				t.Error("faultfs failed no create or rename: the test proved nothing")
			}
		})
	}
}
