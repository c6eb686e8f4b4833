package changeset

import (
	"context"
	"database/sql"
	"encoding/json"
	"fmt"

	"github.com/modelcontextprotocol/go-sdk/mcp"
)

// TxOperation is an operation whose resource lives in the ledger's own
// database (see ledger.Ledger.DB): Apply, Undo and Observe receive the
// ledger's write transaction and run inside it. The claim, the state check,
// the write and the ledger's bookkeeping then commit together or not at
// all: a change is applied exactly once, and a crash at any point leaves it
// either pending with nothing written or applied with the write. Nothing is
// ever left applying for an operator to reconcile.
//
// Choose a TxOperation whenever the data is in the ledger's database; use an
// Operation for anything else (files, remote APIs), where at most once is
// the best any library can promise.
//
// The functions must do all their work through tx and must not commit or
// roll it back. On SQLite the transaction holds the database's write lock,
// so keep them short. Preview runs outside any transaction; it may read the
// database through the Guard's Ledger().DB().
type TxOperation[In, P, R any] struct {
	// Preview validates the input and proposes a change, as for Operation.
	Preview func(ctx context.Context, in In) (Proposal[P], error)
	// Apply performs the change inside tx and returns what Undo needs.
	Apply func(ctx context.Context, tx *sql.Tx, p P) (R, error)
	// Undo reverses an applied change inside tx; nil if it cannot be undone.
	Undo func(ctx context.Context, tx *sql.Tx, p P, result R) error
	// Observe reads the current state of what the change touches, inside
	// tx. Return only what counts as someone's work; nil skips the checks.
	Observe func(ctx context.Context, tx *sql.Tx, p P) (any, error)
	// AllowEmptyDiff lets a preview whose diff is empty be stored and
	// applied, as for Operation.
	AllowEmptyDiff bool
}

// RegisterTx adds a transactional operation to g, as Register does for an
// Operation, and registers its preview tool.
func RegisterTx[In, P, R any](g *Guard, tool *mcp.Tool, op TxOperation[In, P, R]) {
	if tool == nil || tool.Name == "" {
		panic("changeset.RegisterTx: the tool needs a name")
	}
	if op.Preview == nil || op.Apply == nil {
		panic(fmt.Sprintf("changeset.RegisterTx %q: Preview and Apply are required", tool.Name))
	}
	// The preview half is an ordinary operation; the rest runs in a tx.
	o := erase(tool.Name, tool.Description, Operation[In, P, R]{Preview: op.Preview, AllowEmptyDiff: op.AllowEmptyDiff})
	o.apply = nil
	o.tx = &txFuncs{
		apply: func(ctx context.Context, tx *sql.Tx, payload json.RawMessage) (any, error) {
			p, err := decodePayload[P](payload)
			if err != nil {
				return nil, err
			}
			return op.Apply(ctx, tx, p)
		},
	}
	if op.Undo != nil {
		o.tx.undo = func(ctx context.Context, tx *sql.Tx, payload, result json.RawMessage) error {
			p, err := decodePayload[P](payload)
			if err != nil {
				return err
			}
			r, err := decodeResult[R](result)
			if err != nil {
				return err
			}
			return op.Undo(ctx, tx, p, r)
		}
	}
	if op.Observe != nil {
		o.tx.observe = func(ctx context.Context, tx *sql.Tx, payload json.RawMessage) (any, error) {
			p, err := decodePayload[P](payload)
			if err != nil {
				return nil, err
			}
			return op.Observe(ctx, tx, p)
		}
	}
	g.register(tool, o, inputSchema[In])
}

// txFuncs are a TxOperation's functions with their types erased.
type txFuncs struct {
	apply   func(ctx context.Context, tx *sql.Tx, payload json.RawMessage) (any, error)
	undo    func(ctx context.Context, tx *sql.Tx, payload, result json.RawMessage) error // nil: no undo
	observe func(ctx context.Context, tx *sql.Tx, payload json.RawMessage) (any, error)  // nil: no checks
}

func decodePayload[P any](payload json.RawMessage) (P, error) {
	var p P
	if err := json.Unmarshal(payload, &p); err != nil {
		return p, fmt.Errorf("decode stored payload: %w", err)
	}
	return p, nil
}

func decodeResult[R any](result json.RawMessage) (R, error) {
	var r R
	if len(result) == 0 {
		return r, nil
	}
	if err := json.Unmarshal(result, &r); err != nil {
		return r, fmt.Errorf("decode stored result: %w", err)
	}
	return r, nil
}
