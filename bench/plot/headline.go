package main

// The headline plot: ms per record at N = 1024, K = 16, per filesystem and
// strategy.

import (
	"gonum.org/v1/plot"
	"gonum.org/v1/plot/plotter"
	"gonum.org/v1/plot/vg"
	"gonum.org/v1/plot/vg/draw"
)

// headlinePlot: ms per record at N = 1024, K = 16, per filesystem
// (x, nominal) and strategy (points, offset a little), log y.
func headlinePlot(d *data) (*plot.Plot, bool) {
	var fss []string
	for _, fs := range d.fsOrder {
		if d.renew[cell{fs, 1024, 16}] != nil {
			fss = append(fss, fs)
		}
	}
	if len(fss) == 0 {
		return nil, false
	}
	p := plot.New()
	p.Title.Text = "renew-batch, N = 1024, K = 16: ms per record (median, log scale)"
	p.Y.Label.Text = "ms per record"
	p.Y.Scale = plot.LogScale{}
	p.Y.Tick.Marker = ticks125{}
	p.Add(plotter.NewGrid())
	p.NominalX(fss...)
	p.Legend.Top = true
	p.Legend.Left = true
	p.Legend.TextStyle.Font.Size = vg.Points(8)
	for si, s := range strategies {
		var xys plotter.XYs
		for i, fs := range fss {
			xs := d.renew[cell{fs, 1024, 16}][s]
			if len(xs) == 0 {
				continue
			}
			xys = append(xys, plotter.XY{X: float64(i) + (float64(si)-float64(len(strategies)-1)/2)*0.08, Y: median(walls(xs)) / 1024})
		}
		if len(xys) == 0 {
			continue
		}
		sc, err := plotter.NewScatter(xys)
		if err != nil {
			continue
		}
		sc.Color = colors[s]
		sc.Shape = draw.CircleGlyph{}
		if isPy(s) {
			sc.Shape = draw.BoxGlyph{}
		}
		sc.Radius = vg.Points(4)
		p.Add(sc)
		p.Legend.Add(label[s], sc)
	}
	var exp plotter.XYs
	for i, fs := range fss {
		if xs := d.writers[cell{fs, 1024, 16}]["64-variant"]; len(xs) > 0 {
			exp = append(exp, plotter.XY{X: float64(i) - 0.34, Y: median(walls(xs)) / 1024})
		}
	}
	if len(exp) > 0 {
		if sc, err := plotter.NewScatter(exp); err == nil {
			sc.Color = colors["concurrent"]
			sc.Shape = draw.TriangleGlyph{}
			sc.Radius = vg.Points(4)
			p.Add(sc)
			p.Legend.Add("concurrent, variant build (experiment)", sc)
		}
	}
	p.X.Min, p.X.Max = -0.6, float64(len(fss))-0.4
	headroom(p, 5)
	return p, true
}
