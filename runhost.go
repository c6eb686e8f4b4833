package changeset

import (
	"context"
	"encoding/json"
	"errors"
	"log/slog"

	"github.com/mcp-changeset/changeset-go/internal/runundo"
	"github.com/mcp-changeset/changeset-go/internal/undoplan"
	"github.com/mcp-changeset/changeset-go/ledger"
)

// runs is the engine that plans and carries out the undo of the Guard's
// runs (package runundo), seeing the Guard through runHost.
func (g *Guard) runs() *runundo.Engine {
	return &runundo.Engine{Ledger: g.ledger, Voice: g.voice, Now: g.now, Host: runHost{g}}
}

// runHost is the Guard as the run-undo engine sees it: its operations and
// its one path for a change's undo (runundo.Host).
type runHost struct{ g *Guard }

func (h runHost) Op(c *ledger.Change) undoplan.Op {
	o, ok := h.g.lookup(c.Action)
	if !ok {
		return undoplan.Op{}
	}
	return undoplan.Op{Registered: true, HasUndo: o.hasUndo(), Observes: o.hasObserve(), Tx: o.tx != nil}
}

// Observe reads the current state of what c touches. A transactional operation's
// Observe runs in tx, or, when tx is nil, in a transaction that is rolled
// back.
func (h runHost) Observe(ctx context.Context, tx *ledger.Tx, c *ledger.Change) (json.RawMessage, error) {
	g := h.g
	o, ok := g.lookup(c.Action)
	switch {
	case !ok || !o.hasObserve():
		return nil, runundo.ErrNoObserve
	case o.tx == nil:
		return g.observe(ctx, o, c.Payload)
	case tx != nil:
		return g.observeTx(ctx, tx, o, c.Payload)
	}
	var state json.RawMessage
	err := g.ledger.WithTx(ctx, func(tx *ledger.Tx) error {
		var err error
		if state, err = g.observeTx(ctx, tx, o, c.Payload); err != nil {
			return err
		}
		return errRollback
	})
	if errors.Is(err, errRollback) {
		err = nil
	}
	return state, err
}

func (h runHost) UndoIn(ctx context.Context, tx *ledger.Tx, c *ledger.Change) error {
	o, ok := h.g.lookup(c.Action)
	if !ok || o.tx == nil {
		return errOperationGone(c)
	}
	return h.g.performUndo(ctx, c, h.g.inTx(ctx, tx, o))
}

func (h runHost) Undo(ctx context.Context, c *ledger.Change, by string, undoing map[string]bool) error {
	_, err := h.g.undoChange(ctx, claim{kind: undoClaim, id: c.ID, auth: byTrusted, scope: c.ScopeHash, by: by}, undoing)
	if _, ok := errors.AsType[*StateChangedError](err); ok {
		return runundo.ErrStateChanged
	}
	return err
}

func (h runHost) RecordFailure(ctx context.Context, c *ledger.Change, by, reason string) {
	_ = h.g.recordFailure(ctx, claim{kind: undoClaim, id: c.ID, auth: byTrusted, by: by}, nil, &runUndoFailure{reason})
}

func (h runHost) Transition(ctx context.Context, c *ledger.Change, from ledger.Status, by string) {
	h.g.logTransition(ctx, c, from, by)
}

// Unreadable logs a run undo's failed read of c's current state in full
// (see logFailure) and returns the reason the report gives for leaving c
// as it is.
func (h runHost) Unreadable(ctx context.Context, c *ledger.Change, beforeUndo bool, err error) string {
	ref := h.g.logFailure(ctx, "observe failed in a run undo", err,
		slog.String("change_id", c.ID), slog.String("action", c.Action), slog.String("run_id", c.RunID))
	return h.g.voice.ReasonUnreadable(beforeUndo, ref)
}

func (h runHost) Text(err error) string { return agentText(err) }
