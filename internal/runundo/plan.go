package runundo

import (
	"context"
	"encoding/json"
	"fmt"
	"slices"

	"github.com/mcp-changeset/changeset-go/internal/undoplan"
	"github.com/mcp-changeset/changeset-go/ledger"
)

// Plan is the one walk behind every undo of a run: the dry run shows its
// plan, and the real undo carries out that plan (see [Engine.Execute]),
// never a new walk. It visits applied, the run's changes the undo must
// consider, newest first (see [NewestFirst]), and decides each by the
// rules of package undoplan. It writes nothing.
//
// Ordinary operations are decided from the stored snapshots and one
// observation of each resource's current state: the state a change is
// checked against is the "before" of the newer change of the run planned
// for undo on the same resource, or else the current state. Consecutive
// changes of transactional operations are really undone inside one ledger transaction,
// each checked against the state the transaction has reached, and the
// transaction rolls back.
//
// Holding back an undo that would remove what a kept change depends on
// keeps that change's resources too, so Plan walks again until no new
// change is held back.
func (e *Engine) Plan(ctx context.Context, runID string, applied []*ledger.Change) (*undoplan.Plan, error) {
	obs := map[string]stateRead{} // observations, shared by every walk
	held := map[string]string{}   // change ID → why a dependency holds it
	for range len(applied) + 1 {
		w := &walk{e: e, ctx: ctx, obs: obs}
		w.steps = w.newSteps(applied)
		pass := undoplan.NewPass(e.Now(), held, e.Voice)
		if err := w.plan(pass); err != nil {
			return nil, err
		}
		more, err := e.holdDependencies(ctx, w.steps, held)
		if err != nil {
			return nil, err
		}
		if !more {
			plan := &undoplan.Plan{Steps: w.steps}
			plan.Hash = plan.Digest()
			return plan, nil
		}
	}
	return nil, fmt.Errorf("run %s: the dependencies of its changes did not settle", runID) // cannot happen: each walk holds one more change
}

// walk is the state of one planning walk.
type walk struct {
	e     *Engine
	ctx   context.Context
	steps []undoplan.Step      // newest first
	obs   map[string]stateRead // each change's observed state, read once
}

type stateRead struct {
	state json.RawMessage
	err   error
}

// newSteps makes a step of each change, with its resources, and marks the
// resources the run left where it found them (undoplan.NoNet).
//
// A change that names no resource would be its own resource, but then the
// plan could not know that two edits of one thing interact (theme
// light→dark, then dark→blue). So an unnamed change is related to the
// nearest newer change of the run whose "before" equals its "after" and
// whose resource reads the same state now: the newer change most likely
// picked the thing up where this one left it. The relation only ever makes
// the plan expect more of the state; every undo is checked again right
// before it runs, so a wrong guess can only turn a planned undo into a
// reported skip. The report notes each one.
func (w *walk) newSteps(applied []*ledger.Change) []undoplan.Step {
	steps := make([]undoplan.Step, len(applied))
	byBefore := map[string][]int{} // newer steps by their before state, newest first
	for i, c := range applied {
		o := w.e.Host.Op(c)
		s := undoplan.Step{C: c, Op: o, Keys: undoplan.Keys(c)}
		if c.Resource == "" && c.Resources == nil && c.After != nil && o.Observes {
			cands := byBefore[string(c.After)]
			for j := len(cands) - 1; j >= 0; j-- { // nearest first
				b := &steps[cands[j]]
				mine, err1 := w.observe(&s)
				theirs, err2 := w.observe(b)
				if err1 == nil && err2 == nil && string(mine) == string(theirs) {
					s.Keys, s.LinkedTo = b.Keys, b.C.ID
					break
				}
			}
		}
		steps[i] = s
		if c.Before != nil && o.Observes && c.Resources == nil {
			byBefore[string(c.Before)] = append(byBefore[string(c.Before)], i)
		}
	}
	w.steps = steps
	undoplan.NoNet(steps, w.current)
	return steps
}

// observe reads the current state of what s's change touches, once per
// planning. A transactional operation's Observe runs in a transaction that rolls back.
func (w *walk) observe(s *undoplan.Step) (json.RawMessage, error) {
	if r, ok := w.obs[s.C.ID]; ok {
		return r.state, r.err
	}
	var r stateRead
	r.state, r.err = w.e.Host.Observe(w.ctx, nil, s.C)
	w.obs[s.C.ID] = r
	return r.state, r.err
}

// current is the current state of the resource key, read through the
// newest change of the run that touches it.
func (w *walk) current(key string) (json.RawMessage, error) {
	for i := range w.steps {
		s := &w.steps[i]
		if slices.Contains(s.Keys, key) {
			state, err := w.observe(s)
			if err != nil {
				return nil, err
			}
			return undoplan.Split(s, state)[key], nil
		}
	}
	return nil, ErrNoObserve
}

// plan decides every step, in one pass newest first. Consecutive steps of
// transactional operations are decided inside one transaction that rolls back.
func (w *walk) plan(pass *undoplan.Pass) error {
	for i := 0; i < len(w.steps); {
		if !w.steps[i].Op.Tx {
			w.decide(pass, &w.steps[i])
			i++
			continue
		}
		j := i
		for j < len(w.steps) && w.steps[j].Op.Tx {
			j++
		}
		if err := w.txSegment(pass, w.steps[i:j]); err != nil {
			return err
		}
		i = j
	}
	return nil
}

// decide decides one ordinary operation's step from the snapshots: each
// resource is expected in the state the newer undos left it in, or else
// in its current state.
func (w *walk) decide(pass *undoplan.Pass, s *undoplan.Step) {
	if pass.Precheck(s) {
		found, by := map[string]json.RawMessage{}, map[string]string{}
		for _, k := range s.Keys {
			if e, ok := pass.Expected(k); ok {
				found[k], by[k] = e.State, e.By
				continue
			}
			cur, err := w.current(k)
			if err != nil {
				if s.Verdict == undoplan.Undo {
					s.Verdict, s.Reason = undoplan.Skip, w.e.Host.Unreadable(w.ctx, s.C, false, err)
				}
				pass.Settle(s)
				return
			}
			found[k] = cur
		}
		pass.Check(s, found, by, undoplan.Planning)
	}
	if s.Verdict == undoplan.Undo {
		s.Warnings = s.C.Warnings
	}
	pass.Settle(s)
}

// txSegment plans consecutive changes of transactional operations by undoing them
// inside one transaction that then rolls back: each is checked against the
// state the transaction has reached and undone under a savepoint.
func (w *walk) txSegment(pass *undoplan.Pass, steps []undoplan.Step) error {
	tx, err := w.e.Ledger.Begin(w.ctx)
	if err != nil {
		return err
	}
	defer tx.Rollback() // the plan changes nothing
	for i := range steps {
		s := &steps[i]
		if pass.Precheck(s); s.Verdict == undoplan.Undo {
			w.e.undoIn(w.ctx, tx, s, "", func(s *undoplan.Step, found json.RawMessage) bool {
				by := map[string]string{}
				for _, k := range s.Keys {
					if e, ok := pass.Expected(k); ok {
						by[k] = e.By
					}
				}
				return pass.Check(s, undoplan.Split(s, found), by, undoplan.Planning)
			})
		}
		pass.Settle(s)
	}
	return nil
}
