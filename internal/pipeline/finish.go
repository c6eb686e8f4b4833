package pipeline

import (
	"context"
	"errors"
	"strings"
	"time"

	"github.com/mcp-changeset/changeset-go/internal/voice"
	"github.com/mcp-changeset/changeset-go/ledger"
)

// A claimed apply or undo ends in the ledger here: finish records its
// outcome, recordFailure its failure (and markFailed how), both retried
// through a busy ledger by retryBusy.

// finish records the outcome of a claimed apply or undo: it moves c from
// the in-flight status from to c.Status with the fields update sets. It
// runs even if the caller's context was cancelled, since the write it
// records may already have happened, and retries a busy ledger for a while
// before giving up (the row then stays in flight for an operator).
func (e *Engine) finish(ctx context.Context, c *ledger.Change, from ledger.Status, by string) error {
	ctx = context.WithoutCancel(ctx)
	c.UpdatedAt = e.Now()
	err := e.retryBusy(ctx, func(tx *ledger.Tx) error { return tx.UpdateChange(c, from) })
	if err == nil {
		e.Host.Transition(ctx, c, from, by)
		return nil
	}
	e.Log.Error("change outcome not recorded; the row stays in flight for an operator to reconcile",
		"change_id", c.ID, "status", string(from), "outcome", string(c.Status), "err", err)
	return err
}

// busyAttempts is how often retryBusy tries a transaction.
const busyAttempts = 5

// retryBusy runs fn in a write transaction, again after a growing pause
// while the ledger stays busy (ledger.ErrBusy) past its own busy timeout:
// for the bookkeeping that must not be lost to a moment of contention
// (an outcome, a failure, a run released). It returns the last error.
// None of that is a claim, so the transaction is lazy: under
// ledger.DurabilityClaims it rides on the next claim's sync, and a machine
// that stops first leaves the row in flight for an operator, as a crash
// does.
func (e *Engine) retryBusy(ctx context.Context, fn func(tx *ledger.Tx) error) error {
	var err error
	for attempt := range busyAttempts {
		if err = e.Ledger.WithLazyTx(ctx, fn); err == nil || !errors.Is(err, ledger.ErrBusy) {
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
// From status; if someone else moved it meanwhile there is nothing to
// record. Either way the change ends apply_failed or undo_failed as
// markFailed decides.
func (e *Engine) recordFailure(ctx context.Context, cl Claim, c *ledger.Change, cause error) error {
	ctx = context.WithoutCancel(ctx)
	k := cl.Kind
	f := e.failure(cl.ID, k, cause)
	if c != nil {
		from := c.Status
		markFailed(c, k, f, cause, false)
		if err := e.finish(ctx, c, from, cl.By); err != nil {
			e.Log.Error("failure not recorded", "change_id", c.ID, "err", err)
		}
		return f.Err
	}
	var failed *ledger.Change
	err := e.retryBusy(ctx, func(tx *ledger.Tx) error {
		failed = nil // WithTx may run this again
		c, err := tx.Change(cl.ID)
		if err != nil || c.Status != k.From {
			return err // someone else moved it meanwhile; nothing to record
		}
		spend(c, k, cl.By, e.Now())
		markFailed(c, k, f, cause, true)
		failed = c
		return tx.UpdateChange(c, k.From)
	})
	if err != nil || failed == nil {
		e.Log.Error("failure of a transactional change not recorded", "change_id", cl.ID, "err", err)
		return f.Err
	}
	e.Host.Transition(ctx, failed, k.From, cl.By)
	return f.Err
}

// failure is how the failure of change id, claimed for k, is recorded
// and told, as the Guard reads cause (Errors.Failed); the cause of a
// failed step of a run's undo is stored as RunUndoType.
func (e *Engine) failure(id string, k ClaimKind, cause error) Failure {
	f := e.Host.Failed(id, k.Phase(), cause)
	if _, ok := cause.(*runUndoFailure); ok {
		f.Type = RunUndoType
	}
	return f
}

// markFailed records the failure f of the apply or undo (k) of c: its
// failed status, the kind of failure, the stored error type and text, what
// the check found, and whether the library knows nothing was written
// (rolledBack says the operation ran inside a transaction that rolled
// back).
func markFailed(c *ledger.Change, k ClaimKind, f Failure, cause error, rolledBack bool) {
	if f.Found != nil { // what the check found, for the people who review the refusal
		if k.From == ledger.Pending {
			c.Before = f.Found
		} else {
			c.UndoFound = f.Found
		}
	}
	c.Status = failedStatus(k)
	c.ErrorType, c.Error = f.Type, StorableText(cause.Error())
	c.UndoHash = ""
	c.Failure, c.NothingWritten = f.Kind, rolledBack
	if f.Kind == ledger.FailureStateChanged || errors.Is(cause, errNothingRan) {
		c.NothingWritten = true // refused before the operation wrote
	}
}

// failedStatus is the status a failed claim of kind k ends in.
func failedStatus(k ClaimKind) ledger.Status {
	if k.From == ledger.Applied {
		return ledger.UndoFailed
	}
	return ledger.ApplyFailed
}

// runUndoFailure is why a transactional undo failed inside a run's undo:
// the reason the run's report gives. It is stored with the error type
// RunUndoType.
type runUndoFailure struct{ reason string }

func (e *runUndoFailure) Error() string { return e.reason }

// RunUndoType is the error type the ledger keeps for a change whose
// transactional undo failed inside a run's undo.
const RunUndoType = "RunUndo"

// Causes of failure the library itself finds.
var (
	// ErrResultTooLarge: Apply returned a result over MaxResultBytes.
	ErrResultTooLarge = errors.New("result too large")
	// errNothingRan: the operation's code was never called.
	errNothingRan = errors.New("operation not run")
)

// operationGone is the failure of a change whose operation the server
// does not have (any more).
func (e *Engine) operationGone(c *ledger.Change) error {
	return e.Host.ChangeError(NoKind, c.ID, voice.OperationGone(c.ID, c.Action), errNothingRan)
}

// StorableText makes error text storable in every ledger backend: valid
// UTF-8 without NUL bytes (PostgreSQL refuses both in text columns).
func StorableText(s string) string {
	return strings.ReplaceAll(strings.ToValidUTF8(s, "\uFFFD"), "\x00", "\uFFFD")
}
