package changeset

import (
	"context"
	"encoding/json"
	"errors"
	"log/slog"
	"slices"
	"time"

	"github.com/mcp-changeset/changeset-go/internal/canonjson"
	"github.com/mcp-changeset/changeset-go/internal/undoplan"
	"github.com/mcp-changeset/changeset-go/ledger"
)

// The real undo of a run carries out a plan made by planRun and claimed by
// claimRun: the plan that was reviewed, or less, never more. It acts only
// on the steps the plan undoes or closes whose changes are allowed (all of
// them on the token and approval paths; those a person confirmed on the
// dashboard), and checks each again right before its inverse, so a planned
// step whose resource changed since is skipped and reported instead. It
// never walks the run afresh: a change the plan kept stays kept even if its
// state matches by then, and a change that joined the run after the plan
// is left alone and reported.

// execution is the state of one executePlan.
type execution struct {
	g     *Guard
	ctx   context.Context
	runID string
	by    string
	pass  *undoplan.Pass
	// undoing holds the changes this execution still means to undo or
	// close: a dependency check treats every other applied change as kept.
	undoing map[string]bool
}

// executeRun carries out plan for the claimed run r and stores the report
// and the run's final status: undone when nothing of the run is left,
// partially_undone when changes were kept, and open again when changes
// joined the run after the plan (a new dry run can review them). The run
// never stays undoing: if the final write fails, the run is put back to
// open so that a retry can plan again.
func (g *Guard) executeRun(ctx context.Context, r *ledger.Run, plan *undoplan.Plan, allowed map[string]bool, by string) (*RunReport, error) {
	ctx = context.WithoutCancel(ctx) // a claimed run must reach a final status
	done, err := g.executePlan(ctx, r, plan, allowed, by)
	if err != nil {
		g.releaseRun(ctx, r.ID, err)
		return nil, err
	}
	rep := reportOf(g.voice, done, r.ID, false)
	rep.UndoneBy = by
	status := ledger.RunPartiallyUndone
	switch {
	case done.Late():
		status = ledger.RunOpen
	case done.Complete():
		status = ledger.RunUndone
	}
	rep.Status = string(status)
	stored, err := canonjson.Marshal(rep)
	if err == nil {
		err = g.ledger.WithLazyTx(ctx, func(tx *ledger.Tx) error { // the run's report: not a claim
			cur, err := tx.Run(r.ID)
			if err != nil {
				return err
			}
			cur.Status, cur.Report, cur.UpdatedAt = status, stored, g.now()
			if status == ledger.RunOpen {
				cur.UndoneBy = ""
			}
			return tx.UpdateRun(cur, ledger.RunUndoing)
		})
	}
	if err != nil {
		g.releaseRun(ctx, r.ID, err)
		return nil, err
	}
	g.log.Info("run undone", "run_id", r.ID, "status", string(status), "by", by,
		"undone", len(rep.Undone), "skipped", len(rep.Skipped), "not_carried_out", len(rep.NotCarriedOut))
	return rep, nil
}

// releaseRun puts a run whose undo could not finish back to open, so that a
// retry can plan it again; cause is why it could not finish. If even that
// fails the run stays undoing, and `mcp-changeset check` reports it.
func (g *Guard) releaseRun(ctx context.Context, id string, cause error) {
	err := g.retryBusy(ctx, func(tx *ledger.Tx) error {
		cur, err := tx.Run(id)
		if err != nil || cur.Status != ledger.RunUndoing {
			return err
		}
		cur.Status, cur.UndoneBy, cur.UpdatedAt = ledger.RunOpen, "", g.now()
		return tx.UpdateRun(cur, ledger.RunUndoing)
	})
	if err != nil {
		g.log.Error("run left undoing: its undo failed and the run could not be released", "run_id", id, "cause", cause, "err", err)
		return
	}
	g.log.Warn("run undo stopped; the run is open again", "run_id", id, "cause", cause)
}

