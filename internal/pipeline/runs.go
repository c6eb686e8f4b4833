package pipeline

import (
	"context"
	"encoding/json"

	"github.com/mcp-changeset/changeset-go/internal/runundo"
	"github.com/mcp-changeset/changeset-go/internal/undoplan"
	"github.com/mcp-changeset/changeset-go/ledger"
)

// Runs is the engine that plans and carries out the undo of runs
// (package runundo), seeing the pipeline through runHost.
func (e *Engine) Runs() *runundo.Engine {
	return &runundo.Engine{Ledger: e.Ledger, Voice: e.Voice, Now: e.Now, Host: runHost{e}}
}

// runHost is the pipeline as the run-undo engine sees it: the operations
// and the one path for a change's undo (runundo.Host).
type runHost struct{ e *Engine }

func (h runHost) Op(c *ledger.Change) undoplan.Op {
	o, ok := h.e.Op(c.Action)
	if !ok {
		return undoplan.Op{}
	}
	return undoplan.Op{Registered: true, HasUndo: o.HasUndo(), Observes: o.HasObserve(), Tx: o.Tx != nil}
}

func (h runHost) Observe(ctx context.Context, tx *ledger.Tx, c *ledger.Change) (json.RawMessage, error) {
	return h.e.Observe(ctx, tx, c)
}

func (h runHost) UndoIn(ctx context.Context, tx *ledger.Tx, c *ledger.Change) error {
	o, ok := h.e.Op(c.Action)
	if !ok || o.Tx == nil {
		return h.e.operationGone(c)
	}
	return h.e.performUndo(c, h.e.inTx(ctx, tx, o))
}

func (h runHost) Undo(ctx context.Context, c *ledger.Change, by string, undoing map[string]bool) error {
	_, err := h.e.Undo(ctx, Claim{Kind: UndoClaim, ID: c.ID, Auth: ByTrusted, Scope: c.ScopeHash, By: by}, undoing)
	if err != nil && h.e.Host.Is(err, StateChanged) {
		return runundo.ErrStateChanged
	}
	return err
}

func (h runHost) RecordFailure(ctx context.Context, c *ledger.Change, by, reason string) {
	_ = h.e.recordFailure(ctx, Claim{Kind: UndoClaim, ID: c.ID, Auth: ByTrusted, By: by}, nil, &runUndoFailure{reason})
}

func (h runHost) Transition(ctx context.Context, c *ledger.Change, from ledger.Status, by string) {
	h.e.Host.Transition(ctx, c, from, by)
}

func (h runHost) Unreadable(ctx context.Context, c *ledger.Change, beforeUndo bool, err error) string {
	return h.e.Host.Unreadable(ctx, c, beforeUndo, err)
}

func (h runHost) Text(err error) string { return h.e.Host.Text(err) }
