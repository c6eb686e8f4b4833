package pipeline

import (
	"context"
	"errors"
	"time"

	"github.com/mcp-changeset/changeset-go/internal/runundo"
	"github.com/mcp-changeset/changeset-go/internal/token"
	"github.com/mcp-changeset/changeset-go/internal/undoplan"
	"github.com/mcp-changeset/changeset-go/internal/voice"
	"github.com/mcp-changeset/changeset-go/ledger"
)

// A run's undo moves the run's row as a claim moves a change's: PlanRun
// walks the run (writing nothing), OfferRunUndo binds a dry run's token to
// its plan, ClaimRun moves the run from open to undoing, ExecuteRun
// carries out the claimed plan, and CloseRun stores the outcome, or
// ReleaseRun puts the run back to open when its undo cannot finish. The
// report a caller reads is the Guard's to render.

// PlanRun is the one walk behind every undo of a run
// (runundo.Engine.Plan): the dry run shows its plan, and the real undo
// carries out that plan (ExecuteRun), never a new walk. It writes
// nothing.
func (e *Engine) PlanRun(ctx context.Context, r *ledger.Run) (*undoplan.Plan, error) {
	applied, err := e.runChanges(ctx, r)
	if err != nil {
		return nil, err
	}
	return e.Runs().Plan(ctx, r.ID, applied)
}

// runChanges returns the run's changes the undo must consider, newest
// first: the applied ones, and those whose undo failed earlier (they are
// still in place, so they are kept and reported, and the run is never
// called undone while one remains). It refuses while any change of the run
// is in flight: its outcome is not known yet.
func (e *Engine) runChanges(ctx context.Context, r *ledger.Run) ([]*ledger.Change, error) {
	all, err := e.Ledger.Changes(ctx, ledger.ChangeFilter{RunID: r.ID})
	if err != nil {
		return nil, err
	}
	var applied []*ledger.Change
	for _, c := range all {
		if c.Status.InFlight() {
			if cur, err := e.Ledger.Run(ctx, r.ID); err == nil && cur.Status == ledger.RunUndoing {
				return nil, e.RunBusy(r.ID) // another request is undoing it: its changes are in flight
			}
			return nil, e.refuse(Busy, "", e.Voice.RunChangeInFlight(r.ID, c.ID, string(c.Status)))
		}
		if c.Status == ledger.Applied || c.Status == ledger.UndoFailed {
			applied = append(applied, c)
		}
	}
	order, err := runundo.AppliedOrder(ctx, e.Ledger, r.ID)
	if err != nil {
		return nil, err
	}
	runundo.NewestFirst(applied, order)
	return applied, nil
}

// RunBusy is the refusal of a run another request is undoing.
func (e *Engine) RunBusy(id string) error {
	return e.refuse(Busy, "", e.Voice.RunBusy(id))
}

// A RunOffer is what a dry run offers: the token of the real undo, its
// expiry, and the people's approval it needs, if any.
type RunOffer struct {
	Token    string
	Expires  time.Time
	Approval *ledger.Approval
}

// OfferRunUndo stores a fresh confirmation token for the real undo of run
// runID, bound to the plan (a dry run's), and returns it with its expiry.
// When approvers is above zero it also requests, in the same transaction,
// the approval of that plan by that many people, asked by by. It refuses a
// run that is no longer open.
func (e *Engine) OfferRunUndo(ctx context.Context, runID string, plan *undoplan.Plan, approvers int, by string) (RunOffer, error) {
	tok := token.New(token.ConfirmPrefix)
	now := e.Now()
	expires := now.Add(e.TTL)
	var approval *ledger.Approval
	// Storing a dry run's token claims nothing: a lost one is a dry run to
	// redo.
	err := e.Ledger.WithLazyTx(ctx, func(tx *ledger.Tx) error {
		approval = nil // WithLazyTx may run this again
		cur, err := tx.Run(runID)
		if err != nil {
			return err
		}
		if cur.Status != ledger.RunOpen {
			return e.refuse(Busy, "", e.Voice.RunMoved(runID, string(cur.Status)))
		}
		cur.PlanHash = plan.Hash
		cur.ConfirmHash = token.Digest(token.PurposeRunUndo, cur.ID, plan.Hash, tok)
		cur.ConfirmExpiresAt, cur.UpdatedAt = expires, now
		if err := tx.UpdateRun(cur, ledger.RunOpen); err != nil || approvers == 0 {
			return err
		}
		approval, err = tx.RequestApproval(ledger.ApprovalRequest{Kind: ledger.ApproveRunUndo, RunID: runID,
			Needed: approvers, RequestedBy: by, Deadline: expires, At: now})
		return err
	})
	if err != nil {
		return RunOffer{}, err
	}
	return RunOffer{Token: tok, Expires: expires, Approval: approval}, nil
}

