package safety

// The porcupine model of one work ID that TestLinearizability checks
// histories against (linearizability_test.go), and the histories it must
// reject.

import (
	"fmt"
	"sort"
	"strconv"
	"testing"

	"github.com/anishathalye/porcupine"

	"github.com/leasetool/lease/leasefmt"
)

// The model of one work ID (porcupine partitions the history by ID).
//
// State: the record as the table holds it. Every operation is judged at
// its process's clock (--now, the wall clock when the process was
// started; a paused process keeps its clock, which is the hazard under
// test). Operations whose process was killed have an unknown outcome: they
// may have taken effect or not.
type leaseState struct {
	Token   int64
	Status  leasefmt.Status // "" when there is no record
	Expires float64
	Publish string // the result a committing or done record names
}

func (s leaseState) live(now float64) bool {
	return (s.Status == leasefmt.Leased || s.Status == leasefmt.Committing) && now < s.Expires
}

type leaseInput struct {
	Op      string // claim, renew, verify, release, complete, publish (complete --publish)
	ID      leasefmt.ID
	Token   int64
	Now     float64
	TTL     float64
	Owner   string
	Publish string // the staged name of a publish
}

type leaseOutput struct {
	Unknown bool   // the process was killed: the outcome is unknown
	Reason  string // "ok" or the reason word
	Token   int64  // the token granted (claim ok)
}

// fenced is commit's fencing check, in its order of reasons.
func (s leaseState) fenced(tok int64, now float64) string {
	switch {
	case s.Status == "":
		return "missing"
	case s.Token != tok:
		return "stale-token"
	case s.Status == leasefmt.Done:
		return "done"
	case s.Status == leasefmt.Released:
		return "released"
	case !s.live(now):
		return "expired"
	}
	return "ok"
}

// leaseStep lists the states an operation can lead to with the output seen.
func leaseStep(st, in, out any) []any {
	s := st.(leaseState)
	i := in.(leaseInput)
	o := out.(leaseOutput)
	var next []any
	// possible: (reason the operation would report at this point, new state)
	type effect struct {
		reason string
		to     leaseState
	}
	var effects []effect
	switch i.Op {
	case "claim":
		switch {
		case s.Status == leasefmt.Done:
			effects = append(effects, effect{"done", s})
		case s.live(i.Now):
			effects = append(effects, effect{"held", s})
		case s.Status == leasefmt.Committing && s.Publish != "":
			// An abandoned publish is settled, never simply taken over:
			// rolled forward to done when its result reached public/ (the
			// publisher was killed between the move and done), else rolled
			// back, and then claimed.
			done := s
			done.Status = leasefmt.Done
			effects = append(effects, effect{"done", done},
				effect{"ok", leaseState{s.Token + 1, leasefmt.Leased, i.Now + i.TTL, ""}})
		default:
			effects = append(effects, effect{"ok", leaseState{s.Token + 1, leasefmt.Leased, i.Now + i.TTL, ""}})
		}
	case "renew", "verify", "release":
		r := s.fenced(i.Token, i.Now)
		to := s
		if r == "ok" && i.Op == "renew" {
			to.Expires = i.Now + i.TTL
		}
		if r == "ok" && i.Op == "release" {
			to.Status, to.Expires, to.Publish = leasefmt.Released, i.Now, ""
		}
		effects = append(effects, effect{r, to})
	case "complete":
		if s.Status == leasefmt.Done && s.Token == i.Token && s.Publish == "" {
			effects = append(effects, effect{"ok", s}) // a retry
			break
		}
		r := s.fenced(i.Token, i.Now)
		if r != "ok" {
			effects = append(effects, effect{r, s})
			break
		}
		committing := s
		committing.Status, committing.Publish = leasefmt.Committing, ""
		done := committing
		done.Status = leasefmt.Done
		effects = append(effects, effect{"ok", done})
		// committing was written, then the lock was let go; the done step
		// can then find the token changed (another claim of an expired
		// committing record) and report that.
		for _, why := range []string{"stale-token", "held", "missing"} {
			effects = append(effects, effect{why, committing})
		}
	case "publish":
		// One lock throughout: committing (naming the result), the move,
		// done. A killed publish leaves any of the three states.
		committing := s
		committing.Status, committing.Publish = leasefmt.Committing, i.Publish
		done := committing
		done.Status = leasefmt.Done
		switch r := s.fenced(i.Token, i.Now); {
		case s.Token == i.Token && s.Publish == i.Publish && s.Status == leasefmt.Done:
			effects = append(effects, effect{"ok", s}) // a retry
		case s.Token == i.Token && s.Publish == i.Publish && s.Status == leasefmt.Committing:
			effects = append(effects, effect{"ok", done}) // resumed
		case r != "ok":
			effects = append(effects, effect{r, s})
		case s.Status == leasefmt.Committing && s.Publish != i.Publish:
			effects = append(effects, effect{"held", s})
		default:
			effects = append(effects, effect{"ok", done})
			if o.Unknown {
				effects = append(effects, effect{"", committing})
			}
		}
	}
	for _, e := range effects {
		switch {
		case o.Unknown:
			next = append(next, e.to)
		case o.Reason == e.reason && (i.Op != "claim" || o.Reason != "ok" || o.Token == e.to.Token):
			next = append(next, e.to)
		}
	}
	if o.Unknown {
		next = append(next, s) // it may not have happened at all
	}
	return next
}

