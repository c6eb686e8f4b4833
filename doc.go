// Package changeset makes the state-changing tools of an MCP server safe to
// hand to an AI agent.
//
// A guarded operation is split into preview, apply and undo. The agent calls
// preview_<op>: the server validates the input, computes a diff, stores the
// exact payload in a durable ledger and returns a single-use, expiring
// confirmation token. apply_change(change_id, confirmation_token) claims the
// change (at most once, across processes), checks that the state the preview
// saw is unchanged, and runs trusted apply code on the stored payload.
// undo_change(change_id, undo_token) runs the inverse, refusing when the
// state changed after the apply.
//
// A server author writes an [Operation] and registers it:
//
//	server := mcp.NewServer(&mcp.Implementation{Name: "settings"}, nil)
//	guard, err := changeset.New(server, changeset.Options{LedgerPath: "ledger.db"})
//	if err != nil { ... }
//	changeset.Register(guard, &mcp.Tool{Name: "set_setting", Description: "Change a setting."},
//		changeset.Operation[Setting, Setting, Previous]{
//			Preview: func(ctx context.Context, in Setting) (*changeset.Proposal[Setting], error) {
//				old, ok := settings[in.Key]
//				if !ok {
//					return nil, changeset.Refuse("unknown setting %q", in.Key)
//				}
//				return &changeset.Proposal[Setting]{
//					Payload: in,
//					Diff:    changeset.DiffFields(map[string]any{in.Key: old}, map[string]any{in.Key: in.Value}),
//				}, nil
//			},
//			Apply:   func(ctx context.Context, p Setting) (Previous, error) { ... },
//			Undo:    func(ctx context.Context, p Setting, r Previous) error { ... },
//			Observe: func(ctx context.Context, p Setting) (any, error) { return settings[p.Key], nil },
//		})
//
// An operation whose data lives in the ledger's own database sets ApplyTx,
// UndoTx and ObserveTx instead, runs them inside the ledger's transaction
// and is applied exactly once (see [Operation]). The adapters in packages
// kv and sqltable write the operations for keyed values and table rows.
//
// Writes stay off until the operator sets MCP_CHANGESET_WRITE_MODE=guarded
// (or [Options].WriteMode); previews always work.
//
// # What a change names
//
// A [Proposal] names the resource it touches ([Proposal].Resource, e.g.
// "note:todo.txt"), or every resource of a change that touches several
// ([Proposal].Resources, with Observe returning [States]), and the
// resources it relies on without changing them ([Proposal].DependsOn).
// Observe returns the state of what the change touches that counts as
// someone's work; the Guard compares it before the apply, after the claim
// and before an undo, so that nothing overwrites a person's edit. A field
// of the payload tagged `changeset:"redact"` is replaced by a keyed hash
// once the change ends. Values a person or an agent chose go into
// summaries through [Quote].
//
// # Runs
//
// A run is one task's changes, reviewed and undone as a unit: [Guard.StartRun]
// (the agent's start_run) opens one, and a preview without a run joins its
// session's run. [Guard.UndoRun] and the agent's undo_run plan the undo
// first (a dry run that changes nothing), then carry out exactly the plan
// that was reviewed: a change whose resource a person changed since is
// kept, and so is every older change of that resource.
//
// # Approval
//
// Under [TokenApproval] (the default) the agent holds the tokens, so that a
// person saw the diff is on the agent's honour; under [UserApproval] the
// user approves in the client (elicitation) and the agent holds none.
// [Guard.Instructions] says which to the agent.
//
// # Errors
//
// Refusals are [*ChangeError] values whose message is for the agent;
// trusted code matches their kind with errors.Is: [ErrNotFound],
// [ErrInvalidToken], [ErrExpired], [ErrStateChanged], [ErrPlanChanged],
// [ErrDependency], [ErrNoChange], [ErrWritesDisabled], [ErrRefused] and
// the others listed with them. Any other error of an operation reaches the
// agent as its type name only; the ledger keeps the full text.
//
// # Testing
//
// Package changesettest gives a test a Guard on a temporary ledger with a
// fake clock and an in-memory client, and CheckOperation, which fails a
// test when an operation's undo does not restore what Observe saw, when an
// apply goes through after the state changed, or when a preview writes.
//
// The package is not an authentication layer, and used alone it does not
// prove that a person approved anything: the confirmation token goes back to
// the agent. What it guarantees is narrower and checkable: a token applies
// exactly the payload that was previewed, once, against the state the
// preview saw, and the ledger records every step. See docs/security-model.md.
package changeset
