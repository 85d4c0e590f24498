package leases_test

import (
	"context"
	"errors"
	"os"
	"path/filepath"
	"testing"

	"github.com/leasetool/lease/leases"
)

// TestAddFilesCountsDuplicatesOnce: a file given twice in one call (or two
// files of the same content) is added once: the later ones are
// ErrQueued, as in a later call. All were counted as added before.
func TestAddFilesCountsDuplicatesOnce(t *testing.T) {
	t.Parallel()
	tb, _ := workTable(t)
	dir := t.TempDir()
	a, b, a2 := filepath.Join(dir, "a"), filepath.Join(dir, "b"), filepath.Join(dir, "a-copy")
	for p, data := range map[string]string{a: "seed a", b: "seed b", a2: "seed a"} {
		if err := os.WriteFile(p, []byte(data), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	res, err := tb.AddFiles(context.Background(), a, b, a, a2)
	if err != nil {
		t.Fatal(err)
	}
	added := 0
	for i, r := range res {
		switch {
		case r.Err() == nil:
			added++
		case !errors.Is(r.Err(), leases.ErrQueued):
			t.Errorf("result %d: %v", i, r.Err())
		}
	}
	if added != 2 || res[0].Err() != nil || res[1].Err() != nil || res[2].ID != res[0].ID || res[3].ID != res[0].ID {
		t.Errorf("added %d of a, b, a, a's copy (want 2: a and b): %+v", added, res)
	}
	res, _ = tb.AddContent(context.Background(), []byte("seed b"), []byte("seed c"), []byte("seed c"))
	if !errors.Is(res[0].Err(), leases.ErrQueued) || res[1].Err() != nil || !errors.Is(res[2].Err(), leases.ErrQueued) {
		t.Errorf("AddContent of b again, c twice: %v, %v, %v; want queued, added, queued", res[0].Err(), res[1].Err(), res[2].Err())
	}
}
