package changeset

import (
	"context"
	"errors"
	"time"

	"github.com/mcp-changeset/changeset-go/internal/canonjson"
	"github.com/mcp-changeset/changeset-go/internal/pipeline"
	"github.com/mcp-changeset/changeset-go/internal/runundo"
	"github.com/mcp-changeset/changeset-go/internal/token"
	"github.com/mcp-changeset/changeset-go/internal/undoplan"
	"github.com/mcp-changeset/changeset-go/ledger"
	"github.com/modelcontextprotocol/go-sdk/mcp"
)

// UndoRun undoes a run on behalf of a person acting through trusted code,
// without a token. With dryRun it only reports what the undo would do and
// changes nothing. Without it, it plans the undo afresh and carries that
// plan out at once: use it only where nobody reviews the plan; a page that
// showed a person a dry run should confirm with UndoRunReviewed, so that
// what runs is what the person saw. by names the person (see Person) and is
// recorded with the run and every change it undoes. Unlike the agent's
// undo_run it ignores scopes: trusted code sees every run.
//
// A run already undone (undone or partially_undone) is not undone again:
// UndoRun returns the stored report of its undo with Replayed set and a
// ReplayNote of when and by whom it ran, as the agent's undo_run does.
//
// A plan that undoes and closes nothing (every change is skipped or
// irreversible, or none is applied) needs no approval: its dry run says
// "Nothing to undo" in NextStep, and the agent's undo_run issues no
// confirmation token for it; the agent's real undo of such a plan without
// a token then changes nothing, leaves the run open and returns the plan's
// report, whose NextStep says nothing was done (with the token of an
// earlier dry run whose plan did undo something, it is refused because the
// plan changed). UndoRun without dryRun, called by
// a person, still closes such a run without a write (undone when nothing
// of it is left, partially_undone otherwise), so that a person can close a
// run whose changes were each undone or kept on their own.
func (g *Guard) UndoRun(ctx context.Context, runID string, dryRun bool, by string) (*RunReport, error) {
	if by == "" {
		by = Person("unknown")
	}
	r, err := g.getRun(ctx, runID)
	if err != nil {
		return nil, err
	}
	return g.undoRun(ctx, r, dryRun, "", pipeline.ByTrusted, by, nil)
}

// UndoRunReviewed undoes a run as a person reviewed it: reviewed lists the
// changes of the dry run the person confirmed (RunReport.Planned). Only
// those changes are undone, each checked again right before its inverse;
// a change the undo would now also take back is left alone and reported,
// and a reviewed change whose check fails is skipped and reported in
// NotCarriedOut. Trusted code only, as UndoRun.
func (g *Guard) UndoRunReviewed(ctx context.Context, runID string, reviewed []string, by string) (*RunReport, error) {
	if by == "" {
		by = Person("unknown")
	}
	r, err := g.getRun(ctx, runID)
	if err != nil {
		return nil, err
	}
	set := map[string]bool{}
	for _, id := range reviewed {
		set[id] = true
	}
	return g.undoRun(ctx, r, false, "", pipeline.ByTrusted, by, set)
}

// undoRunTool is undo_run for the agent.
func (g *Guard) undoRunTool(ctx context.Context, req *mcp.CallToolRequest, runID string, dryRun bool, token string) (*RunReport, error) {
	r, err := g.scopedRun(ctx, req, runID)
	if err != nil {
		return nil, err
	}
	by, err := g.agentBy(ctx, req)
	if err != nil {
		return nil, err
	}
	return g.undoRun(g.withPrincipal(ctx, req), r, dryRun, token, pipeline.ByToken, by, nil)
}

// undoRun is the one path of a run's undo. The real undo plans the run,
// refuses unless the plan is the one the token was issued for, claims the
// run and carries out that same plan; reviewed, when not nil, narrows
// what it carries out to the changes a person confirmed. auth is what
// lets the real undo through: the dry run's token (pipeline.ByToken), or a person
// acting through trusted code (pipeline.ByTrusted).
func (g *Guard) undoRun(ctx context.Context, r *ledger.Run, dryRun bool, token string, auth pipeline.Authority, by string, reviewed map[string]bool) (*RunReport, error) {
	ctx, end := g.start(ctx, Event{Step: StepUndoRun, RunID: r.ID, DryRun: dryRun})
	rep, err := g.undoRunStep(ctx, r, dryRun, token, auth, by, reviewed)
	if end != nil {
		out := Outcome{RunID: r.ID, Err: err, Failure: failureKind(err)}
		if rep != nil {
			out.Status = rep.Status
		}
		end(out)
	}
	return rep, err
}

