package multiclient

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"

	"github.com/leasetool/lease/internal/testenv"
)

type proof struct {
	Members []struct {
		Rank int
		Host string
	} `json:"members"`
	Verified   bool `json:"verified"`
	Rounds     int  `json:"rounds"`
	Contention int  `json:"contention"`
	Release    int  `json:"release"`
	Identity   int  `json:"identity"`
	Checks     []struct {
		Name   string `json:"name"`
		Rank   int    `json:"rank"`
		Pass   bool   `json:"pass"`
		Detail string `json:"detail"`
	} `json:"checks"`
	Error string `json:"error"`
}

func decodeProof(t *testing.T, out string) proof {
	t.Helper()
	var p proof
	if err := json.Unmarshal([]byte(strings.TrimSpace(out)), &p); err != nil {
		t.Fatalf("proof %q: %v", clip(out), err)
	}
	return p
}

// check returns the check name of rank, and whether there is one.
func (p proof) check(name string, rank int) (pass bool, detail string, ok bool) {
	for _, c := range p.Checks {
		if c.Name == name && c.Rank == rank {
			return c.Pass, c.Detail, true
		}
	}
	return false, "", false
}

// safeOptions are the volume options lease qualify must name on a volume
// with GlusterFS's defaults.
var safeOptions = []string{"performance.open-behind", "performance.quick-read", "performance.stat-prefetch"}

// TestQualifyOnEachMount: lease qualify on one node, through each mount of
// each filesystem. On GlusterFS with the default options it fails (exit 1)
// and its client-caches check names the options to turn off; with the
// safe ones it is verified. On CephFS (ceph-fuse with its defaults) it is
// verified and its client-caches check says which client it asked.
func TestQualifyOnEachMount(t *testing.T) {
	each(t, []mounts{glusterDefault(), glusterSafe(), cephfs()}, func(t *testing.T, vol mounts) {
		for _, mnt := range []string{vol.A, vol.B} {
			r := lease(t, "", "qualify", "--json", "--root", filepath.Join(mnt, "qualify-one"))
			p := decodeProof(t, r.out)
			pass, detail, ok := p.check("client-caches", 0)
			switch {
			case !ok:
				t.Errorf("%s: no client-caches check: %s", mnt, r)
			case vol.Safe && (r.code != 0 || !p.Verified || !pass):
				t.Errorf("%s (safe options): %s", mnt, r)
			case vol.Volume == "" && !strings.Contains(detail, "CephFS"):
				t.Errorf("%s: client-caches detail %q does not name CephFS", mnt, detail)
			case !vol.Safe && (r.code != 1 || p.Verified || pass):
				t.Errorf("%s (default options): exit %d, verified %v, client-caches pass %v; want a failure: %s", mnt, r.code, p.Verified, pass, r)
			case !vol.Safe:
				for _, o := range safeOptions {
					if !strings.Contains(detail, "gluster volume set "+vol.Volume+" "+o+" off") {
						t.Errorf("%s: client-caches detail %q does not name %s", mnt, detail, o)
					}
				}
				if !strings.Contains(p.Error, "client-caches") {
					t.Errorf("%s: the proof's error %q does not name client-caches", mnt, p.Error)
				}
			}
		}
	})
}

