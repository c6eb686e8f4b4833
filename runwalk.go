package changeset

import (
	"cmp"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"slices"
	"time"

	"github.com/mcp-changeset/changeset-go/internal/canonjson"
	"github.com/mcp-changeset/changeset-go/ledger"
)

// walkRun is the one walk behind both the dry run and the real undo of a
// run. It visits the run's applied changes newest first and decides, for
// each, whether its undo runs, and why not.
//
// Ordinary operations are decided from the stored snapshots and one
// observation of each resource's current state; with execute they are then
// undone one by one through undoChange. Consecutive changes of
// TxOperations are really undone inside one ledger transaction, each
// checked against the state the transaction has reached: with execute the
// transaction commits, without it rolls back, so the dry run reports what
// the undo will do from the same code.
func (g *Guard) walkRun(ctx context.Context, r *ledger.Run, execute bool, by string) (*runPlan, error) {
	applied, err := g.runChanges(ctx, r)
	if err != nil {
		return nil, err
	}
	w := &walk{g: g, ctx: ctx, execute: execute, by: by, runID: r.ID,
		groups: map[string][]*ledger.Change{}, current: map[string]stateRead{}, expected: map[string]json.RawMessage{}}
	for _, c := range applied {
		w.groups[resourceOf(c)] = append(w.groups[resourceOf(c)], c)
	}
	w.findNoNetChange()
	plan := &runPlan{}
	for i := 0; i < len(applied); {
		if !w.isTx(applied[i]) {
			plan.steps = append(plan.steps, w.externalStep(applied[i]))
			i++
			continue
		}
		j := i
		for j < len(applied) && w.isTx(applied[j]) {
			j++
		}
		steps, err := w.txSegment(applied[i:j])
		if err != nil {
			return nil, err
		}
		plan.steps = append(plan.steps, steps...)
		i = j
	}
	plan.hash = plan.digest()
	return plan, nil
}

// runChanges returns the run's applied changes, newest first, and refuses
// while any change of the run is in flight.
func (g *Guard) runChanges(ctx context.Context, r *ledger.Run) ([]*ledger.Change, error) {
	all, err := g.ledger.ListChanges(ctx, ledger.ChangeFilter{RunID: r.ID})
	if err != nil {
		return nil, err
	}
	var applied []*ledger.Change
	for _, c := range all {
		if c.Status.InFlight() {
			return nil, Refuse("run %s cannot be undone now: change %s is %s; try again when it finishes", r.ID, c.ID, c.Status)
		}
		if c.Status == ledger.Applied {
			applied = append(applied, c)
		}
	}
	slices.SortFunc(applied, func(a, b *ledger.Change) int {
		return cmp.Or(b.AppliedAt.Compare(a.AppliedAt), b.CreatedAt.Compare(a.CreatedAt), cmp.Compare(b.ID, a.ID))
	})
	return applied, nil
}

// walk is the state of one walkRun.
type walk struct {
	g       *Guard
	ctx     context.Context
	execute bool
	by      string
	runID   string

	groups   map[string][]*ledger.Change // by resource, newest first
	noNet    map[string]bool             // resources the run left where it found them
	current  map[string]stateRead        // each resource's observed state, read once
	expected map[string]json.RawMessage  // the state the walk has reached, per resource
}

type stateRead struct {
	state json.RawMessage
	err   error
}

func (w *walk) isTx(c *ledger.Change) bool {
	o, ok := w.g.lookup(c.Action)
	return ok && o.tx != nil
}

// currentState reads a resource's state once, through the Observe of the
// newest change of the run that touched it. A TxOperation's Observe runs in
// a transaction that is rolled back.
func (w *walk) currentState(res string) (json.RawMessage, error) {
	if s, ok := w.current[res]; ok {
		return s.state, s.err
	}
	newest := w.groups[res][0]
	var s stateRead
	o, ok := w.g.lookup(newest.Action)
	switch {
	case !ok || !o.hasObserve():
		s.err = errNoObserve
	case o.tx != nil:
		s.err = w.g.ledger.WithTx(w.ctx, func(tx *ledger.Tx) error {
			s.state, s.err = w.g.observeTx(w.ctx, tx, o, newest.Payload)
			return errRollback
		})
		if errors.Is(s.err, errRollback) {
			s.err = nil
		}
	default:
		s.state, s.err = w.g.observe(w.ctx, o, newest.Payload)
	}
	w.current[res] = s
	return s.state, s.err
}