func (g *Guard) undoRunStep(ctx context.Context, r *ledger.Run, dryRun bool, tok string, auth pipeline.Authority, by string, reviewed map[string]bool) (*RunReport, error) {
	switch r.Status {
	case ledger.RunUndone, ledger.RunPartiallyUndone:
		return g.replayReport(r)
	case ledger.RunUndoing:
		return nil, g.runBusy(r.ID)
	}
	if !dryRun && !g.WritesEnabled() {
		return nil, &WritesDisabledError{EnvVar: g.opts.WriteModeEnv}
	}
	plan, err := g.planRun(ctx, r)
	if err != nil {
		return nil, err
	}
	if dryRun {
		return g.dryRunReport(ctx, r, plan, auth)
	}
	if len(plan.Actions()) == 0 && auth == pipeline.ByToken && tok == "" {
		// Nothing to approve, so no token was issued. A caller holding the
		// token of an earlier plan is told below that the plan changed.
		return g.nothingToUndo(plan, r.ID, false), nil
	}
	if auth == pipeline.ByToken && !token.Valid(tok, token.ConfirmPrefix) {
		return nil, refuse(ErrInvalidToken, "", "%s", g.voice.RunNeedsToken(r.ID))
	}
	stored, err := g.claimRun(ctx, r, plan, tok, auth, by)
	if err != nil || stored != nil {
		return stored, err
	}
	if reviewed == nil {
		reviewed = plan.Actions()
	}
	return g.executeRun(ctx, r, plan, reviewed, by)
}

// planRun is the one walk behind every undo of a run
// (runundo.Engine.Plan): the dry run shows its plan, and the real undo
// carries out that plan (see executeRun), never a new walk. It writes
// nothing.
func (g *Guard) planRun(ctx context.Context, r *ledger.Run) (*undoplan.Plan, error) {
	applied, err := g.runChanges(ctx, r)
	if err != nil {
		return nil, err
	}
	return g.pipe.Runs().Plan(ctx, r.ID, applied)
}

// runChanges returns the run's changes the undo must consider, newest
// first: the applied ones, and those whose undo failed earlier (they are
// still in place, so they are kept and reported, and the run is never
// called undone while one remains). It refuses while any change of the run
// is in flight: its outcome is not known yet.
func (g *Guard) runChanges(ctx context.Context, r *ledger.Run) ([]*ledger.Change, error) {
	all, err := g.ledger.Changes(ctx, ledger.ChangeFilter{RunID: r.ID})
	if err != nil {
		return nil, err
	}
	var applied []*ledger.Change
	for _, c := range all {
		if c.Status.InFlight() {
			if cur, err := g.ledger.Run(ctx, r.ID); err == nil && cur.Status == ledger.RunUndoing {
				return nil, g.runBusy(r.ID) // another request is undoing it: its changes are in flight
			}
			return nil, refuse(ErrBusy, "", "%s", g.voice.RunChangeInFlight(r.ID, c.ID, string(c.Status)))
		}
		if c.Status == ledger.Applied || c.Status == ledger.UndoFailed {
			applied = append(applied, c)
		}
	}
	runundo.NewestFirst(applied)
	return applied, nil
}

