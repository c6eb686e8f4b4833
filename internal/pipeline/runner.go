package pipeline

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"

	"github.com/mcp-changeset/changeset-go/internal/canonjson"
	"github.com/mcp-changeset/changeset-go/internal/runundo"
	"github.com/mcp-changeset/changeset-go/ledger"
)

// runner calls an operation's functions: directly for an ordinary
// operation (external), or inside a ledger transaction for a
// transactional operation (inTx), so that the claim, the state check, the
// operation's write and the ledger's bookkeeping of a transactional
// operation are one transaction (see Engine.claim). observe is nil when
// the operation has no Observe, undo when it has no inverse.
type runner struct {
	observe func(payload json.RawMessage) (json.RawMessage, error)
	apply   func(payload json.RawMessage) (any, error)
	undo    func(payload, result json.RawMessage) error
}

// external is the runner of an ordinary operation.
func (e *Engine) external(ctx context.Context, o *Op) runner {
	var r runner
	if o.Apply != nil {
		r.apply = func(p json.RawMessage) (any, error) { return o.Apply(ctx, p) }
	}
	if o.Observe != nil {
		r.observe = func(p json.RawMessage) (json.RawMessage, error) { return observe(ctx, o, p) }
	}
	if o.Undo != nil {
		r.undo = func(p, res json.RawMessage) error { return o.Undo(ctx, p, res) }
	}
	return r
}

// inTx is the runner of a transactional operation inside tx.
func (e *Engine) inTx(ctx context.Context, tx *ledger.Tx, o *Op) runner {
	r := runner{apply: func(p json.RawMessage) (any, error) { return o.Tx.Apply(ctx, tx.SQL(), p) }}
	if o.Tx.Observe != nil {
		r.observe = func(p json.RawMessage) (json.RawMessage, error) { return observeTx(ctx, tx, o, p) }
	}
	if o.Tx.Undo != nil {
		r.undo = func(p, res json.RawMessage) error { return o.Tx.Undo(ctx, tx.SQL(), p, res) }
	}
	return r
}

// errRollback makes WithTx roll back after a failed operation, or after
// an Observe that must write nothing.
var errRollback = errors.New("roll back")

// observe calls an operation's Observe and returns its canonical JSON.
func observe(ctx context.Context, o *Op, payload json.RawMessage) (json.RawMessage, error) {
	return canonicalState(o, func() (any, error) { return o.Observe(ctx, payload) })
}

// observeTx calls a transactional operation's Observe inside tx.
func observeTx(ctx context.Context, tx *ledger.Tx, o *Op, payload json.RawMessage) (json.RawMessage, error) {
	return canonicalState(o, func() (any, error) { return o.Tx.Observe(ctx, tx.SQL(), payload) })
}

func canonicalState(o *Op, observe func() (any, error)) (json.RawMessage, error) {
	state, err := observe()
	if err != nil {
		return nil, err
	}
	b, err := canonjson.Marshal(state)
	if err != nil {
		return nil, fmt.Errorf("observe of %s returned a value with no canonical JSON form: %w", o.Name, err)
	}
	return b, nil
}

// Observe reads the current state of what c touches, in canonical JSON,
// through its operation's Observe: inside tx for a transactional
// operation when tx is not nil, else on its own (a transactional one in
// a transaction that is rolled back). It returns runundo.ErrNoObserve
// when the operation is gone or cannot observe.
func (e *Engine) Observe(ctx context.Context, tx *ledger.Tx, c *ledger.Change) (json.RawMessage, error) {
	o, ok := e.Op(c.Action)
	switch {
	case !ok || !o.HasObserve():
		return nil, runundo.ErrNoObserve
	case o.Tx == nil:
		return observe(ctx, o, c.Payload)
	case tx != nil:
		return observeTx(ctx, tx, o, c.Payload)
	}
	var state json.RawMessage
	err := e.Ledger.WithTx(ctx, func(tx *ledger.Tx) error {
		var err error
		if state, err = observeTx(ctx, tx, o, c.Payload); err != nil {
			return err
		}
		return errRollback
	})
	if errors.Is(err, errRollback) {
		err = nil
	}
	return state, err
}
