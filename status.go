package changeset

import (
	"context"
	"errors"

	"github.com/mcp-changeset/changeset-go/internal/token"
	"github.com/mcp-changeset/changeset-go/ledger"
	"github.com/modelcontextprotocol/go-sdk/mcp"
)

// Status returns a change as the agent may see it (no tokens, no digests,
// of an error only its kind or type name), as get_change_status does. A change of
// another scope is reported as not found.
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
	return g.statusOf(c), nil
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

func (g *Guard) get(ctx context.Context, id string) (*ledger.Change, error) {
	if !token.ValidID(id, token.ChangeIDPrefix) {
		return nil, changeNotFound(id)
	}
	c, err := g.ledger.Get(ctx, id)
	if errors.Is(err, ledger.ErrNotFound) {
		return nil, changeNotFound(id)
	}
	return c, err
}