// ClaimRun moves the run from open to undoing for by: one claim per run,
// whatever the number of processes. The agent's claim needs the dry run's
// token and the same plan the token was issued for (ByToken); the user's
// approval (ByUser) was checked against the plan by the caller, and a
// person acting through trusted code (ByTrusted) needs neither. When
// another request finished undoing the run meanwhile, ClaimRun returns
// that run, whose stored report the caller replays, and claims nothing.
// approval is the people's approval of the plan, under person approval:
// the claim uses it in its own transaction, and refuses if it is not
// approved, or not for this run and plan, or missing when required.
func (e *Engine) ClaimRun(ctx context.Context, r *ledger.Run, plan *undoplan.Plan, tok string, auth Authority, by string, approval RunApproval) (done *ledger.Run, err error) {
	byTok := auth == ByToken
	var refusal error
	err = e.Ledger.WithTx(ctx, func(tx *ledger.Tx) error {
		refusal, done = nil, nil // WithTx may run this again
		cur, err := tx.Run(r.ID)
		if err != nil {
			return err
		}
		now := e.Now()
		switch {
		case cur.Status == ledger.RunUndone || cur.Status == ledger.RunPartiallyUndone:
			done = cur
			return nil
		case cur.Status == ledger.RunUndoing:
			refusal = e.RunBusy(r.ID)
			return nil
		case cur.Status != ledger.RunOpen:
			refusal = e.refuse(WrongStatus, "", e.Voice.RunNotUndoable(r.ID, string(cur.Status)))
			return nil
		case byTok && !token.Matches(cur.ConfirmHash, token.PurposeRunUndo, cur.ID, cur.PlanHash, tok):
			refusal = e.refuse(InvalidToken, "", e.Voice.RunTokenInvalid(r.ID))
			return nil
		case byTok && !now.Before(cur.ConfirmExpiresAt):
			refusal = e.refuse(Expired, "", e.Voice.RunDryRunExpired(r.ID, voice.Time(cur.ConfirmExpiresAt)))
			return nil
		case byTok && cur.PlanHash != plan.Hash:
			refusal = e.refuse(PlanChanged, "", e.Voice.RunPlanChanged(r.ID))
			return nil
		}
		switch {
		case approval.ID == "" && approval.Required:
			refusal = e.refuse(AwaitingApproval, "", voice.ApprovalMissing(voice.Run(r.ID), "undone"))
			return nil
		case approval.ID != "":
			a, err := tx.UseApproval(approval.ID, ledger.ApprovalUse{Kind: ledger.ApproveRunUndo, RunID: r.ID, PlanHash: plan.Hash, By: by, At: now})
			if err != nil {
				if !IsApprovalRefusal(err) {
					return err
				}
				refusal = e.ApprovalRefusal(voice.Run(r.ID), "", "undone", e.Voice.Tool("undo_run"), a, err)
				return nil
			}
		}
		cur.Status, cur.UndoneBy, cur.UpdatedAt = ledger.RunUndoing, by, now
		cur.PlanHash, cur.ConfirmHash, cur.ConfirmExpiresAt = "", "", time.Time{}
		return tx.UpdateRun(cur, ledger.RunOpen)
	})
	switch {
	case errors.Is(err, ledger.ErrConflict):
		return nil, e.RunBusy(r.ID)
	case err != nil:
		return nil, err
	}
	return done, refusal
}

// A RunApproval is what a run's claim brings of people's approval.
type RunApproval struct {
	ID       string // the approval the claim uses; "" for none
	Required bool   // whether the claim must bring one
}

// ExecuteRun carries out plan for the claimed run r
// (runundo.Engine.Execute) and returns what happened and the status the
// run ends in: undone when nothing of the run is left, partially_undone
// when changes were kept, and open again when changes joined the run
// after the plan (a new dry run can review them). If it fails, the run is
// released (ReleaseRun). It runs even if ctx is cancelled: a claimed run
// must reach a final status.
func (e *Engine) ExecuteRun(ctx context.Context, r *ledger.Run, plan *undoplan.Plan, allowed map[string]bool, by string) (*undoplan.Plan, ledger.RunStatus, error) {
	ctx = context.WithoutCancel(ctx)
	done, err := e.Runs().Execute(ctx, r.ID, plan, allowed, by)
	if err != nil {
		e.ReleaseRun(ctx, r.ID, err)
		return nil, "", err
	}
	status := ledger.RunPartiallyUndone
	switch {
	case done.Late():
		status = ledger.RunOpen
	case done.Complete():
		status = ledger.RunUndone
	}
	return done, status, nil
}

// CloseRun stores the outcome of run id's undo: its final status and the
// report. An undo that leaves the run open forgets who undid it. It runs
// even if ctx is cancelled.
func (e *Engine) CloseRun(ctx context.Context, id string, status ledger.RunStatus, report []byte) error {
	// The run's report: not a claim.
	return e.Ledger.WithLazyTx(context.WithoutCancel(ctx), func(tx *ledger.Tx) error {
		cur, err := tx.Run(id)
		if err != nil {
			return err
		}
		cur.Status, cur.Report, cur.UpdatedAt = status, report, e.Now()
		if status == ledger.RunOpen {
			cur.UndoneBy = ""
		}
		return tx.UpdateRun(cur, ledger.RunUndoing)
	})
}

// ReleaseRun puts a run whose undo could not finish back to open, so that
// a retry can plan it again; cause is why it could not finish. If even
// that fails the run stays undoing, and `mcp-changeset check` reports it.
// It runs even if ctx is cancelled.
func (e *Engine) ReleaseRun(ctx context.Context, id string, cause error) {
	err := e.retryBusy(context.WithoutCancel(ctx), func(tx *ledger.Tx) error {
		cur, err := tx.Run(id)
		if err != nil || cur.Status != ledger.RunUndoing {
			return err
		}
		cur.Status, cur.UndoneBy, cur.UpdatedAt = ledger.RunOpen, "", e.Now()
		return tx.UpdateRun(cur, ledger.RunUndoing)
	})
	if err != nil {
		e.Log.Error("run left undoing: its undo failed and the run could not be released", "run_id", id, "cause", cause, "err", err)
		return
	}
	e.Log.Warn("run undo stopped; the run is open again", "run_id", id, "cause", cause)
}