// executePlan carries out the steps of plan that allowed names (the
// reviewed plan's changes) in one pass newest first, by the same rules as
// the plan (undoplan.Pass), each checked against the state read right
// before its inverse. It returns what happened, with the changes that
// joined the run since appended. A reviewed change the pass now keeps is
// reported as not carried out.
func (g *Guard) executePlan(ctx context.Context, r *ledger.Run, plan *undoplan.Plan, allowed map[string]bool, by string) (*undoplan.Plan, error) {
	e := &execution{g: g, ctx: ctx, runID: r.ID, by: by, pass: undoplan.NewPass(g.now(), nil, g.voice), undoing: map[string]bool{}}
	steps := slices.Clone(plan.Steps)
	allowed = wholeGroups(steps, allowed)
	for i := range steps {
		s := &steps[i]
		s.Reviewed = allowed[s.C.ID]
		switch {
		case s.CarriesOut() && !s.Reviewed:
			e.pass.Keep(s, g.voice.ReasonNotReviewed(), nil)
		case s.CarriesOut():
			e.undoing[s.C.ID] = true
		}
	}
	e.closeNoNetGroups(steps)
	for i := 0; i < len(steps); {
		if !steps[i].Op.Tx {
			e.external(&steps[i])
			i++
			continue
		}
		j := i
		for j < len(steps) && steps[j].Op.Tx {
			j++
		}
		e.txSegment(steps[i:j])
		i = j
	}
	late, err := e.lateChanges(steps)
	if err != nil {
		return nil, err
	}
	return &undoplan.Plan{Steps: append(steps, late...), Hash: plan.Hash}, nil
}

// keep turns a step the execution does not carry out into a skip.
func (e *execution) keep(s *undoplan.Step, reason string, drift []undoplan.Drift) {
	e.pass.Keep(s, reason, drift)
	delete(e.undoing, s.C.ID)
}

// ready applies the pass's rules to a reviewed step of the plan's undos,
// with state read by observe right before its inverse, and reports
// whether the inverse may run. A step it does not ready is kept (or
// irreversible by now) and settled. callerChecks says that the caller
// checks the state of a step it undoes itself, in the transaction the
// inverse runs in (txUndo): ready then reads the state only to say what
// moved for a step it keeps.
func (e *execution) ready(s *undoplan.Step, observe func() (json.RawMessage, error), callerChecks bool) bool {
	if e.pass.Precheck(s) && (s.Verdict != undoplan.Undo || !callerChecks) {
		cur, err := observe()
		switch {
		case err != nil && s.Verdict == undoplan.Undo:
			e.keep(s, e.g.unreadState(e.ctx, s.C, true, err), nil)
		case err == nil:
			e.pass.Check(s, undoplan.Split(s, cur), nil, undoplan.Executing)
		}
	}
	if s.Verdict != undoplan.Undo {
		delete(e.undoing, s.C.ID)
		e.pass.Settle(s)
		return false
	}
	return true
}

// external carries out one step of an ordinary operation.
func (e *execution) external(s *undoplan.Step) {
	if !s.Reviewed || s.Verdict != undoplan.Undo {
		e.pass.Settle(s)
		return
	}
	c := s.C
	if !e.ready(s, func() (json.RawMessage, error) { return e.g.observeNow(e.ctx, c) }, false) {
		return
	}
	_, err := e.g.undoChange(e.ctx, claim{kind: undoClaim, id: c.ID, auth: byTrusted, scope: c.ScopeHash, by: e.by}, e.undoing)
	var sc *StateChangedError
	var held *heldError
	switch {
	case errors.As(err, &sc): // changed between the check above and the claim
		now, _ := e.g.observeNow(e.ctx, c)
		if e.pass.Check(s, undoplan.Split(s, now), nil, undoplan.Executing) {
			e.keep(s, undoplan.ChangedSinceReview(e.g.voice, nil), nil)
		}
	case errors.As(err, &held):
		e.keep(s, held.reason, nil)
	case err != nil:
		s.Failed = e.g.voice.ReasonUndoFailed(agentText(err))
	}
	delete(e.undoing, c.ID)
	e.pass.Settle(s)
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
func (e *execution) closeNoNetGroups(steps []undoplan.Step) {
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
		cur, err := e.g.observeNow(e.ctx, first.C)
		if err != nil || string(cur) != string(first.NetState) {
			drift := undoplan.DriftOf(first.NetState, cur)
			for _, i := range idx {
				e.keep(&steps[i], undoplan.ChangedSinceReview(e.g.voice, drift), drift)
			}
			continue
		}
		err = e.g.ledger.WithTx(e.ctx, func(tx *ledger.Tx) error {
			for _, i := range idx {
				if err := e.g.txClose(tx, steps[i].C, e.runID, e.by); err != nil {
					return err
				}
			}
			return nil
		})
		for _, i := range idx {
			s := &steps[i]
			s.Closed = true
			delete(e.undoing, s.C.ID)
			if err != nil {
				s.Failed = e.g.voice.ReasonUndoFailed(agentText(err))
				continue
			}
			closed := *s.C // as committed by txClose
			closed.Status = ledger.Undone
			e.g.logTransition(e.ctx, &closed, ledger.Applied, e.by)
		}
	}
}

