package commands

import (
	"strings"
	"testing"

	"github.com/leasetool/lease/qualify"
)

// TestPrintProofNotQualified: a failed check is a FAIL line with its
// rank under mpirun, and the summary names it.
func TestPrintProofNotQualified(t *testing.T) {
	t.Parallel()
	p := qualify.Proof{
		Members: []qualify.Member{{Rank: 0, Host: "a"}, {Rank: 1, Host: "b"}},
		Rounds:  2, Contention: 2, Identity: 1, Release: 2,
		Checks: []qualify.Check{
			{Name: "o-excl-create", Rank: 0, Pass: true, Detail: "fine"},
			{Name: "directory-fsync", Rank: 1, Pass: false, Detail: "fsync: EINVAL"},
		},
	}
	var b strings.Builder
	if err := printProof(&b, p, []byte(`{"verified":false}`), false, "/t"); err != nil {
		t.Fatal(err)
	}
	out := b.String()
	for _, want := range []string{
		"lease qualify: /t, from 2 ranks on a, b\n",
		"  ok    rank 0  o-excl-create    fine\n",
		"  FAIL  rank 1  directory-fsync  fsync: EINVAL\n",
		"  lock rounds across ranks: 2 (contention 2 of 2, identity 1 of 2, release 2 of 2)\n",
		"NOT qualified: 1 of 2 checks failed (directory-fsync)\n",
	} {
		if !strings.Contains(out, want) {
			t.Errorf("report lacks %q:\n%s", want, out)
		}
	}
	b.Reset()
	printProof(&b, p, []byte(`{"verified":false}`), true, "/t")
	if b.String() != "{\"verified\":false}\n" {
		t.Errorf("--json: %q", b.String())
	}
}