var leaseModel = porcupine.NondeterministicModel{
	Partition: func(history []porcupine.Operation) [][]porcupine.Operation {
		by := map[leasefmt.ID][]porcupine.Operation{}
		var ids []leasefmt.ID
		for _, op := range history {
			id := op.Input.(leaseInput).ID
			if _, ok := by[id]; !ok {
				ids = append(ids, id)
			}
			by[id] = append(by[id], op)
		}
		sort.Slice(ids, func(a, b int) bool { return ids[a] < ids[b] })
		out := make([][]porcupine.Operation, len(ids))
		for i, id := range ids {
			out[i] = by[id]
		}
		return out
	},
	Init: func() []any { return []any{leaseState{}} },
	Step: leaseStep,
	DescribeOperation: func(in, out any) string {
		i, o := in.(leaseInput), out.(leaseOutput)
		res := o.Reason
		if o.Unknown {
			res = "unknown (killed)"
		} else if o.Token != 0 {
			res += " " + strconv.FormatInt(o.Token, 10)
		}
		return fmt.Sprintf("%s %s tok=%d now=%.3f -> %s", i.Op, i.ID.Short(), i.Token, i.Now, res)
	},
	DescribeState: func(st any) string {
		s := st.(leaseState)
		return fmt.Sprintf("{%d %s until %.3f %s}", s.Token, s.Status, s.Expires, s.Publish)
	},
}

// TestLeaseModelRejects: the model must refuse the histories it exists to
// catch, or a clean run proves nothing.
func TestLeaseModelRejects(t *testing.T) {
	id := TestID(1)
	op := func(client int, call, ret int64, in leaseInput, out leaseOutput) porcupine.Operation {
		in.ID = id
		return porcupine.Operation{ClientId: client, Input: in, Output: out, Call: call, Return: ret}
	}
	ok := func(tok int64) leaseOutput { return leaseOutput{Reason: "ok", Token: tok} }
	cases := []struct {
		name    string
		history []porcupine.Operation
		want    bool
	}{
		{"two live holders", []porcupine.Operation{
			op(0, 0, 10, leaseInput{Op: "claim", Now: 100, TTL: 10}, ok(1)),
			op(1, 20, 30, leaseInput{Op: "claim", Now: 105, TTL: 10}, ok(2)),
		}, false},
		{"claim after expiry", []porcupine.Operation{
			op(0, 0, 10, leaseInput{Op: "claim", Now: 100, TTL: 10}, ok(1)),
			op(1, 20, 30, leaseInput{Op: "claim", Now: 111, TTL: 10}, ok(2)),
		}, true},
		{"token reused", []porcupine.Operation{
			op(0, 0, 10, leaseInput{Op: "claim", Now: 100, TTL: 10}, ok(1)),
			op(1, 20, 30, leaseInput{Op: "claim", Now: 111, TTL: 10}, ok(1)),
		}, false},
		{"stale token completes", []porcupine.Operation{
			op(0, 0, 10, leaseInput{Op: "claim", Now: 100, TTL: 10}, ok(1)),
			op(1, 20, 30, leaseInput{Op: "claim", Now: 111, TTL: 10}, ok(2)),
			op(0, 40, 50, leaseInput{Op: "complete", Token: 1, Now: 112}, ok(0)),
		}, false},
		{"stale token verifies", []porcupine.Operation{
			op(0, 0, 10, leaseInput{Op: "claim", Now: 100, TTL: 10}, ok(1)),
			op(1, 20, 30, leaseInput{Op: "claim", Now: 111, TTL: 10}, ok(2)),
			op(0, 40, 50, leaseInput{Op: "verify", Token: 1, Now: 105}, ok(0)),
		}, false},
		{"killed claim may have happened", []porcupine.Operation{
			op(0, 0, 10, leaseInput{Op: "claim", Now: 100, TTL: 10}, leaseOutput{Unknown: true}),
			op(1, 20, 30, leaseInput{Op: "claim", Now: 105, TTL: 10}, leaseOutput{Reason: "held"}),
		}, true},
		{"killed claim may not have happened", []porcupine.Operation{
			op(0, 0, 10, leaseInput{Op: "claim", Now: 100, TTL: 10}, leaseOutput{Unknown: true}),
			op(1, 20, 30, leaseInput{Op: "claim", Now: 105, TTL: 10}, ok(1)),
		}, true},
		{"renew of an expired lease", []porcupine.Operation{
			op(0, 0, 10, leaseInput{Op: "claim", Now: 100, TTL: 10}, ok(1)),
			op(0, 20, 30, leaseInput{Op: "renew", Token: 1, Now: 111, TTL: 10}, ok(0)),
		}, false},
	}
	model := leaseModel.ToModel()
	for _, tc := range cases {
		if got := porcupine.CheckOperations(model, tc.history); got != tc.want {
			t.Errorf("%s: linearizable = %v, want %v", tc.name, got, tc.want)
		}
	}
}
