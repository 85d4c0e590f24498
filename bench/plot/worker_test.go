package main

import (
	"os"
	"path/filepath"
	"testing"
)

// TestWorkerPlotsOneWorkerCount: bench/worker --workers 1 makes a plot
// whose x axis holds one value; it panicked (a log axis padded to 0) and
// the run's report was never written.
func TestWorkerPlotsOneWorkerCount(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	raw := filepath.Join(dir, "raw.jsonl")
	lines := `{"fs":"ext4","system":"floor","workers":1,"items_per_s":480.5}
{"fs":"ext4","system":"work","workers":1,"items_per_s":215.1}
{"fs":"ext4","system":"work","workers":1,"strace":true,"items_per_s":40}
`
	if err := os.WriteFile(raw, []byte(lines), 0o644); err != nil {
		t.Fatal(err)
	}
	names, err := workerPlots(raw, dir)
	if err != nil || len(names) != 1 || names[0] != "worker-floor-ext4.png" {
		t.Fatalf("workerPlots = %v, %v; want worker-floor-ext4.png", names, err)
	}
	if fi, err := os.Stat(filepath.Join(dir, names[0])); err != nil || fi.Size() == 0 {
		t.Errorf("the plot: %v, %v", fi, err)
	}
}
