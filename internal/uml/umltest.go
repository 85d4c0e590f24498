package uml

import (
	"context"
	"os"
	"testing"

	"github.com/leasetool/lease/internal/testenv"
)

// Need skips t (or fails it under LEASE_TEST_REQUIRE=all or =uml) when no
// UML kernel can be booted here.
func Need(t testing.TB) {
	t.Helper()
	if err := Available(); err != nil {
		testenv.Missing(t, "uml", err.Error())
	}
	if os.Geteuid() != 0 {
		// hostfs root: the guest's root is the host's, and a guest's
		// root writes its spool as the host account running it; the
		// power-cut tests also loop-mount images.
		testenv.NeedRoot(t, "a User-Mode Linux kernel")
	}
}

// BootT boots a kernel for t and kills it (every process of it) when t
// ends, pass or fail.
func BootT(t testing.TB, cfg Config) *Kernel {
	t.Helper()
	Need(t)
	k, err := Boot(context.Background(), cfg)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		if err := k.Close(); err != nil {
			t.Error(err)
		}
	})
	return k
}
