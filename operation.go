package changeset

import (
	"context"
	"database/sql"
)

// Operation is a state-changing operation split into preview, apply and
// undo. In is the preview tool's input (its JSON schema is inferred from
// the type, as mcp.AddTool does), P the payload stored in the ledger and R
// what the apply returns. Define one as a struct literal and add it to a
// Guard with [Register]:
//
//	changeset.Register(guard, &mcp.Tool{Name: "set_setting", Description: "Change a setting."},
//		changeset.Operation[SetIn, SetIn, Previous]{
//			Preview: func(ctx context.Context, in SetIn) (*changeset.Proposal[SetIn], error) {
//				old, ok := settings[in.Key]
//				if !ok {
//					return nil, changeset.Refuse("unknown setting %s", changeset.Quote(in.Key))
//				}
//				return &changeset.Proposal[SetIn]{Payload: in, Resource: "setting:" + in.Key, …}, nil
//			},
//			Apply:   func(ctx context.Context, p SetIn) (Previous, error) { … },
//			Undo:    func(ctx context.Context, p SetIn, r Previous) error { … },
//			Observe: func(ctx context.Context, p SetIn) (any, error) { … },
//		})
//
// Only Preview is reachable by the agent. The other functions are trusted
// code: they receive the payload decoded from the ledger's stored canonical
// JSON, never from the agent's call, so a token can only ever apply the
// exact payload that was previewed.
//
// # Data in the ledger's own database
//
// When the data lives in the ledger's database (see [Guard.Ledger] and
// ledger.Ledger.DB), set ApplyTx, UndoTx and ObserveTx instead of Apply,
// Undo and Observe. They receive the ledger's write transaction and run
// inside it, so the claim, the state check, the write and the ledger's
// bookkeeping commit together or not at all: the change is applied exactly
// once, and a crash at any point leaves it either pending with nothing
// written or applied with the write, never applying for an operator to
// reconcile. For anything else (files, remote APIs) at most once is the
// best any library can promise. The Tx functions must do all their work
// through tx and must not commit or roll it back; on SQLite the transaction
// holds the database's write lock, so keep them short. Preview always runs
// outside any transaction. An operation sets one family or the other.
type Operation[In, P, R any] struct {
	// Preview validates the input, reads what it needs and proposes a
	// change. It must not write. Return a refusal made by [Refuse] to
	// reject the input with a message for the agent; a nil proposal with
	// a nil error is an error.
	Preview func(ctx context.Context, in In) (*Proposal[P], error)
	// Apply performs the change and returns what Undo needs (e.g. the value
	// it replaced). The result is shown to the agent and stored.
	Apply func(ctx context.Context, p P) (R, error)
	// Undo reverses an applied change. Leave it nil for an operation that
	// cannot be undone; the agent then gets no undo token.
	Undo func(ctx context.Context, p P, result R) error
	// Observe returns the current state of what the change touches, as a
	// plain JSON value ([States] for a change that names several
	// resources). It is called at preview, again after the claim (the
	// apply is refused if the state changed), after the apply (the "after"
	// snapshot) and before an undo (refused unless the state still equals
	// that snapshot). Return only what counts as someone's work: what a
	// person may change that an undo must not destroy. Leave it nil to
	// skip the state checks.
	Observe func(ctx context.Context, p P) (any, error)

	// ApplyTx is Apply for data in the ledger's own database: it runs
	// inside the ledger's write transaction tx.
	ApplyTx func(ctx context.Context, tx *sql.Tx, p P) (R, error)
	// UndoTx is Undo inside the ledger's write transaction; nil if the
	// change cannot be undone.
	UndoTx func(ctx context.Context, tx *sql.Tx, p P, result R) error
	// ObserveTx is Observe inside the ledger's write transaction (at
	// preview, inside a read-only view of the database); nil skips the
	// state checks.
	ObserveTx func(ctx context.Context, tx *sql.Tx, p P) (any, error)

	// AllowEmptyDiff lets a preview whose diff is empty be stored and
	// applied. By default such a preview is refused ("nothing would
	// change", [ErrNoChange]) and nothing is stored, so that no one is
	// asked to approve a change that changes nothing. Set it for an
	// operation whose effect its diff does not show, such as one that only
	// touches a timestamp or triggers a side effect.
	AllowEmptyDiff bool

	// Approval overrides the server's approval mode (Options.Approval)
	// for this operation's changes; zero keeps the server's. On a server
	// with TokenApproval or PersonApproval an operation may choose either:
	// PersonApproval for the one operation a person must approve,
	// TokenApproval for one that needs no person. A server with
	// UserApproval takes no override. Register panics on one it cannot
	// serve.
	Approval Approval
	// Approvers is how many distinct people must approve each apply and
	// undo of this operation's changes under PersonApproval; zero keeps
	// Options.Approvers.
	Approvers int
}

// check reports the first programming error in o's definition, or "".
func (o *Operation[In, P, R]) check() string {
	switch {
	case o.Preview == nil:
		return "Preview is required"
	case o.Apply == nil && o.ApplyTx == nil:
		return "Apply (or ApplyTx, for data in the ledger's database) is required"
	case o.Apply != nil && o.ApplyTx != nil:
		return "set Apply or ApplyTx, not both"
	case o.Apply != nil && (o.UndoTx != nil || o.ObserveTx != nil):
		return "an operation with Apply uses Undo and Observe, not UndoTx or ObserveTx"
	case o.ApplyTx != nil && (o.Undo != nil || o.Observe != nil):
		return "an operation with ApplyTx uses UndoTx and ObserveTx, not Undo or Observe"
	}
	return ""
}