// findNoNetChange marks the resources whose oldest "before" in the run
// equals their newest "after" and their current state: the run created
// and deleted them (or changed and restored them), so no write is needed.
func (w *walk) findNoNetChange() {
	w.noNet = map[string]bool{}
	for res, grp := range w.groups {
		oldest, newest := grp[len(grp)-1], grp[0]
		if oldest.Before == nil || newest.After == nil || string(oldest.Before) != string(newest.After) {
			continue
		}
		if cur, err := w.currentState(res); err == nil && string(cur) == string(newest.After) {
			w.noNet[res] = true
		}
	}
}

// precheck decides what needs no state: a change with no net effect, and
// changes that cannot be undone at all. It returns the step with verdict
// undo when the state check comes next.
func (w *walk) precheck(c *ledger.Change) (planStep, *op) {
	step := planStep{c: c, verdict: verdictUndo}
	o, registered := w.g.lookup(c.Action)
	switch {
	case w.noNet[resourceOf(c)]:
		step.verdict, step.reason = verdictNoNetChange, "the run itself brought this resource back to where it started; no write is needed"
	case !registered:
		step.verdict, step.reason = verdictIrreversible, fmt.Sprintf("this server no longer has the operation %q", c.Action)
	case !c.Undoable || !o.hasUndo():
		step.verdict, step.reason = verdictIrreversible, "its operation has no undo"
	case !c.UndoExpiresAt.IsZero() && !w.g.now().Before(c.UndoExpiresAt):
		step.verdict, step.reason = verdictIrreversible, "its undo window closed at "+formatTime(c.UndoExpiresAt)
	}
	return step, o
}

// Reasons for skipping a change, shared by both kinds of operation.
const (
	reasonEdited     = "its resource changed after it was applied (edited outside the run, or by a change of the run that is not undone); it is left as it is"
	reasonNoSnapshot = "no state was recorded after it was applied, so a later edit cannot be ruled out"
)

// externalStep decides an ordinary operation's change from the snapshots
// and, with execute, undoes it.
func (w *walk) externalStep(c *ledger.Change) planStep {
	step, o := w.precheck(c)
	res := resourceOf(c)
	if step.verdict == verdictUndo && o.observe != nil {
		exp, seen := w.expected[res]
		if !seen {
			cur, err := w.currentState(res)
			if err != nil {
				step.verdict, step.reason = verdictSkip, "the current state could not be read ("+typeName(err)+")"
				return step
			}
			exp = cur
		}
		switch {
		case c.After == nil:
			step.verdict, step.reason = verdictSkip, reasonNoSnapshot
		case string(exp) != string(c.After):
			step.verdict, step.reason = verdictSkip, reasonEdited
		default:
			w.expected[res] = c.Before
		}
	}
	if step.verdict == verdictUndo {
		step.warnings = c.Warnings
	}
	if !w.execute {
		return step
	}
	var err error
	switch step.verdict {
	case verdictUndo:
		_, err = w.g.undoChange(w.ctx, c.ID, "", c.ScopeHash, w.by, true)
	case verdictNoNetChange:
		err = w.g.closeWithoutWrite(w.ctx, c, w.runID, w.by)
	}
	if err != nil {
		step.failed = "undo failed: " + agentText(err)
	}
	return step
}

// txSegment undoes consecutive changes of TxOperations inside one
// transaction: each is checked against the state the transaction has
// reached, undone under a savepoint (a failing undo rolls back alone), and
// closed in the ledger. Without execute the whole transaction rolls back.
func (w *walk) txSegment(changes []*ledger.Change) ([]planStep, error) {
	tx, err := w.g.ledger.Begin(w.ctx)
	if err != nil {
		return nil, err
	}
	defer tx.Rollback()
	var steps []planStep
	var failures []planStep
	for _, c := range changes {
		step, o := w.precheck(c)
		step.tx = true
		switch step.verdict {
		case verdictUndo:
			w.txUndo(tx, o, &step)
			if step.failed != "" {
				failures = append(failures, step)
			}
		case verdictNoNetChange:
			if err := w.txClose(tx, c); err != nil {
				step.failed = "undo failed: " + agentText(err)
			}
		}
		steps = append(steps, step)
	}
	if !w.execute {
		return steps, nil // the deferred rollback undoes the dry run
	}
	if err := tx.Commit(); err != nil {
		return nil, err
	}
	for _, f := range failures {
		w.g.recordRunFailure(w.ctx, f.c.ID, w.by, f.failed)
	}
	return steps, nil
}

