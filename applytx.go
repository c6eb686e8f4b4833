package changeset

import (
	"context"
	"encoding/json"
	"errors"

	"github.com/mcp-changeset/changeset-go/ledger"
)

// The apply and undo of a TxOperation (see Guard.change): the claim, the
// state check, the operation's write and the ledger's bookkeeping are one
// transaction. A change moves pending → applied (or applied → undone) in
// one step, or the transaction rolls back and the failure is recorded in a
// second one.

// errRollback makes WithTx roll back after a failed operation.
var errRollback = errors.New("roll back")

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

// recordTxFailure records a failed transactional apply or undo: it claims
// the change again (the first transaction rolled back, so the token is
// still unspent) and moves it straight to apply_failed or undo_failed.
func (g *Guard) recordTxFailure(ctx context.Context, k claimKind, id, token string, scope ledger.Digest, by string, trusted bool, cause error) error {
	ctx = context.WithoutCancel(ctx)
	var failed *ledger.Change
	err := g.ledger.WithTx(ctx, func(tx *ledger.Tx) error {
		c, ref, err := g.claimIn(tx, k, id, token, scope, by, trusted)
		if err != nil || ref != nil {
			return err // someone else moved it meanwhile; nothing to record
		}
		markFailed(c, cause, true)
		failed = c
		return tx.UpdateChange(c, k.from)
	})
	if err != nil || failed == nil {
		g.log.Error("failure of a transactional change not recorded", "change_id", id, "err", err)
		return failureText(&ledger.Change{ID: id, Status: failedStatus(k)}, cause)
	}
	g.logTransition(ctx, failed, k.from, by)
	return failureText(failed, cause)
}

func failedStatus(k claimKind) ledger.Status {
	if k.from == ledger.Applied {
		return ledger.UndoFailed
	}
	return ledger.ApplyFailed
}
