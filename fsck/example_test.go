package fsck_test

import (
	"context"
	"fmt"
	"os"
	"path/filepath"

	"github.com/leasetool/lease/commit"
	"github.com/leasetool/lease/commit/durable"
	"github.com/leasetool/lease/commit/seam"
	"github.com/leasetool/lease/fsck"
	"github.com/leasetool/lease/leasefmt"
)

// Check a table after a crash, then repair it: a torn record is moved to
// lost+found/ and a released record keeps its token in its place.
func ExampleCheck() {
	dir, _ := os.MkdirTemp("", "fsck-example-")
	defer os.RemoveAll(dir)
	root := filepath.Join(dir, "table")
	durable.MkdirRoot(root)
	st, _ := commit.Open(root, commit.Options{Create: &leasefmt.Table{WorkShards: 4, TargetShards: 4, CreatedAt: 1000}})
	id, _ := leasefmt.ParseID("6f9b91f83f7365e8037273295071469d1cf7d0e34dfae07af6158dcc64a7c067")
	torn := `{"schema":"lease.work/v1","id":"` + string(id) + `","status":"leased","owner":"w","token":7,"claimed_at":1`
	os.WriteFile(st.Abs(st.RecordPath(leasefmt.Work, id)), []byte(torn), 0o644)
	st.Close()

	for _, repair := range []bool{false, true, false} {
		fsys, _ := seam.OS(root)
		sum, err := fsck.Check(context.Background(), root, fsys, fsck.Options{Repair: repair, Now: 2000}, func(f *fsck.Finding) {
			fmt.Printf("  %s %s repaired=%v\n", f.Kind, filepath.Base(f.Path), f.Repaired)
		})
		fsys.Close()
		fmt.Printf("repair=%v: exit %d, err %v\n", repair, sum.Exit(), err)
	}
	// Output:
	//   invalid 6f9b91f83f7365e8037273295071469d1cf7d0e34dfae07af6158dcc64a7c067.json repaired=false
	// repair=false: exit 4, err <nil>
	//   invalid 6f9b91f83f7365e8037273295071469d1cf7d0e34dfae07af6158dcc64a7c067.json repaired=true
	// repair=true: exit 1, err <nil>
	// repair=false: exit 0, err <nil>
}
