package changeset

import (
	"context"

	"github.com/mcp-changeset/changeset-go/internal/pipeline"
	"github.com/mcp-changeset/changeset-go/internal/voice"
	"github.com/mcp-changeset/changeset-go/ledger"
	"github.com/modelcontextprotocol/go-sdk/mcp"
)

// Apply applies a pending change for trusted code, as apply_change does for
// the agent: it needs the change's confirmation token, spends it, checks
// that the observed state is still the one the preview saw, and runs the
// operation's Apply on the stored payload.
func (g *Guard) Apply(ctx context.Context, changeID, confirmationToken string) (*ApplyResult, error) {
	by, err := g.agentBy(ctx, nil)
	if err != nil {
		return nil, err
	}
	return g.apply(ctx, nil, changeID, confirmationToken, pipeline.ByToken, by)
}

// Undo undoes an applied change with its undo token, as undo_change does.
func (g *Guard) Undo(ctx context.Context, changeID, undoToken string) (*UndoResult, error) {
	by, err := g.agentBy(ctx, nil)
	if err != nil {
		return nil, err
	}
	return g.undo(ctx, nil, changeID, undoToken, pipeline.ByToken, by)
}

// UndoAs undoes an applied change on behalf of a person acting through
// trusted code (a dashboard, a support tool), without an undo token. by
// names the person (see Person) and is recorded in the ledger. The state
// checks, the undo window and the write mode apply as for the agent.
// Scopes are not checked: trusted code may undo any change.
func (g *Guard) UndoAs(ctx context.Context, changeID, by string) (*UndoResult, error) {
	c, err := g.get(ctx, changeID)
	if err != nil {
		return nil, err
	}
	cl := pipeline.Claim{Kind: pipeline.UndoClaim, ID: changeID, Auth: pipeline.ByTrusted, Scope: c.ScopeHash, By: by}
	if _, err := g.pipe.Undo(ctx, cl, nil); err != nil {
		return nil, err
	}
	return &UndoResult{Status: "undone", ChangeID: changeID, Receipt: g.receiptOf(ctx, changeID, ledger.Undone)}, nil
}

// apply is the apply of a change for the agent (req is nil for trusted
// code calling Apply): auth is what the caller's path lets through, a
// token or the user's approval.
func (g *Guard) apply(ctx context.Context, req *mcp.CallToolRequest, id, token string, auth pipeline.Authority, by string) (*ApplyResult, error) {
	ctx = g.withPrincipal(ctx, req)
	if !g.WritesEnabled() {
		return nil, g.writesOff(id, pipeline.ApplyClaim.Verb)
	}
	scope, err := g.scopeOf(ctx, req)
	if err != nil {
		return nil, err
	}
	cl := pipeline.Claim{Kind: pipeline.ApplyClaim, ID: id, Token: token, Auth: auth, Scope: scope, By: by}
	if auth == pipeline.ByToken { // people may have to approve as well
		if cl.Approval, err = g.changeApproval(ctx, req, cl); err != nil {
			return nil, err
		}
	}
	out, err := g.pipe.Apply(ctx, cl)
	if err != nil {
		return nil, err
	}
	c := out.Change
	res := &ApplyResult{Status: "applied", ChangeID: c.ID, Result: c.Result, UndoToken: out.UndoToken,
		Receipt: g.receiptOf(ctx, c.ID, ledger.Applied)}
	if out.UndoToken != "" {
		res.UndoExpiresAt = voice.Time(c.UndoExpiresAt)
	}
	return res, nil
}

// undo is the undo of one change for the agent, as apply.
func (g *Guard) undo(ctx context.Context, req *mcp.CallToolRequest, id, token string, auth pipeline.Authority, by string) (*UndoResult, error) {
	ctx = g.withPrincipal(ctx, req)
	scope, err := g.scopeOf(ctx, req)
	if err != nil {
		return nil, err
	}
	cl := pipeline.Claim{Kind: pipeline.UndoClaim, ID: id, Token: token, Auth: auth, Scope: scope, By: by}
	if auth == pipeline.ByToken { // people may have to approve as well
		if cl.Approval, err = g.changeApproval(ctx, req, cl); err != nil {
			return nil, err
		}
	}
	if _, err := g.pipe.Undo(ctx, cl, nil); err != nil {
		return nil, err
	}
	return &UndoResult{Status: "undone", ChangeID: id, Receipt: g.receiptOf(ctx, id, ledger.Undone)}, nil
}
