package safety

import (
	"fmt"
	"strings"
	"testing"
)

func explorer() *Explorer {
	budget := 48
	if isLong() {
		budget = 400
	}
	return &Explorer{Repair: repairer(), Budget: budget, Seed: 1, ClaimAfter: 8}
}

// TestCrashStates explores every crash state of every call prefix of the
// work-lease operations and checks the invariants after recovery.
func TestCrashStates(t *testing.T) {
	x := explorer()
	total := 0
	var rows []string
	for _, sc := range WorkScenarios() {
		res, err := x.Explore(sc)
		if err != nil {
			t.Fatalf("%s: %v", sc.Name, err)
		}
		total += res.States
		rows = append(rows, fmt.Sprintf("| %s | %d | %d | %d | %d |", res.Scenario, res.Calls, res.CrashPoints, res.States, res.Acks))
		for i, v := range res.Violations {
			if i == 20 {
				t.Errorf("... and %d more", len(res.Violations)-20)
				break
			}
			t.Error(v)
		}
	}
	t.Logf("crash states (budget %d per crash point):\n| operation | calls | crash points | distinct states | acks |\n|---|---|---|---|---|\n%s\ntotal %d", x.Budget, strings.Join(rows, "\n"), total)
	if total < 10000 {
		t.Errorf("explored %d crash states, want at least 10000", total)
	}
}
