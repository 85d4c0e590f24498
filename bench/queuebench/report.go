package main

import (
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"strings"

	"gonum.org/v1/plot"
	"gonum.org/v1/plot/plotter"
	"gonum.org/v1/plot/plotutil"
	"gonum.org/v1/plot/vg"
)

// results are the JSON files bench/queue wrote, by name.
type results struct {
	Enqueue   *enqueueResult
	Sweeps    map[string]*sweepResult    // by filesystem: ext4, fuse-2ms
	Campaigns map[string]*campaignResult // by label: next-16, first-16, ...
	Machine   string
	Command   string
}

// report reads DIR/*.json (enqueue.json, sweep-FS.json, campaign-LABEL.json)
// and writes DIR/queue.md with the plots queue-claims.png and
// queue-campaign.png.
func report(dir string) error {
	r := results{Sweeps: map[string]*sweepResult{}, Campaigns: map[string]*campaignResult{}}
	files, _ := filepath.Glob(filepath.Join(dir, "*.json"))
	for _, f := range files {
		data, err := os.ReadFile(f)
		if err != nil {
			return err
		}
		base := strings.TrimSuffix(filepath.Base(f), ".json")
		switch {
		case base == "enqueue":
			r.Enqueue = &enqueueResult{}
			err = json.Unmarshal(data, r.Enqueue)
		case strings.HasPrefix(base, "sweep-"):
			s := &sweepResult{}
			err = json.Unmarshal(data, s)
			r.Sweeps[strings.TrimPrefix(base, "sweep-")] = s
		case strings.HasPrefix(base, "campaign-"):
			c := &campaignResult{}
			err = json.Unmarshal(data, c)
			r.Campaigns[strings.TrimPrefix(base, "campaign-")] = c
		}
		if err != nil {
			return fmt.Errorf("%s: %v", f, err)
		}
	}
	if m, err := os.ReadFile(filepath.Join(dir, "machine.txt")); err == nil {
		r.Machine = strings.TrimSpace(string(m))
	}
	if m, err := os.ReadFile(filepath.Join(dir, "command.txt")); err == nil {
		r.Command = strings.TrimSpace(string(m))
	}
	var b strings.Builder
	writeMarkdown(&b, &r)
	if err := os.WriteFile(filepath.Join(dir, "queue.md"), []byte(b.String()), 0o644); err != nil {
		return err
	}
	return plots(dir, &r)
}

var fsOrder = []string{"ext4", "fuse-2ms"}

