package main

// Statistics of the samples (medians, quantiles, ranges, least-squares
// fits, within-repetition ratios) and the number formats of the tables.

import (
	"fmt"
	"math"
	"sort"
)

func walls(xs []sample) []float64 {
	out := make([]float64, len(xs))
	for i, s := range xs {
		out[i] = s.wall
	}
	return out
}

func cpus(xs []sample) []float64 {
	out := make([]float64, len(xs))
	for i, s := range xs {
		out[i] = s.cpu
	}
	return out
}

func maxRSS(xs []sample) int64 {
	var m int64
	for _, s := range xs {
		if s.rss > m {
			m = s.rss
		}
	}
	return m
}

func median(xs []float64) float64 { return quantile(xs, 0.5) }

// quantile: linear interpolation between order statistics.
func quantile(xs []float64, q float64) float64 {
	if len(xs) == 0 {
		return math.NaN()
	}
	ys := append([]float64(nil), xs...)
	sort.Float64s(ys)
	pos := q * float64(len(ys)-1)
	lo := int(math.Floor(pos))
	hi := int(math.Ceil(pos))
	return ys[lo] + (ys[hi]-ys[lo])*(pos-float64(lo))
}

func minMax(xs []float64) (lo, hi float64) {
	lo, hi = math.Inf(1), math.Inf(-1)
	for _, x := range xs {
		lo, hi = math.Min(lo, x), math.Max(hi, x)
	}
	return lo, hi
}

func ratio(a, b float64) string {
	if a == 0 || b == 0 || math.IsNaN(a) || math.IsNaN(b) {
		return "–"
	}
	return fmt.Sprintf("%.2f×", a/b)
}

func mb(kb int64) string { return fmt.Sprintf("%.1f", float64(kb)/1024) }

// withinRep: the median over repetitions of num/den, both taken in the
// same repetition (runs seconds apart).
func withinRep(byS map[string][]sample, num, den string) (float64, int) {
	a := map[string]float64{}
	for _, s := range byS[num] {
		a[s.rep] = s.wall
	}
	var rs []float64
	for _, s := range byS[den] {
		if v, ok := a[s.rep]; ok && s.wall > 0 {
			rs = append(rs, v/s.wall)
		}
	}
	return median(rs), len(rs)
}

// fit: least-squares line y = a + b x and its R².
func fit(xs, ys []float64) (a, b, r2 float64) {
	n := float64(len(xs))
	var sx, sy, sxx, sxy float64
	for i := range xs {
		sx += xs[i]
		sy += ys[i]
		sxx += xs[i] * xs[i]
		sxy += xs[i] * ys[i]
	}
	b = (n*sxy - sx*sy) / (n*sxx - sx*sx)
	a = (sy - b*sx) / n
	mean := sy / n
	var ssTot, ssRes float64
	for i := range xs {
		e := ys[i] - (a + b*xs[i])
		ssRes += e * e
		ssTot += (ys[i] - mean) * (ys[i] - mean)
	}
	return a, b, 1 - ssRes/ssTot
}
