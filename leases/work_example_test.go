package leases_test

import (
	"context"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"sort"
	"strings"

	"github.com/leasetool/lease/leases"
)

// A campaign in Go: the seeds go into the queue with their content; a
// worker runs the harness on each, publishing what it finds as the item's
// result; a poison seed that always makes the harness fail is tried
// max_attempts times, then failed. Work ends when the queue is empty.
func ExampleTable_Work() {
	dir, _ := os.MkdirTemp("", "lease-example-")
	defer os.RemoveAll(dir)
	ctx := context.Background()
	t, _ := leases.Create(filepath.Join(dir, "table"), leases.WithOwner("host-a/worker-1"))
	defer t.Close()

	seeds := [][]byte{[]byte("GIF89a small"), []byte("PNG tiny"), []byte("POISON")}
	t.AddContent(ctx, seeds...)

	harness := func(ctx context.Context, it leases.Item) error {
		input, err := os.ReadFile(it.Input)
		if err != nil {
			return err
		}
		if strings.HasPrefix(string(input), "POISON") {
			return errors.New("harness: input rejected")
		}
		// Findings go into the item's staging directory: published whole
		// as public/ID/ when the harness returns nil.
		os.Mkdir(filepath.Join(it.Stage, "crashes"), 0o755)
		return os.WriteFile(filepath.Join(it.Stage, "crashes", "id:000000,sig:11"), input, 0o644)
	}
	var runs []string
	stats, err := t.Work(ctx, harness, leases.WorkOptions{MaxAttempts: 2, Done: func(r leases.ItemResult) {
		runs = append(runs, fmt.Sprintf("%.8s %s (attempts %d)", r.ID, r.Finish, r.Attempts))
	}})
	sort.Strings(runs)
	fmt.Println(strings.Join(runs, "\n"))
	fmt.Println("items:", stats.Items, "done:", stats.Finishes["done"], "failed:", stats.Finishes["failed"], "err:", err)

	crash, _ := os.ReadFile(filepath.Join(t.Root(), "public", leases.IDOf(seeds[0]), "crashes", "id:000000,sig:11"))
	fmt.Printf("public/%.8s/crashes/id:000000,sig:11: %s\n", leases.IDOf(seeds[0]), crash)
	_, err = t.ClaimNext(ctx, 0)
	fmt.Println("queue empty:", errors.Is(err, leases.ErrEmpty))
	// Output:
	// 4e25318d done (attempts 0)
	// 500177cd failed (attempts 2)
	// 500177cd released (attempts 1)
	// 700deef0 done (attempts 0)
	// items: 4 done: 2 failed: 1 err: <nil>
	// public/4e25318d/crashes/id:000000,sig:11: GIF89a small
	// queue empty: true
}

// IDs as the command line makes them: the SHA-256 of an item's content.
func ExampleIDOf() {
	fmt.Println(leases.IDOf([]byte("seed-0001\n")))
	_, err := leases.ParseID("not-an-id")
	fmt.Println(err != nil)
	// Output:
	// 25efe36ff28fe18239b36d1883b4cf3ede51fbe9255beb3b041af1652aedef5f
	// true
}

// Claim from the queue without a candidate list: ErrBusy while every item
// left is held, ErrEmpty once every item is done.
func ExampleTable_ClaimNext() {
	dir, _ := os.MkdirTemp("", "lease-example-")
	defer os.RemoveAll(dir)
	ctx := context.Background()
	t, _ := leases.Create(filepath.Join(dir, "table"))
	defer t.Close()
	t.Add(ctx, leases.IDOf([]byte("seed-0004")))

	l, err := t.ClaimNext(ctx, 0)
	fmt.Println("claimed:", err == nil, "token", l.Token)
	_, err = t.ClaimNext(ctx, 0)
	fmt.Println("busy:", errors.Is(err, leases.ErrBusy))
	t.Complete(ctx, l)
	_, err = t.ClaimNext(ctx, 0)
	fmt.Println("empty:", errors.Is(err, leases.ErrEmpty))
	// Output:
	// claimed: true token 1
	// busy: true
	// empty: true
}
