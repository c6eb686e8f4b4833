package changeset

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"

	"github.com/mcp-changeset/changeset-go/internal/canonjson"
	"github.com/mcp-changeset/changeset-go/ledger"
)

// runner calls an operation's functions: directly for an Operation
// (external), or inside a ledger transaction for a transactional operation (inTx), so
// that the claim, the state check, the operation's write and the ledger's
// bookkeeping of a transactional operation are one transaction (see Guard.change).
// observe is nil when the operation has no Observe, undo when it has no
// inverse.
type runner struct {
	observe func(payload json.RawMessage) (json.RawMessage, error)
	apply   func(payload json.RawMessage) (any, error)
	undo    func(payload, result json.RawMessage) error
}

// external is the runner of an Operation.
func (g *Guard) external(ctx context.Context, o *op) runner {
	var r runner
	if o.apply != nil {
		r.apply = func(p json.RawMessage) (any, error) { return o.apply(ctx, p) }
	}
	if o.observe != nil {
		r.observe = func(p json.RawMessage) (json.RawMessage, error) { return g.observe(ctx, o, p) }
	}
	if o.undo != nil {
		r.undo = func(p, res json.RawMessage) error { return o.undo(ctx, p, res) }
	}
	return r
}

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

// errRollback makes WithTx roll back after a failed operation, or after
// an Observe that must write nothing.
var errRollback = errors.New("roll back")

// observe calls an operation's Observe and returns its canonical JSON.
func (g *Guard) observe(ctx context.Context, o *op, payload json.RawMessage) (json.RawMessage, error) {
	return canonicalState(o, func() (any, error) { return o.observe(ctx, payload) })
}

// observeTx calls a transactional operation's Observe inside tx.
func (g *Guard) observeTx(ctx context.Context, tx *ledger.Tx, o *op, payload json.RawMessage) (json.RawMessage, error) {
	return canonicalState(o, func() (any, error) { return o.tx.observe(ctx, tx.SQL(), payload) })
}

func canonicalState(o *op, observe func() (any, error)) (json.RawMessage, error) {
	state, err := call(observe)
	if err != nil {
		return nil, err
	}
	b, err := canonjson.Marshal(state)
	if err != nil {
		return nil, fmt.Errorf("observe of %s returned a value with no canonical JSON form: %w", o.name, err)
	}
	return b, nil
}

// hashOf is the digest of canonical JSON (a payload, or a state
// canonicalState returned), as the ledger stores it.
func hashOf(canonical []byte) ledger.Digest { return ledger.Digest(canonjson.Hash(canonical)) }

// PanicError is the error recorded when an operation's code panics.
type PanicError struct{ Value any }

func (e *PanicError) Error() string { return fmt.Sprintf("panic: %v", e.Value) }

// call runs trusted operation code, turning a panic into a *PanicError so
// that one bad operation cannot take the server down with a claim open.
func call(fn func() (any, error)) (out any, err error) {
	defer func() {
		if v := recover(); v != nil {
			out, err = nil, &PanicError{Value: v}
		}
	}()
	return fn()
}
