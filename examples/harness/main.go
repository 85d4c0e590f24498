// Command harness is a program in a module of its own that uses the lease
// Go API (github.com/leasetool/lease/leases) the way a fuzzing harness
// would: it queues its inputs by content, takes them one at a time,
// publishes a result fenced by the token and completes each item. Its
// go.mod reaches this repository with a replace directive (README, "From
// Go"); examples/harness_test.go builds and runs it.
//
//	harness TABLE INPUT...
package main

import (
	"context"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"time"

	"github.com/leasetool/lease/leases"
)

func main() {
	if len(os.Args) < 3 {
		fmt.Fprintln(os.Stderr, "usage: harness TABLE INPUT...")
		os.Exit(2)
	}
	if err := run(os.Args[1], os.Args[2:]); err != nil {
		fmt.Fprintln(os.Stderr, "harness:", err)
		os.Exit(1)
	}
}

func run(root string, inputs []string) error {
	ctx := context.Background()
	t, err := leases.Create(root, leases.WithOwner("harness"), leases.WithTTL(time.Minute))
	if err != nil {
		return err
	}
	defer t.Close()
	contents := make([][]byte, len(inputs))
	for i, in := range inputs {
		contents[i] = []byte(in)
	}
	if _, err := t.AddContent(ctx, contents...); err != nil {
		return err
	}
	for {
		l, err := t.ClaimNext(ctx, 0)
		if errors.Is(err, leases.ErrEmpty) {
			return nil
		}
		if err != nil {
			return err
		}
		stage, err := t.Stage(l)
		if err != nil {
			return err
		}
		name := l.ID[:12] + ".out"
		if err := os.WriteFile(filepath.Join(stage, name), []byte("ran "+l.ID+"\n"), 0o644); err != nil {
			return err
		}
		if r, err := t.Publish(ctx, l, name); err != nil || r.Err() != nil {
			return errors.Join(err, r.Err())
		}
		fmt.Printf("%s token %d published %s\n", l.ID, l.Token, name)
	}
}
