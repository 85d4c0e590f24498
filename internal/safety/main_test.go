package safety

import (
	"flag"
	"os"
	"testing"
)

// long selects the big runs: go test ./internal/safety -long, or LEASE_SAFETY_LONG=1.
var long = flag.Bool("long", false, "run the long versions of the safety tests")

func isLong() bool { return *long || os.Getenv("LEASE_SAFETY_LONG") == "1" }

func TestMain(m *testing.M) {
	flag.Parse()
	code := m.Run()
	cleanupBinary()
	os.Exit(code)
}
