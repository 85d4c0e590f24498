package commit

import (
	"path"

	"github.com/leasetool/lease/commit/seam"
	"github.com/leasetool/lease/layout"
	"github.com/leasetool/lease/leasefmt"
)

// ReadLocked names the shard lock files of the table held by a read lock
// (seam.ReadLockFinder). lease's writers take write locks only, so each
// was taken by a process that could not have held a lease, and it stops
// every writer of its shard (lease status warns of them). Lock files this
// process cannot open are passed over.
func (s *Store) ReadLocked() []string {
	finder, ok := seam.As[seam.ReadLockFinder](s.fs)
	if !ok {
		return nil
	}
	var out []string
	for _, k := range []leasefmt.Kind{leasefmt.Work, leasefmt.Target, leasefmt.Group} {
		for sh := 0; sh < s.hdr.Shards(k); sh++ {
			name := path.Join(s.ShardDir(k, sh), layout.LockFile)
			if locked, _, err := finder.ReadLocked(name); err == nil && locked {
				out = append(out, s.Abs(name))
			}
		}
	}
	return out
}
