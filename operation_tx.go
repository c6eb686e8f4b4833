package changeset

import (
	"context"
	"database/sql"
	"encoding/json"
	"fmt"
)

// txFuncs are the ApplyTx, UndoTx and ObserveTx of an operation on the
// ledger's own database, with their types erased.
type txFuncs struct {
	apply   func(ctx context.Context, tx *sql.Tx, payload json.RawMessage) (any, error)
	undo    func(ctx context.Context, tx *sql.Tx, payload, result json.RawMessage) error // nil: no undo
	observe func(ctx context.Context, tx *sql.Tx, payload json.RawMessage) (any, error)  // nil: no checks
}

// eraseTx erases the transactional functions of o.
func eraseTx[In, P, R any](o Operation[In, P, R]) *txFuncs {
	t := &txFuncs{
		apply: func(ctx context.Context, tx *sql.Tx, payload json.RawMessage) (any, error) {
			p, err := decodePayload[P](payload)
			if err != nil {
				return nil, err
			}
			return o.ApplyTx(ctx, tx, p)
		},
	}
	if o.UndoTx != nil {
		t.undo = func(ctx context.Context, tx *sql.Tx, payload, result json.RawMessage) error {
			p, r, err := decodeStored[P, R](payload, result)
			if err != nil {
				return err
			}
			return o.UndoTx(ctx, tx, p, r)
		}
	}
	if o.ObserveTx != nil {
		t.observe = func(ctx context.Context, tx *sql.Tx, payload json.RawMessage) (any, error) {
			p, err := decodePayload[P](payload)
			if err != nil {
				return nil, err
			}
			return o.ObserveTx(ctx, tx, p)
		}
	}
	return t
}

func decodePayload[P any](payload json.RawMessage) (P, error) {
	var p P
	if err := json.Unmarshal(payload, &p); err != nil {
		return p, fmt.Errorf("decode stored payload: %w", err)
	}
	return p, nil
}

// decodeStored decodes a change's stored payload and apply result.
func decodeStored[P, R any](payload, result json.RawMessage) (P, R, error) {
	var r R
	p, err := decodePayload[P](payload)
	if err != nil || len(result) == 0 {
		return p, r, err
	}
	if err := json.Unmarshal(result, &r); err != nil {
		return p, r, fmt.Errorf("decode stored result: %w", err)
	}
	return p, r, nil
}
