//go:build linux

package powercut

import (
	"fmt"
	"os"
	"strings"
)

// The workload the guest runs is one Go process, ./guest (GuestPackage):
// lease's command line run in-process against the table on the image, each
// acknowledged operation reported on the console (a write the cut cannot
// take back) only after the command returned success. Lines:
//
//	ACK init
//	ACK add ID                  the ID is queued (or has a record)
//	ACK hold ID TOKEN           a lease granted with TOKEN by claim --next,
//	                            held in the pool every renew-batch renews
//	ACK claim ID TOKEN          a lease granted with TOKEN by a claim of ID
//	RENEW-START T0 N            a renew-batch of the N leases of the pool
//	                            began at T0 (seconds, to the microsecond)
//	ACK renew T0                ... and returned: each such lease expires at
//	                            >= T0+RenewTTL
//	ACK done ID TOKEN           completed with TOKEN (it leaves the pool)
//	ACK publish ID TOKEN SHA256 BYTES   completed, public/ID/res holds those bytes
//	ACK work ID TOKEN           lease work ran and finished the item: done,
//	                            public/ID/out = ID
//	ACK group GID TOKEN         group-claim granted the group (manifest and
//	                            every target) TOKEN
//	ACK group-release GID TOKEN group-release released it
//	ACK fsck RC                 lease fsck --repair returned (not checked: a
//	                            record of what ran)
//	PCFAIL WHAT ...             a command failed (the harness reports it: a
//	                            workload that does not run proves nothing)

// ClaimTTL and RenewTTL are the leases' durations: long, so that nothing
// expires while a cut runs, and different, so that a record shows whether
// a renewal reached it.
const (
	ClaimTTL = 100000
	RenewTTL = 200000
	// Batch is the number of leases of the pool (claimed at the start and
	// topped up after completes) that every renew-batch renews, in every
	// one of the table's Shards work shards.
	Batch  = 300
	Shards = 16
)

// GuestPackage is the workload's program, relative to the module's root.
const GuestPackage = "./internal/powercut/guest"

// workload is the guest's script: the workload program, which mounts the
// image itself; its standard error goes to the console too (a panic is
// seen). sync is the table's sync strategy (LEASE_SYNC; "" for the
// default); pool, when not "", is the pool of a Template's table (its
// ID TOKEN lines), which the guest then holds instead of making a table.
func workload(guest, fstype, mountOpts, sync, pool string, seed int64) string {
	env := ""
	if sync != "" {
		env = "LEASE_SYNC=" + sync + " "
	}
	timing := ""
	if os.Getenv("POWERCUT_DEBUG") != "" {
		timing = " -timing"
	}
	in := ""
	if pool != "" {
		timing += " -pool -"
		in = " <<'EOF'\n" + pool + "EOF"
	}
	return fmt.Sprintf("cd / && %sexec %s -dev /dev/ubda -fstype %s -o '%s' -seed %d -batch %d -shards %d -claim-ttl %d -renew-ttl %d%s > /dev/console 2>&1%s\n",
		env, guest, fstype, strings.ReplaceAll(mountOpts, "'", ""), seed, Batch, Shards, ClaimTTL, RenewTTL, timing, in)
}
