package main

// bench/worker's plots (issue 39): items/s against workers, one line per
// system, one file per filesystem.

import (
	"bufio"
	"encoding/json"
	"fmt"
	"image/color"
	"os"
	"path/filepath"
	"sort"
	"strconv"

	"gonum.org/v1/plot"
	"gonum.org/v1/plot/plotter"
	"gonum.org/v1/plot/vg"
)

// workerSystems are bench/worker's systems in legend order, with their colours.
var workerSystems = []struct {
	name, label string
	color       color.Color
}{
	{"floor", "floor (C, 3 syncs)", colors["nosync"]},
	{"work", "lease work", colors["concurrent"]},
	{"flock", "flock(1) file queue", colors["sequential"]},
	{"parallel", "GNU parallel --sqlworker", colors["one-at-a-time"]},
	{"loop", "lease run --next loop", colors["py-f324"]},
}

// workerPlots reads bench/workbench's raw.jsonl and writes
// dir/worker-floor-FS.png for each filesystem in it: the median items/s of
// each system's good timed runs against the worker count. It returns the
// files' names.
func workerPlots(raw, dir string) ([]string, error) {
	f, err := os.Open(raw)
	if err != nil {
		return nil, err
	}
	defer f.Close()
	type key struct {
		fs, system string
		workers    int
	}
	runs := map[key][]float64{}
	var fss []string
	sc := bufio.NewScanner(f)
	for sc.Scan() {
		var r struct {
			FS        string  `json:"fs"`
			System    string  `json:"system"`
			Workers   int     `json:"workers"`
			Strace    bool    `json:"strace"`
			ItemsPerS float64 `json:"items_per_s"`
			Failed    string  `json:"failed"`
		}
		if json.Unmarshal(sc.Bytes(), &r) != nil || r.Strace || r.Failed != "" {
			continue
		}
		if !contains(fss, r.FS) {
			fss = append(fss, r.FS)
		}
		k := key{r.FS, r.System, r.Workers}
		runs[k] = append(runs[k], r.ItemsPerS)
	}
	if err := sc.Err(); err != nil {
		return nil, err
	}
	var names []string
	for _, fs := range fss {
		p := plot.New()
		p.Title.Text = fmt.Sprintf("trivial items on %s: items/s (median of the runs)", fs)
		p.X.Label.Text = "workers"
		p.Y.Label.Text = "items/s"
		logAxes(p)
		var ticks []plot.Tick
		for w := 1; w <= 64; w *= 2 {
			ticks = append(ticks, plot.Tick{Value: float64(w), Label: strconv.Itoa(w)})
		}
		p.X.Tick.Marker = plot.ConstantTicks(ticks)
		p.Legend.Top = true
		p.Legend.Left = true
		p.Legend.TextStyle.Font.Size = vg.Points(7)
		lines := 0
		for _, s := range workerSystems {
			var xys plotter.XYs
			for k, v := range runs {
				if k.fs == fs && k.system == s.name {
					xys = append(xys, plotter.XY{X: float64(k.workers), Y: median(v)})
				}
			}
			if len(xys) == 0 {
				continue
			}
			sort.Slice(xys, func(i, j int) bool { return xys[i].X < xys[j].X })
			l, pts, err := plotter.NewLinePoints(xys)
			if err != nil {
				return nil, err
			}
			l.Color, pts.Color = s.color, s.color
			p.Add(l, pts)
			p.Legend.Add(s.label, l, pts)
			lines++
		}
		if lines == 0 {
			continue
		}
		headroom(p, 4)
		name := "worker-floor-" + fs + ".png"
		if err := p.Save(14*vg.Centimeter, 10*vg.Centimeter, filepath.Join(dir, name)); err != nil {
			return nil, err
		}
		names = append(names, name)
	}
	return names, nil
}
