package changeset

import (
	"context"
	"database/sql"
	"errors"
)

// errNoProposal is what a Preview built by NewOperation gets when it
// returns neither a proposal nor an error.
var errNoProposal = errors.New("changeset: the Preview returned neither a proposal nor an error")

// NewOperation returns the Operation made of a Preview and an Apply, with
// its type arguments inferred from them (a composite literal of
// Operation[In, P, R] must spell all three). The Preview returns a pointer,
// so that a refusal or an error needs no zero proposal:
//
//	op := changeset.NewOperation(
//		func(ctx context.Context, in setIn) (*changeset.Proposal[setPayload], error) {
//			if !known(in.Key) {
//				return nil, changeset.Refuse("unknown setting %q", in.Key)
//			}
//			return &changeset.Proposal[setPayload]{Payload: …, Summary: …}, nil
//		},
//		func(ctx context.Context, p setPayload) (string, error) { return store.set(p.Key, p.Value), nil },
//	).WithUndo(undo).WithObserve(observe)
//	changeset.Register(guard, &mcp.Tool{Name: "set_setting"}, op)
//
// The result is an ordinary Operation: its fields may be set directly too.
func NewOperation[In, P, R any](
	preview func(ctx context.Context, in In) (*Proposal[P], error),
	apply func(ctx context.Context, p P) (R, error),
) Operation[In, P, R] {
	return Operation[In, P, R]{Preview: derefPreview(preview), Apply: apply}
}

// WithUndo returns o with undo as its Undo.
func (o Operation[In, P, R]) WithUndo(undo func(ctx context.Context, p P, result R) error) Operation[In, P, R] {
	o.Undo = undo
	return o
}

// WithObserve returns o with observe as its Observe.
func (o Operation[In, P, R]) WithObserve(observe func(ctx context.Context, p P) (any, error)) Operation[In, P, R] {
	o.Observe = observe
	return o
}

// NewTxOperation is NewOperation for a TxOperation: its type arguments are
// inferred from the Preview and the Apply, and the Preview returns a
// pointer.
func NewTxOperation[In, P, R any](
	preview func(ctx context.Context, in In) (*Proposal[P], error),
	apply func(ctx context.Context, tx *sql.Tx, p P) (R, error),
) TxOperation[In, P, R] {
	return TxOperation[In, P, R]{Preview: derefPreview(preview), Apply: apply}
}

// WithUndo returns o with undo as its Undo.
func (o TxOperation[In, P, R]) WithUndo(undo func(ctx context.Context, tx *sql.Tx, p P, result R) error) TxOperation[In, P, R] {
	o.Undo = undo
	return o
}

// WithObserve returns o with observe as its Observe.
func (o TxOperation[In, P, R]) WithObserve(observe func(ctx context.Context, tx *sql.Tx, p P) (any, error)) TxOperation[In, P, R] {
	o.Observe = observe
	return o
}

// derefPreview adapts a Preview returning a pointer to the Operation's
// Preview. A nil preview stays nil, so that Register reports it.
func derefPreview[In, P any](preview func(context.Context, In) (*Proposal[P], error)) func(context.Context, In) (Proposal[P], error) {
	if preview == nil {
		return nil
	}
	return func(ctx context.Context, in In) (Proposal[P], error) {
		p, err := preview(ctx, in)
		switch {
		case err != nil:
			return Proposal[P]{}, err
		case p == nil:
			return Proposal[P]{}, errNoProposal
		}
		return *p, nil
	}
}
