package safety

import (
	"fmt"
	"strings"
	"testing"
)

func explorer() *Explorer {
	return &Explorer{Repair: repairer(), Budget: sized(4, 40, 400), Seed: 1, ClaimAfter: 8}
}

// TestCrashStates explores every crash state of every call prefix of the
// work-lease operations and checks the invariants after recovery.
func TestCrashStates(t *testing.T) {
	t.Parallel()
	x := sampleBudget(explorer())
	total, points := 0, 0
	var rows []string
	var tally Tally
	for _, sc := range sampled(allScenarios()) {
		res, err := x.Explore(sc)
		if err != nil {
			t.Fatalf("%s: %v", sc.Name, err)
		}
		total, points = total+res.States, points+res.CrashPoints
		rows = append(rows, fmt.Sprintf("| %s | %d | %d | %d | %d |", res.Scenario, res.Calls, res.CrashPoints, res.States, res.Acks))
		tally.Add(res.Violations...)
	}
	report(t, &tally)
	t.Logf("crash states (budget %d per crash point):\n| operation | calls | crash points | distinct states | acks |\n|---|---|---|---|---|\n%s\ntotal %d", x.Budget, strings.Join(rows, "\n"), total)
	if want := sized(points, 10000, 10000); total < want {
		t.Errorf("explored %d crash states, want at least %d", total, want)
	}
}

// sampled is every third of scenarios in the sample (make test; the
// default run, make test-long, explores them all), all of them otherwise.
func sampled(scenarios []*Scenario) []*Scenario {
	if !isSample() {
		return scenarios
	}
	var some []*Scenario
	for i, sc := range scenarios {
		if i%3 == 0 {
			some = append(some, sc)
		}
	}
	return some
}

// sampleBudget is x, but in the sample (make test) crashing after about
// samplePoints call prefixes, spread evenly, in the scenarios of more calls
// (Explorer.Points): claim/32 (401 calls) made 7,548 of the sample's 10,135
// crash states and most of TestCrashStates' time, and TestConcurrentRepairs'
// two repairs make 1,083 calls; TestCrashStatesGoOn kills after the
// prefixes likewise. The default run (make test-long) crashes (and kills)
// after every prefix of them. (The budget does not bound the states: each
// crash point has its systematic ones whatever the budget.)
func sampleBudget(x *Explorer) *Explorer {
	const samplePoints = 100
	if !isSample() {
		return x
	}
	small := *x
	small.Points = samplePoints
	return &small
}

func allScenarios() []*Scenario {
	return append(append(append(append(append(WorkScenarios(), AbandonedScenarios()...), GroupScenarios()...), FsckScenarios()...), QueueScenarios()...), CampaignScenarios()...)
}

// TestCrashStatesFullDisk explores the full-disk scenarios: renewals and
// completes through the reserve, in every crash state, and a claim that
// must be refused. Every renewal and complete of a live lease must succeed
// while the reserve lasts.
func TestCrashStatesFullDisk(t *testing.T) {
	t.Parallel()
	x := explorer()
	total, spared := 0, 0
	var rows []string
	var tally Tally
	for _, sc := range FullDiskScenarios() {
		res, err := x.Explore(sc)
		if err != nil {
			t.Fatalf("%s: %v", sc.Name, err)
		}
		run, _, err := Record(sc, nil)
		if err != nil {
			t.Fatal(err)
		}
		overwrites := 0
		for _, c := range run.Rec.Calls() {
			if c.Op == "overwrite" && c.Err == nil {
				overwrites++
			}
		}
		switch {
		case strings.Contains(sc.Name, "claim"):
			if run.Exit() != 4 || overwrites != 0 || len(run.acks) != 0 {
				t.Errorf("%s: exit %d, %d overwrites, %d acks; want exit 4 and nothing written", sc.Name, run.Exit(), overwrites, len(run.acks))
			}
		case run.Exit() != 0 || overwrites == 0:
			t.Errorf("%s: exit %d with %d records written through spares; want exit 0, every record through the reserve", sc.Name, run.Exit(), overwrites)
		}
		if overwrites > 0 {
			spared += res.States
		}
		total += res.States
		rows = append(rows, fmt.Sprintf("| %s | %d | %d | %d | %d | %d |", res.Scenario, res.Calls, res.CrashPoints, res.States, res.Acks, overwrites))
		tally.Add(res.Violations...)
	}
	report(t, &tally)
	t.Logf("full-disk crash states (budget %d per crash point):\n| operation | calls | crash points | distinct states | acks | records through spares |\n|---|---|---|---|---|---|\n%s\ntotal %d (%d in scenarios that used the reserve)", x.Budget, strings.Join(rows, "\n"), total, spared)
}

// TestCrashStatesGoOn kills the operations that finish items (complete,
// publish, release --failed, and the claims and adds that meet finished
// items' queue entries) after each of their calls and lets the campaign go
// on from there without a repair: a kill at any step of a finish must
// leave only debris, so the summary counts right and fsck finds no error
// (issue 36).
func TestCrashStatesGoOn(t *testing.T) {
	t.Parallel()
	x := sampleBudget(&Explorer{Repair: repairer(), Budget: 1, Seed: 1, GoOn: true})
	var tally Tally
	kills := 0
	for _, sc := range append(append(WorkScenarios(), QueueScenarios()...), CampaignScenarios()...) {
		res, err := x.Explore(sc)
		if err != nil {
			t.Fatalf("%s: %v", sc.Name, err)
		}
		kills += res.CrashPoints
		tally.Add(res.Violations...)
	}
	report(t, &tally)
	t.Logf("%d kill points, the campaign gone on from each without a repair", kills)
}

// TestCrashStatesWorkItem explores one item of lease work (the claim from
// the queue, its staging directory, leased straight to done or the publish
// of what was staged: docs/performance.md, the durability budget) in every
// crash state after every call, in the sample too (TestCrashStates samples
// every third scenario), and kills it after every call with the campaign
// going on without a repair: no item lost, none done twice, the tally
// right after the repair.
func TestCrashStatesWorkItem(t *testing.T) {
	t.Parallel()
	var items []*Scenario
	for _, sc := range QueueScenarios() {
		if strings.HasPrefix(sc.Name, "lease work item") {
			items = append(items, sc)
		}
	}
	if len(items) != 2 {
		t.Fatalf("%d lease work item scenarios, want 2", len(items))
	}
	var tally Tally
	var rows []string
	for _, x := range []*Explorer{explorer(), {Repair: repairer(), Budget: 1, Seed: 1, GoOn: true}} {
		for _, sc := range items {
			res, err := x.Explore(sc)
			if err != nil {
				t.Fatalf("%s: %v", sc.Name, err)
			}
			if res.CrashPoints == 0 || res.Acks == 0 {
				t.Errorf("%s: %d crash points, %d acks", sc.Name, res.CrashPoints, res.Acks)
			}
			rows = append(rows, fmt.Sprintf("| %s | %v | %d | %d | %d | %d |", res.Scenario, x.GoOn, res.Calls, res.CrashPoints, res.States, res.Acks))
			tally.Add(res.Violations...)
		}
	}
	report(t, &tally)
	t.Logf("lease work item:\n| operation | killed, gone on | calls | crash points | distinct states | acks |\n|---|---|---|---|---|---|\n%s", strings.Join(rows, "\n"))
}
