package changeset

import (
	"context"
	"errors"
	"strings"
	"time"

	"github.com/mcp-changeset/changeset-go/internal/voice"
	"github.com/mcp-changeset/changeset-go/ledger"
)

// A claimed apply or undo ends in the ledger here: finish records its
// outcome, recordFailure its failure (and markFailed decides how), both
// retried through a busy ledger by retryBusy; failureText is what the agent
// reads of a failure.

// finish records the outcome of a claimed apply or undo: it moves c from
// the in-flight status from to c.Status with the fields update sets. It
// runs even if the caller's context was cancelled, since the write it
// records may already have happened, and retries a busy ledger for a while
// before giving up (the row then stays in flight for an operator).
func (g *Guard) finish(ctx context.Context, c *ledger.Change, from ledger.Status, by string) error {
	ctx = context.WithoutCancel(ctx)
	c.UpdatedAt = g.now()
	err := g.retryBusy(ctx, func(tx *ledger.Tx) error { return tx.UpdateChange(c, from) })
	if err == nil {
		g.logTransition(ctx, c, from, by)
		return nil
	}
	g.log.Error("change outcome not recorded; the row stays in flight for an operator to reconcile",
		"change_id", c.ID, "status", string(from), "outcome", string(c.Status), "err", err)
	return err
}

// busyAttempts is how often retryBusy tries a transaction.
const busyAttempts = 5

// retryBusy runs fn in a write transaction, again after a growing pause
// while the ledger stays busy (ledger.ErrBusy) past its own busy timeout:
// for the bookkeeping that must not be lost to a moment of contention
// (an outcome, a failure, a run released). It returns the last error.
func (g *Guard) retryBusy(ctx context.Context, fn func(tx *ledger.Tx) error) error {
	var err error
	for attempt := range busyAttempts {
		if err = g.ledger.WithTx(ctx, fn); err == nil || !errors.Is(err, ledger.ErrBusy) {
			return err
		}
		if attempt < busyAttempts-1 {
			time.Sleep(time.Duration(attempt+1) * 100 * time.Millisecond)
		}
	}
	return err
}

// recordFailure is the one place a failed apply or undo is recorded; it
// returns the error the caller sees. c is the change as its claim
// committed it, in flight, when the operation ran after the claim. c is
// nil when nothing of the attempt was written: the operation ran in the
// claim's transaction and that rolled back (so the token is still
// unspent), or a transactional undo in a run's undo rolled back to its
// savepoint. The row is then read again and must still be in the claim's
// from status; if someone else moved it meanwhile there is nothing to
// record. Either way the change ends apply_failed or undo_failed as
// markFailed decides.
func (g *Guard) recordFailure(ctx context.Context, cl claim, c *ledger.Change, cause error) error {
	ctx = context.WithoutCancel(ctx)
	k := cl.kind
	if c != nil {
		from := c.Status
		markFailed(c, k, cause, false)
		if err := g.finish(ctx, c, from, cl.by); err != nil {
			g.log.Error("failure not recorded", "change_id", c.ID, "err", err)
		}
		return failureText(c, cause)
	}
	var failed *ledger.Change
	err := g.retryBusy(ctx, func(tx *ledger.Tx) error {
		failed = nil // WithTx may run this again
		c, err := tx.Change(cl.id)
		if err != nil || c.Status != k.from {
			return err // someone else moved it meanwhile; nothing to record
		}
		spend(c, k, cl.by, g.now())
		markFailed(c, k, cause, true)
		failed = c
		return tx.UpdateChange(c, k.from)
	})
	if err != nil || failed == nil {
		g.log.Error("failure of a transactional change not recorded", "change_id", cl.id, "err", err)
		return failureText(&ledger.Change{ID: cl.id, Status: failedStatus(k)}, cause)
	}
	g.logTransition(ctx, failed, k.from, cl.by)
	return failureText(failed, cause)
}

// markFailed decides how a failed apply or undo (k) of c is recorded: its
// failed status, the kind of failure, the stored error type and text, and
// whether the library knows nothing was written (rolledBack says the
// operation ran inside a transaction that rolled back).
func markFailed(c *ledger.Change, k claimKind, cause error, rolledBack bool) {
	phase := "apply"
	if k.from == ledger.Applied {
		phase = "undo"
	}
	var sc *StateChangedError
	if errors.As(cause, &sc) && sc.ChangeID == "" { // an operation's own (see StateChangedError)
		sc.ChangeID, sc.Phase = c.ID, phase
	}
	if sc != nil && sc.found != nil { // what the check found, for the people who review the refusal
		if sc.Phase == "apply" {
			c.Before = sc.found
		} else {
			c.UndoFound = sc.found
		}
	}
	c.Status = failedStatus(k)
	c.ErrorType, c.Error = storedType(cause), storableText(cause.Error())
	c.UndoHash = ""
	c.Failure, c.NothingWritten = failureOf(cause), rolledBack
	if sc != nil || errors.Is(cause, errNothingRan) {
		c.NothingWritten = true // refused before the operation wrote
	}
}

// failedStatus is the status a failed claim of kind k ends in.
func failedStatus(k claimKind) ledger.Status {
	if k.from == ledger.Applied {
		return ledger.UndoFailed
	}
	return ledger.ApplyFailed
}

// runUndoFailure is why a transactional undo failed inside a run's undo:
// the reason the run's report gives. It is stored with the error type
// "RunUndo".
type runUndoFailure struct{ reason string }

func (e *runUndoFailure) Error() string { return e.reason }

// storedType is the error type the ledger keeps for a failure's cause.
func storedType(cause error) string {
	if _, ok := cause.(*runUndoFailure); ok {
		return "RunUndo"
	}
	return typeName(cause)
}

// failureOf classifies why a change failed.
func failureOf(cause error) ledger.Failure {
	var sc *StateChangedError
	switch {
	case errors.As(cause, &sc):
		return ledger.FailureStateChanged
	case errors.Is(cause, errResultTooLarge):
		return ledger.FailureResultTooLarge
	}
	return ledger.FailureError
}

// Causes of failure the library itself finds.
var (
	// errResultTooLarge: Apply returned a result over MaxResultBytes.
	errResultTooLarge = errors.New("result too large")
	// errNothingRan: the operation's code was never called.
	errNothingRan = errors.New("operation not run")
)

// storableText makes error text storable in every ledger backend: valid
// UTF-8 without NUL bytes (PostgreSQL refuses both in text columns).
func storableText(s string) string {
	return strings.ReplaceAll(strings.ToValidUTF8(s, "\uFFFD"), "\x00", "\uFFFD")
}

// failureText is the error the agent sees for a failed change.
func failureText(c *ledger.Change, cause error) error {
	verb := "applied"
	if c.Status == ledger.UndoFailed {
		verb = "undone"
	}
	var pe *PanicError
	if errors.As(cause, &pe) {
		return &ChangeError{ChangeID: c.ID, Err: cause, Msg: voice.FailedAs(c.ID, verb, voice.FailureKind("panic"))}
	}
	if msg := agentText(cause); msg != typeName(cause) {
		if !strings.Contains(msg, c.ID) { // an operation's own refusal
			msg = voice.Failed(c.ID, verb, msg)
		}
		return &ChangeError{ChangeID: c.ID, Msg: msg, Err: cause}
	}
	return &ChangeError{ChangeID: c.ID, Err: cause, Msg: voice.OperationFailed(c.ID, verb, typeName(cause))}
}

func errOperationGone(c *ledger.Change) error {
	return &ChangeError{ChangeID: c.ID, Err: errNothingRan, Msg: voice.OperationGone(c.ID, c.Action)}
}