// TestMPIQualifyAcrossMounts: mpirun lease qualify with 4 ranks, two
// through each mount of the volume (one app context per mount). With the
// safe options the proof (rank 0 prints it) is verified: contention and
// identity rounds*(size-1), release rounds. With the defaults every rank
// exits 1 with a proof that is not verified and whose client-caches checks
// fail on every rank. The identity count there is logged: it is what only
// ranks on different mounts can see.
func TestMPIQualifyAcrossMounts(t *testing.T) {
	if leaseMPI == "" {
		testenv.Missing(t, "mpi", mpiMissing)
	}
	const rounds, np = 8, 4
	each(t, []mounts{glusterDefault(), glusterSafe(), cephfs()}, func(t *testing.T, vol mounts) {
		job := mpiQualify(t, vol, rounds)
		p := decodeProof(t, job.out[0])
		for r := 1; r < np; r++ {
			if job.out[r] != "" {
				t.Errorf("rank %d printed, want rank 0 alone to print the proof:\n%s", r, clip(job.out[r]))
			}
		}
		if len(p.Members) != np {
			t.Fatalf("%d members, want %d: %s", len(p.Members), np, clip(job.out[0]))
		}
		want := rounds * (np - 1)
		if vol.Safe {
			if job.code != 0 || !p.Verified || p.Contention != want || p.Identity != want || p.Release != rounds {
				t.Errorf("safe options: exit %d, verified %v, contention %d identity %d release %d (want %d %d %d): %s",
					job.code, p.Verified, p.Contention, p.Identity, p.Release, want, want, rounds, clip(job.out[0]))
			}
			return
		}
		if job.code != 1 || p.Verified {
			t.Errorf("default options: exit %d, verified %v; want exit 1, not verified: %s", job.code, p.Verified, clip(job.out[0]))
		}
		for r := 0; r < np; r++ {
			if pass, _, ok := p.check("client-caches", r); !ok || pass {
				t.Errorf("rank %d: client-caches pass=%v present=%v, want a failed check", r, pass, ok)
			}
		}
		t.Logf("default options, ranks on both mounts: contention %d/%d, identity %d/%d, release %d/%d", p.Contention, want, p.Identity, want, p.Release, rounds)
	})
}

type mpiJob struct {
	code int
	out  []string // stdout of each rank
}

// mpiQualify runs mpirun with two ranks on each mount of vol, each rank's
// stdout in its own file, and checks that every rank exits alike.
func mpiQualify(t *testing.T, vol mounts, rounds int) mpiJob {
	t.Helper()
	dir := t.TempDir()
	wrapper := filepath.Join(dir, "rank.sh")
	// The wrapper is the program mpirun starts, so lease, which it runs,
	// is a rank only by LEASE_MPI=on (docs/design.md#mpi: a script's lease calls are
	// plain processes unless told otherwise).
	script := "#!/bin/sh\nr=$OMPI_COMM_WORLD_RANK\nLEASE_MPI=on \"$@\" >\"" + dir + "/out.$r\" 2>\"" + dir + "/err.$r\"\nrc=$?\necho $rc >\"" + dir + "/rc.$r\"\nexit $rc\n"
	if err := os.WriteFile(wrapper, []byte(script), 0o755); err != nil {
		t.Fatal(err)
	}
	name := fmt.Sprintf("qualify-mpi-%d", tableSeq.Add(1))
	args := []string{"--allow-run-as-root", "--oversubscribe", "--stdin", "none"}
	for i, mnt := range []string{vol.A, vol.B} {
		if i > 0 {
			args = append(args, ":")
		}
		args = append(args, "-np", "2", wrapper, leaseMPI, "qualify", "--json", "--root", filepath.Join(mnt, name), "--rounds", fmt.Sprint(rounds))
	}
	ctx, cancel := context.WithTimeout(context.Background(), bound)
	defer cancel()
	cmd := exec.CommandContext(ctx, "mpirun", args...)
	cmd.Env = append(os.Environ(), "OMPI_ALLOW_RUN_AS_ROOT=1", "OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1", "OMPI_MCA_orte_abort_on_non_zero_status=0")
	var stderr bytes.Buffer
	cmd.Stderr = &stderr
	cmd.Run()
	if ctx.Err() != nil {
		t.Fatalf("mpirun qualify: still running after %v (a hang): %s", bound, stderr.String())
	}
	job := mpiJob{code: -1}
	for r := 0; r < 4; r++ {
		out, _ := os.ReadFile(filepath.Join(dir, fmt.Sprintf("out.%d", r)))
		rc, err := os.ReadFile(filepath.Join(dir, fmt.Sprintf("rc.%d", r)))
		if err != nil {
			errs, _ := os.ReadFile(filepath.Join(dir, fmt.Sprintf("err.%d", r)))
			t.Fatalf("rank %d left no exit status: mpirun stderr %s; rank stderr %s", r, stderr.String(), errs)
		}
		var code int
		fmt.Sscan(string(rc), &code)
		if r == 0 {
			job.code = code
		} else if code != job.code {
			t.Errorf("rank %d exit %d, rank 0 exit %d", r, code, job.code)
		}
		job.out = append(job.out, string(out))
	}
	return job
}
