package runundo

import (
	"context"
	"encoding/json"
	"errors"
	"slices"

	"github.com/mcp-changeset/changeset-go/internal/undoplan"
	"github.com/mcp-changeset/changeset-go/ledger"
)

// The real undo of a run carries out a plan made by Plan and claimed by
// the pipeline (pipeline.Engine.ClaimRun): the plan that was reviewed, or less, never more. It acts only
// on the steps the plan undoes or closes whose changes are allowed (all of
// them on the token and approval paths; those a person confirmed on the
// dashboard), and checks each again right before its inverse, so a planned
// step whose resource changed since is skipped and reported instead. It
// never walks the run afresh: a change the plan kept stays kept even if its
// state matches by then, and a change that joined the run after the plan
// is left alone and reported.

// execution is the state of one Execute.
type execution struct {
	e     *Engine
	ctx   context.Context
	runID string
	by    string
	pass  *undoplan.Pass
	// undoing holds the changes this execution still means to undo or
	// close: a dependency check treats every other applied change as kept.
	undoing map[string]bool
}

// Execute carries out the steps of plan, the claimed plan of run runID,
// that allowed names (the reviewed plan's changes) in one pass newest
// first, by the same rules as the plan (undoplan.Pass), each checked
// against the state read right before its inverse; by is who undoes the
// run. It returns what happened, with the changes that joined the run
// since appended. A reviewed change the pass now keeps is reported as not
// carried out.
func (e *Engine) Execute(ctx context.Context, runID string, plan *undoplan.Plan, allowed map[string]bool, by string) (*undoplan.Plan, error) {
	x := &execution{e: e, ctx: ctx, runID: runID, by: by, pass: undoplan.NewPass(e.Now(), nil, e.Voice), undoing: map[string]bool{}}
	steps := slices.Clone(plan.Steps)
	allowed = wholeGroups(steps, allowed)
	for i := range steps {
		s := &steps[i]
		s.Reviewed = allowed[s.C.ID]
		switch {
		case s.CarriesOut() && !s.Reviewed:
			x.pass.Keep(s, e.Voice.ReasonNotReviewed(), nil)
		case s.CarriesOut():
			x.undoing[s.C.ID] = true
		}
	}
	x.closeNoNetGroups(steps)
	for i := 0; i < len(steps); {
		if !steps[i].Op.Tx {
			x.external(&steps[i])
			i++
			continue
		}
		j := i
		for j < len(steps) && steps[j].Op.Tx {
			j++
		}
		x.txSegment(steps[i:j])
		i = j
	}
	late, err := x.lateChanges(steps)
	if err != nil {
		return nil, err
	}
	return &undoplan.Plan{Steps: append(steps, late...), Hash: plan.Hash}, nil
}

// keep turns a step the execution does not carry out into a skip.
func (x *execution) keep(s *undoplan.Step, reason string, drift []undoplan.Drift) {
	x.pass.Keep(s, reason, drift)
	delete(x.undoing, s.C.ID)
}

// ready applies the pass's rules to a reviewed step of the plan's undos,
// with state read by observe right before its inverse, and reports
// whether the inverse may run. A step it does not ready is kept (or
// irreversible by now) and settled. callerChecks says that the caller
// checks the state of a step it undoes itself, in the transaction the
// inverse runs in (undoIn): ready then reads the state only to say what
// moved for a step it keeps.
func (x *execution) ready(s *undoplan.Step, observe func() (json.RawMessage, error), callerChecks bool) bool {
	if x.pass.Precheck(s) && (s.Verdict != undoplan.Undo || !callerChecks) {
		cur, err := observe()
		switch {
		case err != nil && s.Verdict == undoplan.Undo:
			x.keep(s, x.e.Host.Unreadable(x.ctx, s.C, true, err), nil)
		case err == nil:
			x.pass.Check(s, undoplan.Split(s, cur), nil, undoplan.Executing)
		}
	}
	if s.Verdict != undoplan.Undo {
		delete(x.undoing, s.C.ID)
		x.pass.Settle(s)
		return false
	}
	return true
}

