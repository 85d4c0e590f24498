package leases_test

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"time"

	"github.com/leasetool/lease/leases"
)

// id is the ID of an input: its SHA-256 in lowercase hex.
func id(input string) string {
	sum := sha256.Sum256([]byte(input))
	return hex.EncodeToString(sum[:])
}

// A worker's life: claim an item, keep it, stage its result, publish it
// fenced by the token, and meet the fencing of a second claimer.
func Example() {
	dir, _ := os.MkdirTemp("", "lease-example-")
	defer os.RemoveAll(dir)
	ctx := context.Background()

	t, err := leases.Create(filepath.Join(dir, "table"), leases.WithOwner("host-a/fuzz-1"), leases.WithShards(4, 4))
	if err != nil {
		fmt.Println(err)
		return
	}
	defer t.Close()

	item := id("seed-0001")
	res, _ := t.Claim(ctx, 2*time.Minute, item)
	if err := res[0].Err(); err != nil {
		fmt.Println("not granted:", err)
		return
	}
	held := res[0].Lease
	fmt.Println("claimed with token", held.Token)

	// Another worker cannot take it while it is held.
	other, _ := leases.Open(t.Root(), leases.WithOwner("host-b/fuzz-7"))
	defer other.Close()
	res, _ = other.Claim(ctx, 0, item)
	fmt.Println("second claim held:", errors.Is(res[0].Err(), leases.ErrHeld))

	// Keep it alive (its own duration), stage the result, publish it.
	res, _ = t.Renew(ctx, 0, held)
	held = res[0].Lease
	stage, _ := t.Stage(held)
	os.WriteFile(filepath.Join(stage, "crash-1.bin"), []byte("found it\n"), 0o644)
	pub, _ := t.Publish(ctx, held, "crash-1.bin")
	fmt.Println("published:", pub.Err() == nil)

	data, _ := os.ReadFile(filepath.Join(t.Root(), "public", "crash-1.bin"))
	fmt.Printf("public/crash-1.bin: %s", data)

	// The item is done: no one can claim it again.
	res, _ = other.Claim(ctx, 0, item)
	fmt.Println("claim after done:", errors.Is(res[0].Err(), leases.ErrDone))
	// Output:
	// claimed with token 1
	// second claim held: true
	// published: true
	// public/crash-1.bin: found it
	// claim after done: true
}

// Keep one lease alive while its work runs; stop renewing when the work
// is over, and stop the work when the lease is lost.
func ExampleTable_KeepAlive() {
	dir, _ := os.MkdirTemp("", "lease-example-")
	defer os.RemoveAll(dir)
	t, _ := leases.Create(filepath.Join(dir, "table"), leases.WithClockSkew(0))
	defer t.Close()
	ctx, stop := context.WithCancel(context.Background())

	res, _ := t.Claim(ctx, 2*time.Second, id("seed-0002"))
	held := res[0].Lease
	kept := make(chan error, 1)
	go func() { kept <- t.KeepAlive(ctx, held, 500*time.Millisecond) }()

	work := time.After(3 * time.Second) // longer than the lease's 2 s
	select {
	case <-work:
		fmt.Println("work done")
	case err := <-kept:
		fmt.Println("lease lost, stop the work:", err)
	}
	stop()
	fmt.Println("keep-alive ended:", <-kept)

	res, _ = t.Complete(context.Background(), held)
	fmt.Println("completed:", res[0].Err() == nil)
	// Output:
	// work done
	// keep-alive ended: <nil>
	// completed: true
}

// A holder whose token is stale is fenced out: its renewal, completion and
// publication are refused.
func ExampleTable_Verify() {
	dir, _ := os.MkdirTemp("", "lease-example-")
	defer os.RemoveAll(dir)
	ctx := context.Background()
	now := time.Unix(1764450000, 0)
	clock := func() time.Time { return now }
	t, _ := leases.Create(filepath.Join(dir, "table"), leases.WithClock(clock))
	defer t.Close()

	res, _ := t.Claim(ctx, time.Minute, id("seed-0003"))
	old := res[0].Lease
	now = now.Add(2 * time.Minute) // the holder paused past its lease
	res, _ = t.Claim(ctx, time.Minute, id("seed-0003"))
	fmt.Println("reclaimed with token", res[0].Token)

	res, _ = t.Verify(ctx, old)
	fmt.Println("old token current:", res[0].Err() == nil, "stale:", errors.Is(res[0].Err(), leases.ErrStale))
	res, _ = t.Complete(ctx, old)
	fmt.Println("old token completes:", res[0].Err() == nil)
	// Output:
	// reclaimed with token 2
	// old token current: false stale: true
	// old token completes: false
}