// executeRun carries out plan for the claimed run r (runundo.Engine.Execute)
// and stores the report
// and the run's final status: undone when nothing of the run is left,
// partially_undone when changes were kept, and open again when changes
// joined the run after the plan (a new dry run can review them). The run
// never stays undoing: if the final write fails, the run is put back to
// open so that a retry can plan again.
func (g *Guard) executeRun(ctx context.Context, r *ledger.Run, plan *undoplan.Plan, allowed map[string]bool, by string) (*RunReport, error) {
	ctx = context.WithoutCancel(ctx) // a claimed run must reach a final status
	done, err := g.pipe.Runs().Execute(ctx, r.ID, plan, allowed, by)
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
		err = g.ledger.WithTx(ctx, func(tx *ledger.Tx) error {
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
	err := g.pipe.RetryBusy(ctx, func(tx *ledger.Tx) error {
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

func (g *Guard) runBusy(id string) error {
	return refuse(ErrBusy, "", "%s", g.voice.RunBusy(id))
}

// dryRunReport stores a fresh confirmation token bound to the plan (the
// agent's dry run) and returns the plan as a report. It undoes nothing.
// A dry run for trusted code (pipeline.ByTrusted) stores no token.
func (g *Guard) dryRunReport(ctx context.Context, r *ledger.Run, plan *undoplan.Plan, auth pipeline.Authority) (*RunReport, error) {
	if len(plan.Actions()) == 0 {
		return g.nothingToUndo(plan, r.ID, true), nil // no token: there is nothing to approve
	}
	rep := reportOf(g.voice, plan, r.ID, true)
	rep.Status = string(ledger.RunOpen)
	if auth == pipeline.ByTrusted {
		return rep, nil
	}
	tok := token.New(token.ConfirmPrefix)
	expires := g.now().Add(g.opts.TTL)
	err := g.ledger.WithTx(ctx, func(tx *ledger.Tx) error {
		cur, err := tx.Run(r.ID)
		if err != nil {
			return err
		}
		if cur.Status != ledger.RunOpen {
			return refuse(ErrBusy, "", "%s", g.voice.RunMoved(r.ID, string(cur.Status)))
		}
		cur.PlanHash = plan.Hash
		cur.ConfirmHash = token.Digest(token.PurposeRunUndo, cur.ID, plan.Hash, tok)
		cur.ConfirmExpiresAt, cur.UpdatedAt = expires, g.now()
		return tx.UpdateRun(cur, ledger.RunOpen)
	})
	if err != nil {
		return nil, err
	}
	rep.ConfirmationToken, rep.ExpiresAt = tok, formatTime(expires)
	rep.NextStep = g.voice.RunDryRunNext()
	return rep, nil
}

// claimRun moves the run from open to undoing: one claim per run, whatever
// the number of processes. The agent's claim needs the dry run's token and
// the same plan the token was issued for (pipeline.ByToken); the user's approval
// (pipeline.ByUser) was checked against the plan by approveUndoRun, and a person
// acting through trusted code (pipeline.ByTrusted) needs neither. When another
// request finished undoing the run meanwhile, claimRun returns that undo's
// stored report, replayed.
func (g *Guard) claimRun(ctx context.Context, r *ledger.Run, plan *undoplan.Plan, tok string, auth pipeline.Authority, by string) (*RunReport, error) {
	byTok := auth == pipeline.ByToken
	var refusal error
	var stored *ledger.Run
	err := g.ledger.WithTx(ctx, func(tx *ledger.Tx) error {
		refusal, stored = nil, nil // WithTx may run this again
		cur, err := tx.Run(r.ID)
		if err != nil {
			return err
		}
		now := g.now()
		switch {
		case cur.Status == ledger.RunUndone || cur.Status == ledger.RunPartiallyUndone:
			stored = cur
			return nil
		case cur.Status == ledger.RunUndoing:
			refusal = g.runBusy(r.ID)
			return nil
		case cur.Status != ledger.RunOpen:
			refusal = refuse(ErrWrongStatus, "", "%s", g.voice.RunNotUndoable(r.ID, string(cur.Status)))
			return nil
		case byTok && !token.Matches(cur.ConfirmHash, token.PurposeRunUndo, cur.ID, cur.PlanHash, tok):
			refusal = refuse(ErrInvalidToken, "", "%s", g.voice.RunTokenInvalid(r.ID))
			return nil
		case byTok && !now.Before(cur.ConfirmExpiresAt):
			refusal = refuse(ErrExpired, "", "%s", g.voice.RunDryRunExpired(r.ID, formatTime(cur.ConfirmExpiresAt)))
			return nil
		case byTok && cur.PlanHash != plan.Hash:
			refusal = refuse(ErrPlanChanged, "", "%s", g.voice.RunPlanChanged(r.ID))
			return nil
		}
		cur.Status, cur.UndoneBy, cur.UpdatedAt = ledger.RunUndoing, by, now
		cur.PlanHash, cur.ConfirmHash, cur.ConfirmExpiresAt = "", "", time.Time{}
		return tx.UpdateRun(cur, ledger.RunOpen)
	})
	switch {
	case errors.Is(err, ledger.ErrConflict):
		return nil, g.runBusy(r.ID)
	case err != nil:
		return nil, err
	case stored != nil:
		return g.replayReport(stored)
	}
	return nil, refusal
}
