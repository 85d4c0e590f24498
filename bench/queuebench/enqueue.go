package main

import (
	"fmt"
	"os"
	"path/filepath"
	"regexp"
	"sort"
	"strconv"

	"github.com/leasetool/lease/bench/internal/spread"
	"golang.org/x/sys/unix"
)

// enqueueResult is what `queuebench enqueue` measured.
type enqueueResult struct {
	Items  int `json:"items"`
	Shards int `json:"shards"`
	// Per repetition, interleaved: lease add into a fresh table, and the
	// floor (the same empty files from one process, no fsync, one syncfs).
	AddMS   []float64 `json:"add_ms"`
	FloorMS []float64 `json:"floor_ms"`
	// AddRSSKiB is the peak RSS of each lease add.
	AddRSSKiB []int64 `json:"add_rss_kib"`
	// DirSyncsFirst: directory fsyncs of an add into an empty queue (the
	// shard directories are made too); DirSyncsNext: of a second add of
	// Next new IDs into the same queue (K when every shard is touched).
	DirSyncsFirst int     `json:"dir_syncs_first"`
	DirSyncsNext  int     `json:"dir_syncs_next"`
	Next          int     `json:"next_items"`
	Ratio         float64 `json:"ratio_median"` // median add / median floor
}

var dirSyncsRe = regexp.MustCompile(`directory_syncs=(\d+)`)

func enqueue(o opts) (enqueueResult, error) {
	r := enqueueResult{Items: o.items, Shards: o.shards, Next: 10000}
	ids := filepath.Join(o.dir, "ids")
	if err := writeIDs(ids, 0, o.items); err != nil {
		return r, err
	}
	next := filepath.Join(o.dir, "ids-next")
	if err := writeIDs(next, o.items, o.items+r.Next); err != nil {
		return r, err
	}
	for rep := 0; rep < o.reps; rep++ {
		root := filepath.Join(o.dir, fmt.Sprintf("table-%d", rep))
		floor := filepath.Join(o.dir, fmt.Sprintf("floor-%d", rep))
		measureAdd := func() error {
			if p, err := run("", o.lease, "init", "--root", root, "--shards", strconv.Itoa(o.shards)); err != nil || p.code != 0 {
				return fmt.Errorf("lease init: %v %s", err, p.errOut)
			}
			p, err := run(ids, o.lease, "add", "-v", "--root", root)
			if err != nil || p.code != 0 {
				return fmt.Errorf("lease add: exit %d %v %s", p.code, err, p.errOut)
			}
			r.AddMS = append(r.AddMS, p.wall.Seconds()*1e3)
			r.AddRSSKiB = append(r.AddRSSKiB, p.maxRSS)
			if m := dirSyncsRe.FindSubmatch(p.errOut); m != nil && rep == 0 {
				r.DirSyncsFirst, _ = strconv.Atoi(string(m[1]))
				p, err := run(next, o.lease, "add", "-v", "--root", root)
				if err != nil || p.code != 0 {
					return fmt.Errorf("second lease add: exit %d %v %s", p.code, err, p.errOut)
				}
				if m := dirSyncsRe.FindSubmatch(p.errOut); m != nil {
					r.DirSyncsNext, _ = strconv.Atoi(string(m[1]))
				}
			}
			return nil
		}
		measureFloor := func() error {
			d, err := spread.FloorCreate(floor, o.items, o.shards)
			r.FloorMS = append(r.FloorMS, d.Seconds()*1e3)
			return err
		}
		steps := []func() error{measureAdd, measureFloor}
		if rep%2 == 1 {
			steps[0], steps[1] = steps[1], steps[0]
		}
		for _, s := range steps {
			if err := s(); err != nil {
				return r, err
			}
		}
		os.RemoveAll(root)
		os.RemoveAll(floor)
		unix.Sync()
	}
	r.Ratio = median(r.AddMS) / median(r.FloorMS)
	return r, nil
}

func median(xs []float64) float64 {
	if len(xs) == 0 {
		return 0
	}
	s := append([]float64(nil), xs...)
	sort.Float64s(s)
	return s[len(s)/2]
}
