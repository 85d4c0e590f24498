package main

// The per-record plot: ms per record against N, one panel per filesystem.

import (
	"fmt"

	"gonum.org/v1/plot"
	"gonum.org/v1/plot/plotter"
	"gonum.org/v1/plot/vg"
	"gonum.org/v1/plot/vg/draw"
)

// perRecordPlot: median ms per record against N at K = 16, one line per
// strategy, and concurrent at K = 1 and 64 (dotted), log-log.
func perRecordPlot(d *data, fs string) (*plot.Plot, bool) {
	p := plot.New()
	p.Title.Text = fs + ": renew-batch, K = 16 (dotted: concurrent at K = 1, 64)"
	p.X.Label.Text = "N (records)"
	p.Y.Label.Text = "ms per record (median)"
	logAxes(p)
	p.Legend.Top = true
	p.Legend.Left = false
	p.Legend.TextStyle.Font.Size = vg.Points(7)
	lines := 0
	for _, s := range strategies {
		var xys plotter.XYs
		for _, c := range d.cells {
			if c.fs == fs && c.k == 16 && len(d.renew[c][s]) > 0 {
				xys = append(xys, plotter.XY{X: float64(c.n), Y: median(walls(d.renew[c][s])) / float64(c.n)})
			}
		}
		if len(xys) < 2 {
			continue
		}
		l, pts, err := plotter.NewLinePoints(xys)
		if err != nil {
			continue
		}
		l.Color = colors[s]
		l.Width = vg.Points(1.5)
		pts.Color = colors[s]
		pts.Shape = draw.CircleGlyph{}
		if isPy(s) {
			l.Dashes = []vg.Length{vg.Points(4), vg.Points(2)}
			pts.Shape = draw.BoxGlyph{}
		}
		p.Add(l, pts)
		p.Legend.Add(label[s], l, pts)
		lines++
	}
	// concurrent at the other shard counts, where more than one N was
	// measured: dotted, triangles (K = 1) and crosses (K = 64)
	for _, k := range []int{1, 64} {
		var xys plotter.XYs
		for _, c := range d.cells {
			if c.fs == fs && c.k == k && len(d.renew[c]["concurrent"]) > 0 {
				xys = append(xys, plotter.XY{X: float64(c.n), Y: median(walls(d.renew[c]["concurrent"])) / float64(c.n)})
			}
		}
		if len(xys) < 2 {
			continue
		}
		l, pts, err := plotter.NewLinePoints(xys)
		if err != nil {
			continue
		}
		l.Color = colors["concurrent"]
		l.Width = vg.Points(1)
		l.Dashes = []vg.Length{vg.Points(1), vg.Points(2)}
		pts.Color = colors["concurrent"]
		pts.Shape = draw.TriangleGlyph{}
		if k == 64 {
			pts.Shape = draw.CrossGlyph{}
		}
		p.Add(l, pts)
		p.Legend.Add(fmt.Sprintf("%s, K = %d", label["concurrent"], k), l, pts)
		lines++
	}
	headroom(p, 4)
	return p, lines > 0
}