// external carries out one step of an ordinary operation.
func (x *execution) external(s *undoplan.Step) {
	if !s.Reviewed || s.Verdict != undoplan.Undo {
		x.pass.Settle(s)
		return
	}
	c := s.C
	if !x.ready(s, func() (json.RawMessage, error) { return x.e.Host.Observe(x.ctx, nil, c) }, false) {
		return
	}
	err := x.e.Host.Undo(x.ctx, c, x.by, x.undoing)
	var held *HeldError
	switch {
	case errors.Is(err, ErrStateChanged): // changed between the check above and the claim
		now, _ := x.e.Host.Observe(x.ctx, nil, c)
		if x.pass.Check(s, undoplan.Split(s, now), nil, undoplan.Executing) {
			x.keep(s, undoplan.ChangedSinceReview(x.e.Voice, nil), nil)
		}
	case errors.As(err, &held):
		x.keep(s, held.Reason, nil)
	case err != nil:
		s.Failed = x.e.undoFailed(err)
	}
	delete(x.undoing, c.ID)
	x.pass.Settle(s)
}

// wholeGroups returns allowed without the no-net-change steps of any
// resource whose group was reviewed only in part: such a group closes as a
// whole or not at all.
func wholeGroups(steps []undoplan.Step, allowed map[string]bool) map[string]bool {
	partial := map[string]bool{}
	for _, s := range steps {
		if s.Verdict == undoplan.NoNetChange && !allowed[s.C.ID] {
			partial[s.Group()] = true
		}
	}
	if len(partial) == 0 {
		return allowed
	}
	out := make(map[string]bool, len(allowed))
	for _, s := range steps {
		if allowed[s.C.ID] && !(s.Verdict == undoplan.NoNetChange && partial[s.Group()]) {
			out[s.C.ID] = true
		}
	}
	return out
}

// closeNoNetGroups closes the no-net-change steps of ordinary operations,
// resource by resource: the resource is checked once, and if it is still
// where the run found it, every change of the group is closed in one ledger
// transaction; otherwise every one is kept. A group is never closed in
// part, whatever lands meanwhile.
func (x *execution) closeNoNetGroups(steps []undoplan.Step) {
	groups := map[string][]int{}
	var order []string
	for i := range steps {
		s := &steps[i]
		if s.Op.Tx || s.Verdict != undoplan.NoNetChange || !s.Reviewed {
			continue
		}
		if _, ok := groups[s.Group()]; !ok {
			order = append(order, s.Group())
		}
		groups[s.Group()] = append(groups[s.Group()], i)
	}
	for _, g := range order {
		idx := groups[g]
		first := &steps[idx[0]]
		cur, err := x.e.Host.Observe(x.ctx, nil, first.C)
		if err != nil || string(cur) != string(first.NetState) {
			drift := undoplan.DriftOf(first.NetState, cur)
			for _, i := range idx {
				x.keep(&steps[i], undoplan.ChangedSinceReview(x.e.Voice, drift), drift)
			}
			continue
		}
		err = x.e.Ledger.WithTx(x.ctx, func(tx *ledger.Tx) error {
			for _, i := range idx {
				if err := x.e.closeIn(tx, steps[i].C, x.runID, x.by); err != nil {
					return err
				}
			}
			return nil
		})
		for _, i := range idx {
			s := &steps[i]
			s.Closed = true
			delete(x.undoing, s.C.ID)
			if err != nil {
				s.Failed = x.e.undoFailed(err)
				continue
			}
			closed := *s.C // as committed by closeIn
			closed.Status = ledger.Undone
			x.e.Host.Transition(x.ctx, &closed, ledger.Applied, x.by)
		}
	}
}

