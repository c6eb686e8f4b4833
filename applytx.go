package changeset

import (
	"context"
	"encoding/json"
	"errors"

	"github.com/mcp-changeset/changeset-go/ledger"
)

// The apply and undo of a transactional operation (see Guard.change): the claim, the
// state check, the operation's write and the ledger's bookkeeping are one
// transaction. A change moves pending → applied (or applied → undone) in
// one step, or the transaction rolls back and the failure is recorded in a
// second one (Guard.recordFailure).

// errRollback makes WithTx roll back after a failed operation.
var errRollback = errors.New("roll back")

// inTx is the runner of a transactional operation inside tx.
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
