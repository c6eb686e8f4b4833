package changeset

import (
	"context"
	"encoding/json"
	"errors"

	"github.com/mcp-changeset/changeset-go/ledger"
)

// The apply and undo of a TxOperation: the claim, the state check, the
// operation's write and the ledger's bookkeeping are one transaction. A
// change moves pending → applied (or applied → undone) in one step, or the
// transaction rolls back and the failure is recorded in a second one.

// errRollback makes WithTx roll back after a failed operation.
var errRollback = errors.New("roll back")

// txOpOf returns the TxOperation of a change, or nil when the change is
// unknown or its operation is an ordinary one. The lookup reads the row
// without a lock; the claim reads it again under the write lock.
func (g *Guard) txOpOf(ctx context.Context, id string) *op {
	if !validID(id, changeIDPrefix) {
		return nil
	}
	c, err := g.ledger.Get(ctx, id)
	if err != nil {
		return nil
	}
	if o, ok := g.lookup(c.Action); ok && o.tx != nil {
		return o
	}
	return nil
}

// inTx is the runner of a TxOperation inside tx.
func (g *Guard) inTx(ctx context.Context, tx *ledger.Tx, o *op) runner {
	r := runner{apply: func(p json.RawMessage) (any, error) { return o.tx.apply(ctx, tx.SQL(), p) }}
	if o.tx.observe != nil {
		r.observe = func(p json.RawMessage) (json.RawMessage, error) { return g.observeTx(ctx, tx, o, p) }
	}
	if o.tx.undo != nil {
		r.undo = func(p, res json.RawMessage) error { return o.tx.undo(ctx, tx.SQL(), p, res) }
	}
	return r
}

func (g *Guard) applyTx(ctx context.Context, o *op, id, token, scope, by string, trusted bool) (*ApplyResult, error) {
	if err := checkClaimArgs(applyClaim, id, token, trusted); err != nil {
		return nil, err
	}
	var res *ApplyResult
	err := g.inOneTx(ctx, applyClaim, o, id, token, scope, by, trusted, func(tx *ledger.Tx, c *ledger.Change) error {
		var err error
		res, err = g.performApply(ctx, c, g.inTx(ctx, tx, o))
		return err
	})
	return res, err
}

func (g *Guard) undoTx(ctx context.Context, o *op, id, token, scope, by string, trusted bool) (*UndoResult, error) {
	if err := checkClaimArgs(undoClaim, id, token, trusted); err != nil {
		return nil, err
	}
	if o.tx.undo == nil {
		return nil, g.claimRefusalOnly(ctx, id, token, scope, by, trusted)
	}
	err := g.inOneTx(ctx, undoClaim, o, id, token, scope, by, trusted, func(tx *ledger.Tx, c *ledger.Change) error {
		return g.performUndo(ctx, c, g.inTx(ctx, tx, o))
	})
	if err != nil {
		return nil, err
	}
	return &UndoResult{Status: "undone", ChangeID: id}, nil
}

// claimRefusalOnly returns the refusal a claim of an operation without an
// inverse gets (claimIn refuses it), without claiming anything.
func (g *Guard) claimRefusalOnly(ctx context.Context, id, token, scope, by string, trusted bool) error {
	var refusal error
	err := g.ledger.WithTx(ctx, func(tx *ledger.Tx) error {
		_, ref, err := g.claimIn(tx, undoClaim, id, token, scope, by, trusted)
		refusal = ref
		return err
	})
	if err != nil {
		return err
	}
	return refusal
}

// inOneTx claims the change, runs perform and records the outcome in one
// write transaction. If perform fails, the transaction rolls back (the
// operation's writes with it) and the failure is recorded in a second
// transaction that claims the change again, so the token is spent exactly
// as it would be for an ordinary operation.
func (g *Guard) inOneTx(ctx context.Context, k claimKind, o *op, id, token, scope, by string, trusted bool,
	perform func(tx *ledger.Tx, c *ledger.Change) error) error {
	var refusal, failure error
	var done *ledger.Change
	err := g.ledger.WithTx(ctx, func(tx *ledger.Tx) error {
		c, ref, err := g.claimIn(tx, k, id, token, scope, by, trusted)
		if err != nil || ref != nil {
			refusal = ref
			return err
		}
		if o.name != c.Action {
			return errors.New("the change's operation changed between lookup and claim")
		}
		if err := perform(tx, c); err != nil {
			failure = err
			return errRollback
		}
		if err := tx.UpdateChange(c, k.from); err != nil {
			return err
		}
		done = c
		return nil
	})
	switch {
	case failure != nil:
		return g.recordTxFailure(ctx, k, id, token, scope, by, trusted, failure)
	case err != nil:
		return claimConflict(id, err)
	case refusal != nil:
		return refusal
	}
	g.logTransition(done, k.from, by)
	return nil
}

// recordTxFailure records a failed transactional apply or undo: it claims
// the change again (the first transaction rolled back, so the token is
// still unspent) and moves it straight to apply_failed or undo_failed.
func (g *Guard) recordTxFailure(ctx context.Context, k claimKind, id, token, scope, by string, trusted bool, cause error) error {
	ctx = context.WithoutCancel(ctx)
	var failed *ledger.Change
	err := g.ledger.WithTx(ctx, func(tx *ledger.Tx) error {
		c, ref, err := g.claimIn(tx, k, id, token, scope, by, trusted)
		if err != nil || ref != nil {
			return err // someone else moved it meanwhile; nothing to record
		}
		markFailed(c, cause)
		failed = c
		return tx.UpdateChange(c, k.from)
	})
	if err != nil || failed == nil {
		g.log.Error("failure of a transactional change not recorded", "change_id", id, "err", err)
		return failureText(&ledger.Change{ID: id, Status: failedStatus(k)}, cause)
	}
	g.logTransition(failed, k.from, by)
	return failureText(failed, cause)
}

func failedStatus(k claimKind) ledger.Status {
	if k.from == ledger.Applied {
		return ledger.UndoFailed
	}
	return ledger.ApplyFailed
}
