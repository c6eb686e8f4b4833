package changeset

import (
	"context"
	"time"

	"github.com/mcp-changeset/changeset-go/internal/pipeline"
	"github.com/mcp-changeset/changeset-go/internal/seal"
	"github.com/mcp-changeset/changeset-go/internal/token"
	"github.com/mcp-changeset/changeset-go/ledger"
	"github.com/modelcontextprotocol/go-sdk/mcp"
)

// addApprovalUndoRun registers undo_run for UserApproval: the dry run is
// the same as with tokens but returns no token, and the real undo asks the
// user to approve the plan of the dry run walk.
func (g *Guard) addApprovalUndoRun() {
	addTool(g, &mcp.Tool{
		Name:         g.toolName("undo_run"),
		Description:  g.voice.UndoRunTool(),
		OutputSchema: withApproval(outputSchema[RunReport](), false),
		Annotations:  &mcp.ToolAnnotations{DestructiveHint: ptr(true), OpenWorldHint: ptr(false)},
	}, func(ctx context.Context, req *mcp.CallToolRequest, in undoRunInput) (*mcp.CallToolResult, *RunReport, error) {
		if in.DryRun == nil || *in.DryRun {
			rep, err := g.undoRunTool(ctx, req, in.RunID, true, "")
			if rep != nil && rep.DryRun {
				rep.ConfirmationToken, rep.ExpiresAt = "", "" // the user approves in the client; next_step says so
			}
			return nil, rep, g.toolError(err)
		}
		ask, rep, err := g.approveUndoRun(ctx, req, in.RunID, in.ConfirmationToken)
		return ask, rep, g.toolError(err)
	})
}

// approveUndoRun is undo_run(dry_run=false) with user approval. Without an
// answer it walks the run as the dry run does (writing nothing) and asks
// the user about that plan, sealing the plan's hash in the state. With an
// answer it verifies the state and the answer, plans the run again and
// refuses if the plan is no longer the one the user approved; otherwise it
// claims the run by the user's approval and carries out that plan. A run
// already undone gets its stored report, replayed; a plan that undoes and
// closes nothing gets its report without asking the user anything.
func (g *Guard) approveUndoRun(ctx context.Context, req *mcp.CallToolRequest, runID, tok string) (*mcp.CallToolResult, *RunReport, error) {
	const verb = "undone"
	tool := g.toolName("undo_run")
	subject := "run " + runID
	var st *seal.State
	if answered(req) {
		scope, err := g.scopeOf(ctx, req)
		if err != nil {
			return nil, nil, err
		}
		if st, err = g.openState(req, tool, runID, token.PurposeRunUndo, scope, subject, verb); err != nil {
			return nil, nil, err
		}
		if err := readAnswer(req, subject, verb, tool); err != nil {
			return nil, nil, err
		}
	}
	r, err := g.scopedRun(ctx, req, runID)
	if err != nil {
		return nil, nil, err
	}
	switch r.Status {
	case ledger.RunUndone, ledger.RunPartiallyUndone:
		rep, err := g.replayReport(r)
		return nil, rep, err
	case ledger.RunUndoing:
		return nil, nil, g.runBusy(r.ID)
	}
	if !g.WritesEnabled() {
		return nil, nil, &WritesDisabledError{EnvVar: g.opts.WriteModeEnv}
	}
	if tok != "" && !(token.Valid(tok, token.ConfirmPrefix) && token.Matches(r.ConfirmHash, token.PurposeRunUndo, r.ID, r.PlanHash, tok)) {
		return nil, nil, refuse(ErrInvalidToken, "", "%s", g.voice.RunTokenNotNeeded(r.ID))
	}
	plan, err := g.pipe.PlanRun(ctx, r)
	if err != nil {
		return nil, nil, err
	}
	if st == nil && len(plan.Actions()) == 0 {
		return nil, g.nothingToUndo(plan, r.ID, false), nil // nothing to ask the user about
	}
	if st == nil && !canElicitForm(req) {
		return nil, nil, noElicitation(subject, verb)
	}
	if st == nil {
		state := seal.State{Tool: tool, ID: r.ID, Purpose: token.PurposeRunUndo, Hash: string(plan.Hash), Scope: string(r.ScopeHash),
			Expires: seal.ExpiresAt(g.now(), time.Time{}).Unix()}
		return g.ask(runMessage(r, reportOf(g.voice, plan, r.ID, true)), state), nil, nil
	}
	if plan.Hash != ledger.Digest(st.Hash) {
		return nil, nil, refuse(ErrPlanChanged, "", "%s", g.voice.RunPlanChanged(r.ID))
	}
	stored, err := g.claimRun(ctx, r, plan, "", pipeline.ByUser, approvalActor, pipeline.RunApproval{})
	if err != nil || stored != nil {
		return nil, stored, err
	}
	rep, err := g.executeRun(ctx, r, plan, plan.Actions(), approvalActor)
	return nil, rep, err
}
