//go:build linux

package powercut

import (
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"testing"

	"github.com/leasetool/lease/internal/uml"
)

// TestWorkloadProtocol runs the guest's workload program here, on a table
// in a temporary directory, for a fixed number of operations and no cut:
// the host's parser must read every kind of acknowledgement it writes, and
// the check must find everything acknowledged (and, when an acknowledged
// result is then taken away, report it lost). No kernel and no root: this
// is the protocol between the two halves, checked where it is cheap.
func TestWorkloadProtocol(t *testing.T) {
	t.Parallel()
	lease, err := uml.BuildLease()
	if err != nil {
		t.Fatal(err)
	}
	guest, err := uml.BuildGuest(GuestPackage)
	if err != nil {
		t.Fatal(err)
	}
	dir := t.TempDir()
	root := filepath.Join(dir, "t")
	console := filepath.Join(dir, "console")
	// 40 leases in the pool: the protocol, not the size, is tested here.
	cmd := exec.Command(guest, "-root", root, "-console", console, "-seed", "7", "-batch", "40",
		"-shards", strconv.Itoa(Shards), "-claim-ttl", strconv.Itoa(ClaimTTL), "-renew-ttl", strconv.Itoa(RenewTTL), "-ops", "150")
	cmd.Dir = dir
	if out, err := cmd.CombinedOutput(); err != nil {
		b, _ := os.ReadFile(console)
		t.Fatalf("the workload: %v: %s\nconsole: %s", err, out, tailLines(b, 5))
	}
	b, err := os.ReadFile(console)
	if err != nil {
		t.Fatal(err)
	}
	ex := parseAcks(b)
	t.Logf("%d acknowledged: %d renew-batches, %d claims, %d completes, %d publishes, %d lease work items, %d group claims, %d releases",
		ex.count, ex.renews, len(ex.claimed), len(ex.done), len(ex.publish), len(ex.work), len(ex.groups), len(ex.released))
	if !ex.inited || ex.renews == 0 || len(ex.done) == 0 || len(ex.publish) == 0 || len(ex.work) == 0 || len(ex.groups) == 0 || len(ex.released) == 0 || len(ex.added) == 0 {
		t.Fatalf("some kind of operation was never acknowledged (or never parsed): %+v", ex)
	}
	if ex.renewCut != 0 {
		t.Errorf("a renew-batch without its acknowledgement after a run that ended: RENEW-START %.6f", ex.renewCut)
	}
	var res Result
	check(&res, ex, root, lease)
	if len(res.Lost) > 0 || len(res.Violations) > 0 || res.Fsck != 0 || res.Repair != 0 || res.After != 0 {
		t.Fatalf("no cut, yet: lost %v, violations %v, fsck %d/%d/%d", res.Lost, res.Violations, res.Fsck, res.Repair, res.After)
	}
	// An operation may take effect with its acknowledgement lost (the cut,
	// or the workload's kill, between the two): the items done, with only
	// their claims acknowledged, are done records, not leases to take
	// over; the check took one over and reported "exit 1: ... is done".
	var unacked strings.Builder
	for _, line := range strings.Split(string(b), "\n") {
		f := strings.Fields(line)
		if len(f) >= 3 && f[0] == "ACK" && (f[1] == "init" || f[1] == "add" || ((f[1] == "claim" || f[1] == "hold") && ex.done[f[2]] != 0)) {
			unacked.WriteString(line + "\n")
		}
	}
	if un := parseAcks([]byte(unacked.String())); len(un.claimed) == 0 || len(un.done) != 0 {
		t.Fatalf("acknowledged claims of done items: %d, completes %d; want some and none", len(un.claimed), len(un.done))
	}
	res = Result{Seed: 1} // a new ID for the check's own add
	check(&res, parseAcks([]byte(unacked.String())), root, lease)
	if len(res.Lost) > 0 || len(res.Violations) > 0 {
		t.Fatalf("items done with their completes unacknowledged: lost %v, violations %v", res.Lost, res.Violations)
	}
	// The check can fail: an acknowledged publication taken away is lost.
	for id := range ex.publish {
		if err := os.Remove(filepath.Join(root, "public", id, "res")); err != nil {
			t.Fatal(err)
		}
		break
	}
	res = Result{}
	check(&res, parseAcks(b), root, lease)
	if len(res.Lost) != 1 {
		t.Fatalf("a published file removed: lost %v, want it alone", res.Lost)
	}
}