// txSegment carries out consecutive steps of transactional operations in one
// transaction, each checked against the state the transaction has reached.
func (x *execution) txSegment(steps []undoplan.Step) {
	tx, err := x.e.Ledger.Begin(x.ctx)
	if err != nil {
		x.failAll(steps, err)
		return
	}
	defer tx.Rollback()
	for i := range steps {
		s := &steps[i]
		if !s.Reviewed || !s.CarriesOut() {
			x.pass.Settle(s)
			continue
		}
		if !x.e.Host.Op(s.C).Registered {
			x.keep(s, x.e.Voice.ReasonOperationGone(s.C.Action), nil)
			x.pass.Settle(s)
			continue
		}
		if s.Verdict == undoplan.NoNetChange {
			if cur, err := x.e.Host.Observe(x.ctx, tx, s.C); err != nil || string(cur) != string(s.NetState) {
				drift := undoplan.DriftOf(s.NetState, cur)
				x.keep(s, undoplan.ChangedSinceReview(x.e.Voice, drift), drift)
			} else if err := x.e.closeIn(tx, s.C, x.runID, x.by); err != nil {
				s.Failed = x.e.undoFailed(err)
			}
			x.pass.Settle(s)
			continue
		}
		if !x.ready(s, func() (json.RawMessage, error) { return x.e.Host.Observe(x.ctx, tx, s.C) }, true) {
			continue
		}
		reason, err := x.e.Hold(x.ctx, tx, s.C, x.undoing)
		switch {
		case err != nil:
			s.Failed = x.e.undoFailed(err)
		case reason != "":
			x.keep(s, reason, nil)
		default:
			// undoIn checks the state in this transaction, right before
			// the inverse.
			x.e.undoIn(x.ctx, tx, s, x.by, func(s *undoplan.Step, found json.RawMessage) bool {
				return x.pass.Check(s, undoplan.Split(s, found), nil, undoplan.Executing)
			})
		}
		delete(x.undoing, s.C.ID)
		x.pass.Settle(s)
	}
	if err := tx.Commit(); err != nil {
		x.failAll(steps, err)
		return
	}
	for _, s := range steps {
		delete(x.undoing, s.C.ID)
		switch {
		case s.Reviewed && s.Failed != "" && s.Verdict == undoplan.Undo:
			// The segment's savepoint rolled the undo back: nothing was written.
			x.e.Host.RecordFailure(x.ctx, s.C, x.by, s.Failed)
		case s.Reviewed && s.Failed == "" && s.CarriesOut():
			undone := *s.C // as committed by undoIn or closeIn
			undone.Status = ledger.Undone
			x.e.Host.Transition(x.ctx, &undone, ledger.Applied, x.by)
		}
	}
}

// failAll marks every step of a segment that was to run as failed with err.
func (x *execution) failAll(steps []undoplan.Step, err error) {
	for i := range steps {
		if steps[i].Reviewed && steps[i].CarriesOut() {
			steps[i].Failed = x.e.undoFailed(err)
		}
		delete(x.undoing, steps[i].C.ID)
	}
}

// lateChanges returns a step for every change of the run that is applied
// or in flight but not in the plan: it joined after the plan was made.
func (x *execution) lateChanges(steps []undoplan.Step) ([]undoplan.Step, error) {
	all, err := x.e.Ledger.Changes(x.ctx, ledger.ChangeFilter{RunID: x.runID})
	if err != nil {
		return nil, err
	}
	inPlan := map[string]bool{}
	for _, s := range steps {
		inPlan[s.C.ID] = true
	}
	var late []*ledger.Change
	for _, c := range all {
		if !inPlan[c.ID] && (c.Status == ledger.Applied || c.Status.InFlight()) {
			late = append(late, c)
		}
	}
	applied, err := AppliedOrder(x.ctx, x.e.Ledger, x.runID)
	if err != nil {
		return nil, err
	}
	NewestFirst(late, applied)
	out := make([]undoplan.Step, 0, len(late))
	for _, c := range late {
		out = append(out, undoplan.Step{C: c, Op: x.e.Host.Op(c), Keys: undoplan.Keys(c), Verdict: undoplan.Skip, Reason: x.e.Voice.ReasonLate(), Late: true})
	}
	return out, nil
}