// txUndo checks and undoes one change inside the segment's transaction.
func (w *walk) txUndo(tx *ledger.Tx, o *op, step *planStep) {
	c, err := tx.Change(step.c.ID)
	if err != nil {
		step.failed = "undo failed: " + agentText(err)
		return
	}
	r := w.g.inTx(w.ctx, tx, o)
	if r.observe != nil {
		cur, err := r.observe(c.Payload)
		switch {
		case err != nil:
			step.verdict, step.reason = verdictSkip, "the current state could not be read ("+typeName(err)+")"
			return
		case c.After == nil:
			step.verdict, step.reason = verdictSkip, reasonNoSnapshot
			return
		case string(cur) != string(c.After):
			step.verdict, step.reason = verdictSkip, reasonEdited
			return
		}
	}
	step.warnings = c.Warnings
	sql := tx.SQL()
	if _, err := sql.ExecContext(w.ctx, "SAVEPOINT changeset_step"); err != nil {
		step.failed = "undo failed: " + agentText(ledger.Errorf("savepoint", "", err))
		return
	}
	err = w.g.performUndo(w.ctx, c, r)
	if err == nil {
		c.UndoneBy, c.UndoHash, c.UpdatedAt = w.by, "", w.g.now()
		err = tx.UpdateChange(c, ledger.Applied)
	}
	if err != nil {
		step.failed = "undo failed: " + agentText(err)
		_, _ = sql.ExecContext(w.ctx, "ROLLBACK TO SAVEPOINT changeset_step")
	}
	_, _ = sql.ExecContext(w.ctx, "RELEASE SAVEPOINT changeset_step")
}

// txClose closes a change with no net effect inside the transaction.
func (w *walk) txClose(tx *ledger.Tx, c *ledger.Change) error {
	cur, err := tx.Change(c.ID)
	if err != nil {
		return err
	}
	closeNoNet(cur, w.runID, w.by, w.g.now())
	return tx.UpdateChange(cur, ledger.Applied)
}

// closeNoNet marks c undone without a write.
func closeNoNet(c *ledger.Change, runID, by string, now time.Time) {
	c.Status, c.UndoneAt, c.UndoneBy, c.UndoHash, c.UpdatedAt = ledger.Undone, now, by, "", now
	c.Note = "no net change within run " + runID + ": no write was needed"
}

// recordRunFailure marks a change whose transactional undo failed in a run
// as undo_failed, as a failed undo_change would.
func (g *Guard) recordRunFailure(ctx context.Context, id, by, reason string) {
	err := g.ledger.WithTx(context.WithoutCancel(ctx), func(tx *ledger.Tx) error {
		c, err := tx.Change(id)
		if err != nil || c.Status != ledger.Applied {
			return err
		}
		c.Status, c.ErrorType, c.Error, c.UndoHash, c.UndoneBy, c.UpdatedAt = ledger.UndoFailed, "RunUndo", reason, "", by, g.now()
		return tx.UpdateChange(c, ledger.Applied)
	})
	if err != nil {
		g.log.Error("run undo failure not recorded", "change_id", id, "err", err)
	}
}

// executeRun performs the undo of a claimed run and stores its report.
func (g *Guard) executeRun(ctx context.Context, r *ledger.Run, by string) (*RunReport, error) {
	ctx = context.WithoutCancel(ctx) // a claimed run must reach a final status
	plan, err := g.walkRun(ctx, r, true, by)
	if err != nil {
		return nil, err
	}
	rep := plan.report(r.ID, false)
	rep.UndoneBy = by
	status := ledger.RunUndone
	if !plan.complete() {
		status = ledger.RunPartiallyUndone
	}
	rep.Status = string(status)
	stored, err := canonjson.Marshal(rep)
	if err != nil {
		return nil, err
	}
	err = g.ledger.WithTx(ctx, func(tx *ledger.Tx) error {
		cur, err := tx.Run(r.ID)
		if err != nil {
			return err
		}
		cur.Status, cur.Report, cur.UpdatedAt = status, stored, g.now()
		return tx.UpdateRun(cur, ledger.RunUndoing)
	})
	if err != nil {
		return nil, err
	}
	g.log.Info("run undone", "run_id", r.ID, "status", string(status), "by", by)
	return rep, nil
}

// closeWithoutWrite marks an ordinary operation's applied change undone
// without running its inverse: the run brought its resource back to where
// it started.
func (g *Guard) closeWithoutWrite(ctx context.Context, c *ledger.Change, runID, by string) error {
	claimed, err := g.claim(ctx, netZeroClaim, c.ID, "", c.ScopeHash, by, true)
	if err != nil {
		return err
	}
	closeNoNet(claimed, runID, by, g.now())
	return g.finish(ctx, claimed, ledger.Undoing, by)
}
