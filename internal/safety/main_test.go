package safety

import (
	"flag"
	"os"
	"testing"
)

// The enumerating tests (crash states, injected faults, transient faults,
// Pebble's crash states, the linearizability workload) run at one of three
// sizes:
//
//   - a sample, with LEASE_SAFETY_SIZE=sample (make test) or go test
//     -short: every third scenario's crash points with a few states each
//     (crash states, Pebble's), and about 8 injected faults (6 transient
//     ones) of every scenario spread over its calls; the crash states,
//     the kill points of TestCrashStatesGoOn and TestConcurrentRepairs
//     take about 100 call prefixes of a scenario of more calls
//     (sampleBudget);
//   - the default run (go test ./internal/safety, make test-long, which CI
//     runs beside make test): the numbers docs/safety.md reports;
//   - the long run, with LEASE_SAFETY_SIZE=long, LEASE_SAFETY_LONG=1 or
//     -long.
var long = flag.Bool("long", false, "run the long versions of the safety tests")

func isLong() bool {
	return *long || os.Getenv("LEASE_SAFETY_LONG") == "1" || os.Getenv("LEASE_SAFETY_SIZE") == "long"
}

func isSample() bool { return testing.Short() || os.Getenv("LEASE_SAFETY_SIZE") == "sample" }

// sized returns sample, normal or big by the size the tests run at.
func sized[T any](sample, normal, big T) T {
	switch {
	case isLong():
		return big
	case isSample():
		return sample
	}
	return normal
}

func TestMain(m *testing.M) {
	flag.Parse()
	code := m.Run()
	cleanupBinary()
	os.Exit(code)
}
