// Package runundo plans and carries out the undo of a run: the dry run's
// walk over the run's changes ([Engine.Plan]) and the real undo of the
// plan a caller reviewed ([Engine.Execute]). The rules that decide each
// change are package undoplan's; this package reads the states they are
// decided on, runs the inverses, and keeps the ledger's rows in step.
//
// The engine knows the Guard only through [Host], which the change
// pipeline (package pipeline) implements: the server's operations, their
// Observe and inverse, the one path a single change's undo takes, and how
// the Guard logs and words a failure. The run's own bookkeeping (its
// claim, its status, its release) is the pipeline's, and the report a
// caller reads is the Guard's.
package runundo

import (
	"cmp"
	"context"
	"encoding/json"
	"errors"
	"slices"
	"time"

	"github.com/mcp-changeset/changeset-go/internal/undoplan"
	"github.com/mcp-changeset/changeset-go/internal/voice"
	"github.com/mcp-changeset/changeset-go/ledger"
)

// Host is what the engine needs of the Guard, as the change pipeline
// serves it.
type Host interface {
	// Op is what the server knows of c's operation.
	Op(c *ledger.Change) undoplan.Op
	// Observe reads the current state of what c touches, in canonical
	// JSON, through its operation's Observe: inside tx for a
	// transactional operation when tx is not nil, else on its own (in
	// a transaction that rolls back). It returns [ErrNoObserve] when the
	// operation is gone or cannot observe.
	Observe(ctx context.Context, tx *ledger.Tx, c *ledger.Change) (json.RawMessage, error)
	// UndoIn runs the inverse of c, a transactional operation's change, inside tx,
	// after checking that its resource is still as the apply left it. On
	// success c is undone, not yet written.
	UndoIn(ctx context.Context, tx *ledger.Tx, c *ledger.Change) error
	// Undo undoes c on its own, as a person acting through trusted code,
	// by the one path for a change's undo (claim, check, inverse,
	// outcome), holding it back by [Engine.Hold] with undoing as the
	// changes undone too. It returns an error matching [ErrStateChanged]
	// when the resource moved before the claim, one holding a *HeldError
	// when a dependency holds c back, or what failed the undo.
	Undo(ctx context.Context, c *ledger.Change, by string, undoing map[string]bool) error
	// RecordFailure records that the undo of c by by failed for reason
	// in a transaction that rolled back: nothing of it was written.
	RecordFailure(ctx context.Context, c *ledger.Change, by, reason string)
	// Transition reports that c moved from from to c.Status, done by by.
	Transition(ctx context.Context, c *ledger.Change, from ledger.Status, by string)
	// Unreadable logs a failed read (err) of c's current state and
	// returns the reason the report gives for leaving c as it is;
	// beforeUndo says the read was made right before its undo (false
	// while planning).
	Unreadable(ctx context.Context, c *ledger.Change, beforeUndo bool, err error) string
	// Text is what the agent may read of err.
	Text(err error) string
}

// Engine plans and carries out the undo of runs for one Guard.
type Engine struct {
	Ledger *ledger.Ledger
	Voice  *voice.Voice // words every reason
	Now    func() time.Time
	Host   Host
}

// Errors a Host returns to the engine.
var (
	// ErrNoObserve: the operation is gone or has no Observe.
	ErrNoObserve = errors.New("no observe")
	// ErrStateChanged: a change's resource moved between the engine's
	// check and the claim of its undo.
	ErrStateChanged = errors.New("state changed")
)

// HeldError is the cause of an undo held back because it would remove
// what a change that stays in place depends on: Reason is what a run's
// report says of it (see [Engine.Hold]).
type HeldError struct{ Reason string }

func (e *HeldError) Error() string { return e.Reason }

// NewestFirst orders changes by when they were applied, newest first.
// Changes applied in the same instant (a coarse or frozen clock) keep the
// order their applies committed in: applied maps a change's ID to the Seq
// of the history entry that recorded its apply (see [AppliedOrder]). Only
// changes without such an entry (rows from before the history) fall back
// to when they were previewed and then to their IDs.
func NewestFirst(cs []*ledger.Change, applied map[string]int64) {
	slices.SortFunc(cs, func(a, b *ledger.Change) int {
		return cmp.Or(b.AppliedAt.Compare(a.AppliedAt), cmp.Compare(applied[b.ID], applied[a.ID]),
			b.CreatedAt.Compare(a.CreatedAt), cmp.Compare(b.ID, a.ID))
	})
}

// AppliedOrder reads run runID's history and returns, for each of its
// changes that was applied, the Seq of the entry that recorded the apply:
// the order in which the applies committed, which [NewestFirst] uses to
// order changes applied in the same instant.
func AppliedOrder(ctx context.Context, l *ledger.Ledger, runID string) (map[string]int64, error) {
	entries, err := l.History(ctx, ledger.HistoryFilter{RunID: runID})
	if err != nil {
		return nil, err
	}
	applied := map[string]int64{}
	for _, e := range entries {
		// The first entry that reached applied is the apply; a later one
		// is an undo given back, which does not move the change in time.
		if _, seen := applied[e.ChangeID]; e.ChangeID != "" && e.To == string(ledger.Applied) && !seen {
			applied[e.ChangeID] = e.Seq
		}
	}
	return applied, nil
}

// refusal is a step the engine refuses itself, in the agent's words.
type refusal struct{ msg string }

func (e *refusal) Error() string { return e.msg }

// undoFailed is the reason a report gives for an undo that failed with
// err.
func (e *Engine) undoFailed(err error) string {
	if r, ok := errors.AsType[*refusal](err); ok {
		return e.Voice.ReasonUndoFailed(r.msg)
	}
	return e.Voice.ReasonUndoFailed(e.Host.Text(err))
}
