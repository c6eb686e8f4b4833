package changeset

import (
	"context"
	"encoding/json"
	"errors"

	"github.com/mcp-changeset/changeset-go/internal/token"
	"github.com/mcp-changeset/changeset-go/internal/voice"
	"github.com/mcp-changeset/changeset-go/ledger"
	"github.com/modelcontextprotocol/go-sdk/mcp"
)

// Status returns a change as the agent may see it (no tokens, no digests,
// of an error only its kind or type name), as get_change_status does,
// with the receipts of its transitions (see Receipt). A change of another
// scope is reported as not found.
func (g *Guard) Status(ctx context.Context, changeID string) (*ChangeStatus, error) {
	return g.status(ctx, nil, changeID)
}

func (g *Guard) status(ctx context.Context, req *mcp.CallToolRequest, id string) (*ChangeStatus, error) {
	scope, err := g.scopeOf(ctx, req)
	if err != nil {
		return nil, err
	}
	c, err := g.get(ctx, id)
	if err != nil {
		return nil, err
	}
	if c.ScopeHash != scope {
		return nil, changeNotFound(id)
	}
	st := g.statusOf(c)
	entries, err := g.transitions(ctx, c.ID)
	if err != nil {
		return nil, err
	}
	st.Receipts = receiptsOf(entries)
	if o, ok := g.lookup(c.Action); ok && o.Approvers > 0 { // people approve its writes: say where that stands
		all, err := g.ledger.Approvals(ctx, ledger.ApprovalFilter{ChangeID: c.ID, Limit: 1})
		if err != nil {
			return nil, err
		}
		if len(all) > 0 {
			a := all[0]
			st.Approval = &ApprovalRef{ID: a.ID, URL: g.approvalLink(a.ID), Needed: a.Needed, Status: string(a.StatusAt(g.now()))}
		}
	}
	return st, nil
}

// Record returns the full ledger row of a change for trusted code and
// operators, whatever its scope: payload, result, snapshots and the full
// text of any error. The digests of live tokens are left out.
func (g *Guard) Record(ctx context.Context, changeID string) (*ledger.Change, error) {
	c, err := g.get(ctx, changeID)
	if err != nil {
		return nil, err
	}
	c.ConfirmHash, c.UndoHash = "", ""
	return c, nil
}

// Observe returns the current state of what a change touches, read now
// through its operation's Observe (an ObserveTx runs in a transaction that
// is rolled back) and encoded as canonical JSON, whatever the change's
// status and scope: the state a Guard compares with the change's snapshots.
// It is for trusted code, such as tests (changesettest.CheckOperation
// reads the state this way) and tools that show an operator what an undo
// would find. It fails with [ErrNotFound] for an unknown change or one
// whose operation is not registered on g, and returns an error wrapping
// [ErrRefused] for an operation that has no Observe.
func (g *Guard) Observe(ctx context.Context, changeID string) (json.RawMessage, error) {
	c, err := g.get(ctx, changeID)
	if err != nil {
		return nil, err
	}
	o, ok := g.lookup(c.Action)
	switch {
	case !ok:
		return nil, refuse(ErrNotFound, changeID, "change %s was made by operation %s, which this server does not register", changeID, voice.Quote(c.Action))
	case !o.HasObserve():
		return nil, refuse(ErrRefused, changeID, "operation %s has no Observe, so change %s has no state to read", voice.Quote(c.Action), changeID)
	}
	return g.pipe.Observe(ctx, nil, c)
}

func (g *Guard) get(ctx context.Context, id string) (*ledger.Change, error) {
	if !token.ValidID(id, token.ChangeIDPrefix) {
		return nil, changeNotFound(id)
	}
	c, err := g.ledger.Change(ctx, id)
	if errors.Is(err, ledger.ErrNotFound) {
		return nil, changeNotFound(id)
	}
	return c, err
}