func writeMarkdown(b *strings.Builder, r *results) {
	fmt.Fprintf(b, "# The work queue at scale (issue 20)\n\nMade by `%s`.\n\n%s\n\n", r.Command, r.Machine)
	fmt.Fprintf(b, "## Flat claims\n\nOne `lease claim --next 1` process, and one `lease claim ID` of a known free ID, interleaved, at each fraction of the queue done (whole processes: start, claim, exit).\n\n")
	fmt.Fprintf(b, "| fs | done | remaining | claim --next p50 | p99 | claim ID p50 | p99 | --next ÷ ID | --next peak RSS | FUSE requests per grant (--next / ID) |\n|---|---:|---:|---:|---:|---:|---:|---:|---:|---:|\n")
	for _, fs := range fsOrder {
		s := r.Sweeps[fs]
		if s == nil {
			continue
		}
		for _, p := range s.Points {
			req := ""
			if p.NextRequests > 0 {
				req = fmt.Sprintf("%.1f / %.1f", p.NextRequests, p.IDRequests)
			}
			fmt.Fprintf(b, "| %s | %.0f%% | %d | %.2f ms | %.2f ms | %.2f ms | %.2f ms | %.2f× | %.1f MB | %s |\n", fs, p.Done*100, p.Remaining,
				p.Next.P50, p.Next.P99, p.ByID.P50, p.ByID.P99, p.Next.P50/p.ByID.P50, float64(p.NextRSS)/1024, req)
		}
	}
	fmt.Fprintf(b, "\n| fs | items | goal: p50 at %s done ÷ p50 at 0%% ≤ 1.3× | goal: ÷ claim ID ≤ 2× | peak RSS < 32 MB |\n|---|---:|---:|---:|---:|\n", "last")
	for _, fs := range fsOrder {
		s := r.Sweeps[fs]
		if s == nil {
			continue
		}
		var rss int64
		for _, p := range s.Points {
			rss = max(rss, p.NextRSS)
		}
		fmt.Fprintf(b, "| %s | %d | %.2f× (%s) | %.2f× (%s) | %.1f MB (%s) |\n", fs, s.Items, s.Flat, met(s.Flat <= 1.3), s.VsID, met(s.VsID <= 2), float64(rss)/1024, met(rss < 32*1024))
	}
	for _, fs := range fsOrder {
		if s := r.Sweeps[fs]; s != nil && s.SummaryMS > 0 {
			fmt.Fprintf(b, "\n`lease status --summary` on %s at the end of the sweep (%d records read, the queue and the work shards listed): %.0f ms, peak RSS %.1f MB: `%s`\n", fs, s.Items, s.SummaryMS, float64(s.SummaryRSSKiB)/1024, s.SummaryOut)
		}
	}
	if s := r.Sweeps["fuse-2ms"]; s != nil && len(s.Points) > 0 {
		p := s.Points[len(s.Points)-1]
		fmt.Fprintf(b, "\nFUSE requests of one grant at %.0f%% done, by opcode: claim --next %s; claim ID %s.\n", p.Done*100, opsLine(p.NextOps), opsLine(p.IDOps))
	}
	if e := r.Enqueue; e != nil {
		fmt.Fprintf(b, "\n## Enqueue\n\n`lease add` of %d IDs into a fresh table of %d shards, against a floor that creates the same empty files from one process with no fsync (one syncfs at the end); interleaved repetitions.\n\n", e.Items, e.Shards)
		fmt.Fprintf(b, "| | runs (ms) | median |\n|---|---|---:|\n| lease add | %s | %.0f ms |\n| floor | %s | %.0f ms |\n\n", msList(e.AddMS), median(e.AddMS), msList(e.FloorMS), median(e.FloorMS))
		var rss int64
		for _, x := range e.AddRSSKiB {
			rss = max(rss, x)
		}
		fmt.Fprintf(b, "Ratio %.2f× (goal ≤ 1.3×: %s). Peak RSS of lease add: %.0f MB. Directory fsyncs: %d for the first add (the %d queue shard directories made, each with its parent, then each fsynced once), %d for a second add of %d new IDs (one per touched shard).\n",
			e.Ratio, met(e.Ratio <= 1.3), float64(rss)/1024, e.DirSyncsFirst, e.Shards, e.DirSyncsNext, e.Next)
	}
	if len(r.Campaigns) > 0 {
		fmt.Fprintf(b, "\n## Campaign\n\nWorkers until every item is done: `next` = `lease run --next --wait --complete -- true` loops; `first` = `lease claim --first 1 - < todo` then `lease run --token T --complete ID -- true`; `parallel` = GNU parallel's SQL queue (`--sqlmaster sqlite3:///…/tab true :::: todo`, then W `parallel --sqlworker URL -j1`), all on the same filesystem.\n\n")
		fmt.Fprintf(b, "| workers | items | done | seconds | items/s | items/s per decile | last ÷ first decile |\n|---|---:|---:|---:|---:|---|---:|\n")
		for _, label := range sortedKeys(r.Campaigns) {
			c := r.Campaigns[label]
			trend := ""
			if len(c.Deciles) > 1 {
				trend = fmt.Sprintf("%.2f", c.Deciles[len(c.Deciles)-1]/c.Deciles[0])
			}
			note := ""
			if c.TimedOut {
				note = " (stopped at the time limit)"
			}
			fmt.Fprintf(b, "| %s | %d | %d%s | %.0f | %.1f | %s | %s |\n", label, c.Items, c.Done, note, c.Seconds, c.ItemsPerS, floatList(c.Deciles), trend)
		}
	}
	fmt.Fprintf(b, "\n![claim latency](queue-claims.png)\n![campaign](queue-campaign.png)\n")
}

