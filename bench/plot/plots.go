package main

// Writing the plots (PNG), and the log axes and ticks they share.

import (
	"math"
	"os"
	"path/filepath"
	"strconv"

	"gonum.org/v1/plot"
	"gonum.org/v1/plot/plotter"
	"gonum.org/v1/plot/vg"
	"gonum.org/v1/plot/vg/draw"
	"gonum.org/v1/plot/vg/vgimg"
)

// makePlots writes the plots and returns their file names (relative to dir).
func makePlots(d *data, dir, prefix string) ([]string, error) {
	var names []string
	var panels []*plot.Plot
	for _, fs := range d.fsOrder {
		p, ok := perRecordPlot(d, fs)
		if !ok {
			continue
		}
		name := prefix + "-" + fs + ".png"
		if err := p.Save(14*vg.Centimeter, 10*vg.Centimeter, filepath.Join(dir, name)); err != nil {
			return nil, err
		}
		panels = append(panels, p)
		names = append(names, name)
	}
	if len(panels) > 0 {
		cols := min(3, len(panels))
		rows := (len(panels) + cols - 1) / cols
		grid := make([][]*plot.Plot, rows)
		for r := range grid {
			grid[r] = make([]*plot.Plot, cols)
			for c := range grid[r] {
				if i := r*cols + c; i < len(panels) {
					// fresh copies: Align changes nothing, but a plot is drawn once per canvas
					p, _ := perRecordPlot(d, d.fsOrder[indexOfPanel(d, i)])
					grid[r][c] = p
				}
			}
		}
		w, h := vg.Length(cols)*12*vg.Centimeter, vg.Length(rows)*9*vg.Centimeter
		img := vgimg.New(w, h)
		dc := draw.New(img)
		t := draw.Tiles{Rows: rows, Cols: cols, PadX: vg.Millimeter * 4, PadY: vg.Millimeter * 4,
			PadTop: vg.Millimeter * 2, PadBottom: vg.Millimeter * 2, PadLeft: vg.Millimeter * 2, PadRight: vg.Millimeter * 2}
		cv := plot.Align(grid, t, dc)
		for r := range grid {
			for c := range grid[r] {
				if grid[r][c] != nil {
					grid[r][c].Draw(cv[r][c])
				}
			}
		}
		name := prefix + "-per-record.png"
		f, err := os.Create(filepath.Join(dir, name))
		if err != nil {
			return nil, err
		}
		if _, err := (vgimg.PngCanvas{Canvas: img}).WriteTo(f); err != nil {
			f.Close()
			return nil, err
		}
		if err := f.Close(); err != nil {
			return nil, err
		}
		names = append([]string{name}, names...)
	}
	if p, ok := writersPlot(d); ok {
		name := prefix + "-writers.png"
		if err := p.Save(14*vg.Centimeter, 9*vg.Centimeter, filepath.Join(dir, name)); err != nil {
			return nil, err
		}
		names = append(names, name)
	}
	if p, ok := headlinePlot(d); ok {
		name := "headline.png" // bench/results/headline.png for the full matrix
		if prefix != "matrix" {
			name = prefix + "-headline.png"
		}
		if err := p.Save(16*vg.Centimeter, 10*vg.Centimeter, filepath.Join(dir, name)); err != nil {
			return nil, err
		}
		names = append([]string{name}, names...)
	}
	return names, nil
}

// indexOfPanel maps the i-th panel back to its filesystem (filesystems
// without a plot are skipped in both).
func indexOfPanel(d *data, i int) int {
	seen := 0
	for j, fs := range d.fsOrder {
		if _, ok := perRecordPlot(d, fs); ok {
			if seen == i {
				return j
			}
			seen++
		}
	}
	return 0
}

func logAxes(p *plot.Plot) {
	p.X.Scale = plot.LogScale{}
	p.X.Tick.Marker = plot.LogTicks{Prec: -1}
	p.Y.Scale = plot.LogScale{}
	p.Y.Tick.Marker = ticks125{}
	p.Add(plotter.NewGrid())
}

// ticks125 labels 1, 2 and 5 times the powers of ten in range (LogTicks
// labels only powers of ten, often none or one on these axes).
type ticks125 struct{}

func (ticks125) Ticks(lo, hi float64) []plot.Tick {
	var ts []plot.Tick
	for e := math.Floor(math.Log10(lo)) - 1; e <= math.Ceil(math.Log10(hi)); e++ {
		for m := 1.0; m < 10; m++ {
			v := m * math.Pow(10, e)
			if v < lo || v > hi {
				continue
			}
			t := plot.Tick{Value: v}
			if m == 1 || m == 2 || m == 5 {
				t.Label = strconv.FormatFloat(v, 'g', -1, 64)
			}
			ts = append(ts, t)
		}
	}
	return ts
}

// headroom widens the log y range so the legend at the top does not
// cover the points, and an x range of one value so that it can be drawn.
func headroom(p *plot.Plot, factor float64) {
	p.Y.Min /= 1.3
	p.Y.Max *= factor
	if p.X.Min == p.X.Max {
		// One x value (bench/worker --workers 1): gonum would pad the
		// range to [x-1, x+1], and a log axis cannot hold 0.
		p.X.Min /= 2
		p.X.Max *= 2
	}
}
