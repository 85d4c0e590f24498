package commands

// What lease qualify prints: for people a verdict line per check and a
// summary; with --json the proof itself, unchanged (docs/design.md#mpi). This is the
// one place qualify prints, so that who prints (rank 0 only, or every
// rank) is decided where it is called.

import (
	"fmt"
	"io"
	"sort"
	"strings"
	"text/tabwriter"

	"github.com/leasetool/lease/leasefmt"
	"github.com/leasetool/lease/qualify"
)

// printProof writes the proof p, whose JSON encoding is doc (the bytes
// every rank agreed on), to w: doc with asJSON, else the report for
// people of the table at root.
func printProof(w io.Writer, p qualify.Proof, doc []byte, asJSON bool, root string) error {
	if asJSON {
		_, err := fmt.Fprintln(w, string(doc))
		return err
	}
	var b strings.Builder
	hosts := map[string]bool{}
	for _, m := range p.Members {
		hosts[m.Host] = true
	}
	names := make([]string, 0, len(hosts))
	for h := range hosts {
		names = append(names, h)
	}
	sort.Strings(names)
	ranks := "1 process"
	if len(p.Members) > 1 {
		ranks = fmt.Sprintf("%d ranks", len(p.Members))
	}
	fmt.Fprintf(&b, "lease qualify: %s, from %s on %s\n", root, ranks, strings.Join(names, ", "))
	tw := tabwriter.NewWriter(&b, 0, 8, 2, ' ', 0)
	failed := []string{}
	for _, c := range p.Checks {
		verdict := "ok"
		if !c.Pass {
			verdict = "FAIL"
			failed = append(failed, c.Name)
		}
		where := ""
		if len(p.Members) > 1 {
			where = fmt.Sprintf("rank %d\t", c.Rank)
		}
		fmt.Fprintf(tw, "  %s\t%s%s\t%s\n", verdict, where, c.Name, leasefmt.Bound(c.Detail))
	}
	tw.Flush()
	if p.Rounds > 0 || len(p.Members) > 1 {
		want := p.Rounds * (len(p.Members) - 1)
		fmt.Fprintf(&b, "  lock rounds across ranks: %d (contention %d of %d, identity %d of %d, release %d of %d)\n",
			p.Rounds, p.Contention, want, p.Identity, want, p.Release, p.Rounds)
	}
	if p.Error != "" {
		fmt.Fprintf(&b, "  error: %s\n", leasefmt.Bound(p.Error))
	}
	passed := len(p.Checks) - len(failed)
	if p.Verified {
		fmt.Fprintf(&b, "qualified: %d of %d checks passed; largest clock skew %gs\n", passed, len(p.Checks), roundSkew(p.MaxClockSkewS))
	} else {
		why := fmt.Sprintf("%d of %d checks failed", len(failed), len(p.Checks))
		if len(failed) > 0 {
			why += " (" + strings.Join(failed, ", ") + ")"
		}
		if p.Error != "" {
			why += "; " + "the run did not complete"
		}
		fmt.Fprintf(&b, "NOT qualified: %s\n", why)
	}
	if !p.Clean && p.Error == "" && len(failed) == 0 {
		fmt.Fprintf(&b, "  the scratch directory %s/.qualify.* may be left\n", root)
	}
	_, err := io.WriteString(w, b.String())
	return err
}

// roundSkew keeps a skew readable: microseconds are plenty.
func roundSkew(s float64) float64 {
	return float64(int64(s*1e6)) / 1e6
}
