package main

// The writer pool (W lines): its table and its plot, wall time against
// --writers.

import (
	"fmt"
	"image/color"
	"sort"
	"strconv"
	"strings"

	"gonum.org/v1/plot"
	"gonum.org/v1/plot/plotter"
	"gonum.org/v1/plot/vg"
	"gonum.org/v1/plot/vg/draw"
)

func writerTable(d *data) {
	if len(d.writers) == 0 {
		return
	}
	fmt.Println("## Writer pool at high latency")
	fmt.Println()
	fmt.Println("Concurrent strategy with `--writers W`, interleaved with the other runs of the same filesystem; `× 64`")
	fmt.Println("is the median of W = 64 divided by the median of this row (> 1: faster than the default pool).")
	fmt.Println("`W-variant`: another build of lease (an engine experiment, `bench/matrix --variant BIN`), same W.")
	fmt.Println()
	fmt.Println("| fs | N | K | writers | runs | median ms | min–max ms | ms/record | CPU ms | max RSS MB | × 64 |")
	fmt.Println("| --- | ---: | ---: | ---: | ---: | ---: | ---: | ---: | ---: | ---: | ---: |")
	var cs []cell
	for c := range d.writers {
		cs = append(cs, c)
	}
	sort.Slice(cs, func(i, j int) bool {
		if cs[i].fs != cs[j].fs {
			return indexOf(d.fsOrder, cs[i].fs) < indexOf(d.fsOrder, cs[j].fs)
		}
		return cs[i].n < cs[j].n
	})
	for _, c := range cs {
		var ws []string
		for w := range d.writers[c] {
			ws = append(ws, w)
		}
		// by the pool size, then the label ("64" before "64-variant")
		sort.Slice(ws, func(i, j int) bool {
			ni, _ := strconv.Atoi(strings.SplitN(ws[i], "-", 2)[0])
			nj, _ := strconv.Atoi(strings.SplitN(ws[j], "-", 2)[0])
			if ni != nj {
				return ni < nj
			}
			return ws[i] < ws[j]
		})
		base := median(walls(d.writers[c]["64"]))
		if len(d.writers[c]["64"]) == 0 && len(d.renew[c]["concurrent"]) > 0 {
			// no --writers 64 runs here: the plain concurrent runs (default pool, 64) are the base
			xs := d.renew[c]["concurrent"]
			base = median(walls(xs))
			lo, hi := minMax(walls(xs))
			fmt.Printf("| %s | %d | %d | 64 (default; the concurrent runs above) | %d | %.1f | %.1f–%.1f | %.3f | %.1f | %s | 1.00× |\n",
				c.fs, c.n, c.k, len(xs), base, lo, hi, base/float64(c.n), median(cpus(xs)), mb(maxRSS(xs)))
		}
		for _, w := range ws {
			xs := d.writers[c][w]
			m := median(walls(xs))
			lo, hi := minMax(walls(xs))
			fmt.Printf("| %s | %d | %d | %s | %d | %.1f | %.1f–%.1f | %.3f | %.1f | %s | %s |\n",
				c.fs, c.n, c.k, w, len(xs), m, lo, hi, m/float64(c.n), median(cpus(xs)), mb(maxRSS(xs)), ratio(base, m))
		}
	}
}

// writersPlot: median wall time against the writer pool for every writer
// cell, one line per (filesystem, N, build).
func writersPlot(d *data) (*plot.Plot, bool) {
	if len(d.writers) == 0 {
		return nil, false
	}
	p := plot.New()
	p.Title.Text = "concurrent renew-batch: writer pool (K = 16)"
	p.X.Label.Text = "writers"
	p.Y.Label.Text = "ms per record (median, whole process)"
	logAxes(p)
	p.X.Tick.Marker = plot.ConstantTicks([]plot.Tick{{Value: 16, Label: "16"}, {Value: 32, Label: "32"}, {Value: 64, Label: "64"}, {Value: 128, Label: "128"}, {Value: 256, Label: "256"}})
	p.Legend.Top = true
	p.Legend.TextStyle.Font.Size = vg.Points(7)
	var cs []cell
	for c := range d.writers {
		cs = append(cs, c)
	}
	sort.Slice(cs, func(i, j int) bool {
		if cs[i].fs != cs[j].fs {
			return indexOf(d.fsOrder, cs[i].fs) < indexOf(d.fsOrder, cs[j].fs)
		}
		return cs[i].n < cs[j].n
	})
	palette := []color.Color{colors["concurrent"], colors["sequential"], colors["one-at-a-time"], colors["nosync"],
		color.RGBA{R: 0x2c, G: 0xa0, B: 0x2c, A: 0xff}, color.RGBA{R: 0x94, G: 0x67, B: 0xbd, A: 0xff}}
	lines := 0
	for ci, c := range cs {
		col := palette[ci%len(palette)]
		series := map[string]plotter.XYs{}
		for w, xs := range d.writers[c] {
			num, suffix, _ := strings.Cut(w, "-")
			n, err := strconv.Atoi(num)
			if err != nil {
				continue
			}
			series[suffix] = append(series[suffix], plotter.XY{X: float64(n), Y: median(walls(xs)) / float64(c.n)})
		}
		if _, ok := d.writers[c]["64"]; !ok && len(d.renew[c]["concurrent"]) > 0 {
			series[""] = append(series[""], plotter.XY{X: 64, Y: median(walls(d.renew[c]["concurrent"])) / float64(c.n)})
		}
		var keys []string
		for k := range series {
			keys = append(keys, k)
		}
		sort.Strings(keys)
		for _, k := range keys {
			xys := series[k]
			sort.Slice(xys, func(i, j int) bool { return xys[i].X < xys[j].X })
			l, pts, err := plotter.NewLinePoints(xys)
			if err != nil {
				continue
			}
			l.Color, pts.Color = col, col
			if k != "" {
				l.Dashes = []vg.Length{vg.Points(4), vg.Points(2)}
				pts.Shape = draw.TriangleGlyph{}
			}
			p.Add(l, pts)
			name := fmt.Sprintf("%s N=%d", c.fs, c.n)
			if k != "" {
				name += " " + k
			}
			p.Legend.Add(name, l, pts)
			lines++
		}
	}
	headroom(p, 4)
	return p, lines > 0
}
