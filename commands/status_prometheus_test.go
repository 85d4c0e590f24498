package commands_test

// lease status --summary -o prometheus, read back by Prometheus' own text
// parser (github.com/prometheus/common/expfmt) and checked by promtool.

import (
	"os/exec"
	"strings"
	"testing"

	dto "github.com/prometheus/client_model/go"
	"github.com/prometheus/common/expfmt"
	"github.com/prometheus/common/model"

	"github.com/leasetool/lease/internal/testenv"
)

func TestSummaryPrometheus(t *testing.T) {
	t.Parallel()
	root := coreRoot(t)
	var in strings.Builder
	for _, n := range []string{"a", "b", "c", "d", "e"} {
		in.WriteString(string(coreID("prom-"+n)) + "\n")
	}
	coreMust(t, 0, in.String(), "add", "--root", root)
	held := coreMust(t, 0, "", "claim", "--root", root, "--next", "3", "--owner", `w "1"\n`).out
	lines := strings.SplitAfter(held, "\n")
	coreMust(t, 0, lines[0], "complete", "--root", root)
	coreMust(t, 0, lines[1], "release", "--root", root, "--failed=1", "--max-attempts", "1")
	out := coreMust(t, 0, "", "status", "--root", root, "--summary", "-o", "prometheus").out

	p := expfmt.NewTextParser(model.UTF8Validation)
	fams, err := p.TextToMetricFamilies(strings.NewReader(out))
	if err != nil {
		t.Fatalf("the Prometheus text parser refuses the output: %v\n%s", err, out)
	}
	want := map[string]float64{"free": 2, "leased": 1, "done": 1, "failed": 1, "released": 0, "expired": 0, "committing": 0, "corrupt": 0}
	items := fams["lease_items"]
	if items == nil || items.GetType() != dto.MetricType_GAUGE || items.GetHelp() == "" {
		t.Fatalf("lease_items: %v\n%s", items, out)
	}
	for _, m := range items.Metric {
		var state, r string
		for _, l := range m.Label {
			switch l.GetName() {
			case "state":
				state = l.GetValue()
			case "root":
				r = l.GetValue()
			}
		}
		if r != root {
			t.Errorf("lease_items{state=%q} has root %q, want %q", state, r, root)
		}
		if w, ok := want[state]; !ok || m.Gauge.GetValue() != w {
			t.Errorf("lease_items{state=%q} = %v, want %v", state, m.Gauge.GetValue(), w)
		}
		delete(want, state)
	}
	if len(want) > 0 {
		t.Errorf("lease_items lacks the states %v", want)
	}
	if f := fams["lease_attempts_total"]; f == nil || f.GetType() != dto.MetricType_COUNTER || f.Metric[0].Counter.GetValue() != 1 {
		t.Errorf("lease_attempts_total: %v", f)
	}
	if f := fams["lease_owners"]; f == nil || f.Metric[0].Gauge.GetValue() != 1 {
		t.Errorf("lease_owners: %v", f)
	}
	if f := fams["lease_owner_live_leases"]; f == nil || len(f.Metric) != 1 || f.Metric[0].Gauge.GetValue() != 1 {
		t.Errorf("lease_owner_live_leases: %v", f)
	} else if o := f.Metric[0].Label[1]; o.GetName() != "owner" || o.GetValue() != `w "1"\n` {
		t.Errorf("owner label %q, want the owner's name as given", o.GetValue())
	}

	// Prometheus' own linter, from the Debian package (.ci/run installs it).
	if _, err := exec.LookPath("promtool"); err != nil {
		testenv.Missing(t, "promtool", "promtool is not installed (Debian's prometheus package)")
	}
	cmd := exec.Command("promtool", "check", "metrics")
	cmd.Stdin = strings.NewReader(out)
	if msg, err := cmd.CombinedOutput(); err != nil {
		t.Fatalf("promtool check metrics: %v\n%s\n%s", err, msg, out)
	}
}

func TestSummaryOutputRefused(t *testing.T) {
	t.Parallel()
	root := coreRoot(t)
	r := coreMust(t, 2, "", "status", "--root", root, "--summary", "-o", "wide")
	if !strings.Contains(r.errOut, "want table, json or prometheus") {
		t.Errorf("status --summary -o wide: %s", r)
	}
	coreMust(t, 2, "", "status", "--root", root, "--summary", "--json", "-o", "prometheus")
}
