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
//			Preview: func(ctx context.Context, in Setting) (changeset.Proposal[Setting], error) {
//				old, ok := settings[in.Key]
//				if !ok {
//					return changeset.Proposal[Setting]{}, changeset.Refuse("unknown setting %q", in.Key)
//				}
//				return changeset.Proposal[Setting]{
//					Payload: in,
//					Diff:    changeset.DiffFields(map[string]any{in.Key: old}, map[string]any{in.Key: in.Value}),
//				}, nil
//			},
//			Apply:   func(ctx context.Context, p Setting) (Previous, error) { ... },
//			Undo:    func(ctx context.Context, p Setting, r Previous) error { ... },
//			Observe: func(ctx context.Context, p Setting) (any, error) { return settings[p.Key], nil },
//		})
//
// Writes stay off until the operator sets MCP_CHANGESET_WRITE_MODE=guarded
// (or Options.WriteMode); previews always work.
//
// The package is not an authentication layer, and used alone it does not
// prove that a person approved anything: the confirmation token goes back to
// the agent. What it guarantees is narrower and checkable: a token applies
// exactly the payload that was previewed, once, against the state the
// preview saw, and the ledger records every step. See docs/security-model.md.
package changeset
