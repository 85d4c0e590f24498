package safety

import (
	"fmt"
	"strings"
	"testing"
)

func explorer() *Explorer {
	budget := 40
	if isLong() {
		budget = 400
	}
	return &Explorer{Repair: repairer(), Budget: budget, Seed: 1, ClaimAfter: 8}
}

// TestCrashStates explores every crash state of every call prefix of the
// work-lease operations and checks the invariants after recovery.
func TestCrashStates(t *testing.T) {
	t.Parallel()
	x := explorer()
	total := 0
	var rows []string
	var tally Tally
	for _, sc := range allScenarios() {
		res, err := x.Explore(sc)
		if err != nil {
			t.Fatalf("%s: %v", sc.Name, err)
		}
		total += res.States
		rows = append(rows, fmt.Sprintf("| %s | %d | %d | %d | %d |", res.Scenario, res.Calls, res.CrashPoints, res.States, res.Acks))
		tally.Add(res.Violations...)
	}
	report(t, &tally)
	t.Logf("crash states (budget %d per crash point):\n| operation | calls | crash points | distinct states | acks |\n|---|---|---|---|---|\n%s\ntotal %d", x.Budget, strings.Join(rows, "\n"), total)
	if total < 10000 {
		t.Errorf("explored %d crash states, want at least 10000", total)
	}
}

func allScenarios() []*Scenario {
	return append(append(append(append(append(WorkScenarios(), AbandonedScenarios()...), GroupScenarios()...), FsckScenarios()...), QueueScenarios()...), CampaignScenarios()...)
}