func met(ok bool) string {
	if ok {
		return "met"
	}
	return "**NOT met**"
}

func opsLine(m map[string]int) string {
	var parts []string
	for _, k := range sortedKeys(m) {
		parts = append(parts, fmt.Sprintf("%s %d", k, m[k]))
	}
	return strings.Join(parts, ", ")
}

func msList(xs []float64) string {
	var p []string
	for _, x := range xs {
		p = append(p, fmt.Sprintf("%.0f", x))
	}
	return strings.Join(p, ", ")
}

func floatList(xs []float64) string {
	var p []string
	for _, x := range xs {
		p = append(p, fmt.Sprintf("%.0f", x))
	}
	return strings.Join(p, " ")
}

func sortedKeys[V any](m map[string]V) []string {
	var ks []string
	for k := range m {
		ks = append(ks, k)
	}
	for i := range ks {
		for j := i + 1; j < len(ks); j++ {
			if ks[j] < ks[i] {
				ks[i], ks[j] = ks[j], ks[i]
			}
		}
	}
	return ks
}

func plots(dir string, r *results) error {
	p := plot.New()
	p.Title.Text = "claim latency as the queue empties"
	p.X.Label.Text = "fraction of the queue done"
	p.Y.Label.Text = "p50 of one process (ms)"
	i := 0
	for _, fs := range fsOrder {
		s := r.Sweeps[fs]
		if s == nil {
			continue
		}
		next, byID := plotter.XYs{}, plotter.XYs{}
		for _, pt := range s.Points {
			next = append(next, plotter.XY{X: pt.Done, Y: pt.Next.P50})
			byID = append(byID, plotter.XY{X: pt.Done, Y: pt.ByID.P50})
		}
		for j, series := range []struct {
			name string
			xy   plotter.XYs
		}{{fs + ": claim --next", next}, {fs + ": claim ID", byID}} {
			l, pts, err := plotter.NewLinePoints(series.xy)
			if err != nil {
				return err
			}
			l.Color = plotutil.Color(i)
			pts.Color = l.Color
			if j == 1 {
				l.Dashes = []vg.Length{vg.Points(4), vg.Points(3)}
			}
			p.Add(l, pts)
			p.Legend.Add(series.name, l, pts)
		}
		i++
	}
	p.Legend.Top = true
	p.Y.Min = 0
	if err := p.Save(16*vg.Centimeter, 10*vg.Centimeter, filepath.Join(dir, "queue-claims.png")); err != nil {
		return err
	}
	c := plot.New()
	c.Title.Text = "campaign throughput by decile"
	c.X.Label.Text = "decile of the campaign"
	c.Y.Label.Text = "items/s"
	for i, label := range sortedKeys(r.Campaigns) {
		xy := plotter.XYs{}
		for k, v := range r.Campaigns[label].Deciles {
			xy = append(xy, plotter.XY{X: float64(k + 1), Y: v})
		}
		if len(xy) == 0 {
			continue
		}
		l, pts, err := plotter.NewLinePoints(xy)
		if err != nil {
			return err
		}
		l.Color, pts.Color = plotutil.Color(i), plotutil.Color(i)
		c.Add(l, pts)
		c.Legend.Add(label, l, pts)
	}
	c.Legend.Top = true
	c.Y.Min = 0
	c.Add(plotter.NewGrid())
	return c.Save(16*vg.Centimeter, 10*vg.Centimeter, filepath.Join(dir, "queue-campaign.png"))
}
