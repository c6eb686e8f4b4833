package changeset

import (
	"context"

	"github.com/mcp-changeset/changeset-go/internal/canonjson"
	"github.com/mcp-changeset/changeset-go/internal/pipeline"
	"github.com/mcp-changeset/changeset-go/internal/token"
	"github.com/mcp-changeset/changeset-go/internal/undoplan"
	"github.com/mcp-changeset/changeset-go/internal/voice"
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
	return g.undoRun(withRequest(g.withPrincipal(ctx, req), req), r, dryRun, token, pipeline.ByToken, by, nil)
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
	plan, err := g.pipe.PlanRun(ctx, r)
	if err != nil {
		return nil, err
	}
	if dryRun {
		return g.dryRunReport(ctx, r, plan, auth, by)
	}
	if len(plan.Actions()) == 0 && auth == pipeline.ByToken && tok == "" {
		// Nothing to approve, so no token was issued. A caller holding the
		// token of an earlier plan is told below that the plan changed.
		return g.nothingToUndo(plan, r.ID, false), nil
	}
	if auth == pipeline.ByToken && !token.Valid(tok, token.ConfirmPrefix) {
		return nil, refuse(ErrInvalidToken, "", "%s", g.voice.RunNeedsToken(r.ID))
	}
	var approval pipeline.RunApproval
	if auth == pipeline.ByToken { // people may have to approve the plan as well
		if approval.ID, approval.Required, err = g.runApproval(ctx, r, plan, tok, by); err != nil {
			return nil, err
		}
	}
	stored, err := g.claimRun(ctx, r, plan, tok, auth, by, approval)
	if err != nil || stored != nil {
		return stored, err
	}
	if reviewed == nil {
		reviewed = plan.Actions()
	}
	return g.executeRun(ctx, r, plan, reviewed, by)
}

// executeRun carries out plan for the claimed run r
// (pipeline.Engine.ExecuteRun), and stores the report and the run's final
// status. The run never stays undoing: if the final write fails, the run
// is put back to open so that a retry can plan again.
func (g *Guard) executeRun(ctx context.Context, r *ledger.Run, plan *undoplan.Plan, allowed map[string]bool, by string) (*RunReport, error) {
	ctx = context.WithoutCancel(ctx) // a claimed run must reach a final status
	done, status, err := g.pipe.ExecuteRun(ctx, r, plan, allowed, by)
	if err != nil {
		return nil, err
	}
	rep := reportOf(g.voice, done, r.ID, false)
	rep.UndoneBy = by
	rep.Status = string(status)
	stored, err := canonjson.Marshal(rep)
	if err == nil {
		err = g.pipe.CloseRun(ctx, r.ID, status, stored)
	}
	if err != nil {
		g.pipe.ReleaseRun(ctx, r.ID, err)
		return nil, err
	}
	g.log.Info("run undone", "run_id", r.ID, "status", string(status), "by", by,
		"undone", len(rep.Undone), "skipped", len(rep.Skipped), "not_carried_out", len(rep.NotCarriedOut))
	return rep, nil
}

// runBusy is the refusal of a run another request is undoing.
func (g *Guard) runBusy(id string) error { return g.pipe.RunBusy(id) }

// dryRunReport stores a fresh confirmation token bound to the plan (the
// agent's dry run) and returns the plan as a report. It undoes nothing.
// A dry run for trusted code (pipeline.ByTrusted) stores no token. Under
// person approval the agent's dry run also requests, asked by by, the
// approval of the plan that its real undo needs.
func (g *Guard) dryRunReport(ctx context.Context, r *ledger.Run, plan *undoplan.Plan, auth pipeline.Authority, by string) (*RunReport, error) {
	if len(plan.Actions()) == 0 {
		return g.nothingToUndo(plan, r.ID, true), nil // no token: there is nothing to approve
	}
	rep := reportOf(g.voice, plan, r.ID, true)
	rep.Status = string(ledger.RunOpen)
	if auth == pipeline.ByTrusted {
		return rep, nil
	}
	needed, err := g.runApprovers(ctx, plan.Actions())
	if err != nil {
		return nil, err
	}
	offer, err := g.pipe.OfferRunUndo(ctx, r.ID, plan, needed, by)
	if err != nil {
		return nil, err
	}
	rep.ConfirmationToken, rep.ExpiresAt = offer.Token, voice.Time(offer.Expires)
	rep.NextStep = g.voice.RunDryRunNext()
	if a := offer.Approval; a != nil {
		rep.Approval = &ApprovalRef{ID: a.ID, URL: g.approvalLink(a.ID), Needed: a.Needed}
		rep.NextStep = g.voice.PersonDryRunNext(a.ID, rep.Approval.URL, a.Needed)
	}
	return rep, nil
}

// claimRun claims the run for its undo (pipeline.Engine.ClaimRun). When
// another request finished undoing the run meanwhile, claimRun returns
// that undo's stored report, replayed.
func (g *Guard) claimRun(ctx context.Context, r *ledger.Run, plan *undoplan.Plan, tok string, auth pipeline.Authority, by string, approval pipeline.RunApproval) (*RunReport, error) {
	done, err := g.pipe.ClaimRun(ctx, r, plan, tok, auth, by, approval)
	if err != nil || done == nil {
		return nil, err
	}
	return g.replayReport(done)
}