// txSegment carries out consecutive steps of transactional operations in one
// transaction, each checked against the state the transaction has reached.
func (e *execution) txSegment(steps []undoplan.Step) {
	tx, err := e.g.ledger.Begin(e.ctx)
	if err != nil {
		e.failAll(steps, err)
		return
	}
	defer tx.Rollback()
	for i := range steps {
		s := &steps[i]
		if !s.Reviewed || !s.CarriesOut() {
			e.pass.Settle(s)
			continue
		}
		_, o := e.g.opOf(s.C)
		if o == nil {
			e.keep(s, e.g.voice.ReasonOperationGone(s.C.Action), nil)
			e.pass.Settle(s)
			continue
		}
		if s.Verdict == undoplan.NoNetChange {
			if cur, err := e.g.observeTx(e.ctx, tx, o, s.C.Payload); err != nil || string(cur) != string(s.NetState) {
				drift := undoplan.DriftOf(s.NetState, cur)
				e.keep(s, undoplan.ChangedSinceReview(e.g.voice, drift), drift)
			} else if err := e.g.txClose(tx, s.C, e.runID, e.by); err != nil {
				s.Failed = e.g.voice.ReasonUndoFailed(agentText(err))
			}
			e.pass.Settle(s)
			continue
		}
		if !e.ready(s, func() (json.RawMessage, error) { return e.g.observeTx(e.ctx, tx, o, s.C.Payload) }, true) {
			continue
		}
		reason, err := e.g.dependencyHold(e.ctx, tx, s.C, e.undoing)
		switch {
		case err != nil:
			s.Failed = e.g.voice.ReasonUndoFailed(agentText(err))
		case reason != "":
			e.keep(s, reason, nil)
		default:
			// txUndo checks the state in this transaction, right before
			// the inverse.
			e.g.txUndo(e.ctx, tx, o, s, e.by, func(s *undoplan.Step, found json.RawMessage) bool {
				return e.pass.Check(s, undoplan.Split(s, found), nil, undoplan.Executing)
			})
		}
		delete(e.undoing, s.C.ID)
		e.pass.Settle(s)
	}
	if err := tx.Commit(); err != nil {
		e.failAll(steps, err)
		return
	}
	for _, s := range steps {
		delete(e.undoing, s.C.ID)
		switch {
		case s.Reviewed && s.Failed != "" && s.Verdict == undoplan.Undo:
			// The segment's savepoint rolled the undo back: nothing was written.
			_ = e.g.recordFailure(e.ctx, claim{kind: undoClaim, id: s.C.ID, auth: byTrusted, by: e.by}, nil, &runUndoFailure{s.Failed})
		case s.Reviewed && s.Failed == "" && s.CarriesOut():
			undone := *s.C // as committed by txUndo or txClose
			undone.Status = ledger.Undone
			e.g.logTransition(e.ctx, &undone, ledger.Applied, e.by)
		}
	}
}

// failAll marks every step of a segment that was to run as failed with err.
func (e *execution) failAll(steps []undoplan.Step, err error) {
	for i := range steps {
		if steps[i].Reviewed && steps[i].CarriesOut() {
			steps[i].Failed = e.g.voice.ReasonUndoFailed(agentText(err))
		}
		delete(e.undoing, steps[i].C.ID)
	}
}

// lateChanges returns a step for every change of the run that is applied
// or in flight but not in the plan: it joined after the plan was made.
func (e *execution) lateChanges(steps []undoplan.Step) ([]undoplan.Step, error) {
	all, err := e.g.ledger.Changes(e.ctx, ledger.ChangeFilter{RunID: e.runID})
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
	sortNewestFirst(late)
	out := make([]undoplan.Step, 0, len(late))
	for _, c := range late {
		o, _ := e.g.opOf(c)
		out = append(out, undoplan.Step{C: c, Op: o, Keys: undoplan.Keys(c), Verdict: undoplan.Skip, Reason: e.g.voice.ReasonLate(), Late: true})
	}
	return out, nil
}

// closeNoNet marks c undone without a write.
func closeNoNet(c *ledger.Change, runID, by string, now time.Time) {
	c.Status, c.UndoneAt, c.UndoneBy, c.UndoHash, c.UpdatedAt = ledger.Undone, now, by, "", now
	c.Note = "no net change within run " + runID + ": no write was needed"
}

// unreadState logs a run undo's failed read of c's current state in full
// (see logFailure) and returns the reason the report gives for leaving c
// as it is; beforeUndo says the read was made right before its undo
// (false while planning).
func (g *Guard) unreadState(ctx context.Context, c *ledger.Change, beforeUndo bool, err error) string {
	ref := g.logFailure(ctx, "observe failed in a run undo", err,
		slog.String("change_id", c.ID), slog.String("action", c.Action), slog.String("run_id", c.RunID))
	return g.voice.ReasonUnreadable(beforeUndo, ref)
}
