package changeset

import (
	"context"
	"encoding/json"
	"fmt"

	"github.com/mcp-changeset/changeset-go/internal/canonjson"
	"github.com/mcp-changeset/changeset-go/ledger"
	"github.com/modelcontextprotocol/go-sdk/mcp"
)

// Apply applies a pending change for trusted code, as apply_change does for
// the agent: it needs the change's confirmation token, spends it, checks
// that the observed state is still the one the preview saw, and runs the
// operation's Apply on the stored payload.
func (g *Guard) Apply(ctx context.Context, changeID, confirmationToken string) (*ApplyResult, error) {
	return g.apply(ctx, nil, changeID, confirmationToken, string(agentActor), false)
}

// Undo undoes an applied change with its undo token, as undo_change does.
func (g *Guard) Undo(ctx context.Context, changeID, undoToken string) (*UndoResult, error) {
	return g.undo(ctx, nil, changeID, undoToken, string(agentActor), false)
}

// UndoAs undoes an applied change on behalf of a person acting through
// trusted code (a dashboard, a support tool), without an undo token. by
// names the person (see Person) and is recorded in the ledger. The state
// checks, the undo window and the write mode apply as for the agent.
// Scopes are not checked: trusted code may undo any change.
func (g *Guard) UndoAs(ctx context.Context, changeID, by string) (*UndoResult, error) {
	c, err := g.get(ctx, changeID)
	if err != nil {
		return nil, err
	}
	return g.undoChange(ctx, changeID, "", c.ScopeHash, by, true)
}

func (g *Guard) apply(ctx context.Context, req *mcp.CallToolRequest, id, token, by string, trusted bool) (*ApplyResult, error) {
	if !g.WritesEnabled() {
		return nil, &WritesDisabledError{ChangeID: id, EnvVar: g.opts.WriteModeEnv}
	}
	scope, err := g.scopeOf(ctx, req)
	if err != nil {
		return nil, err
	}
	c, err := g.claim(ctx, applyClaim, id, token, scope, by, trusted)
	if err != nil {
		return nil, err
	}
	o, ok := g.lookup(c.Action)
	if !ok {
		return nil, g.fail(ctx, c, ledger.ApplyFailed, by, &ChangeError{ChangeID: id,
			Msg: fmt.Sprintf("change %s was not applied: this server no longer has the operation %q", id, c.Action)})
	}
	if o.observe != nil {
		before, err := g.observe(ctx, o, c.Payload)
		if err != nil {
			return nil, g.fail(ctx, c, ledger.ApplyFailed, by, err)
		}
		if canonjson.Hash(before) != c.StateHash {
			return nil, g.fail(ctx, c, ledger.ApplyFailed, by, &StateChangedError{ChangeID: id, Phase: "apply"})
		}
		c.Before = before
	}

	out, err := call(func() (any, error) { return o.apply(ctx, c.Payload) })
	if err != nil {
		return nil, g.fail(ctx, c, ledger.ApplyFailed, by, err)
	}
	result, err := canonjson.Marshal(out)
	if err != nil {
		return nil, g.fail(ctx, c, ledger.ApplyFailed, by, &ChangeError{ChangeID: id,
			Msg: fmt.Sprintf("change %s was applied, but its result cannot be stored (%v); it has no undo", id, err), Err: err})
	}
	if len(result) > g.opts.MaxResultBytes {
		return nil, g.fail(ctx, c, ledger.ApplyFailed, by, &ChangeError{ChangeID: id,
			Msg: fmt.Sprintf("change %s was applied, but its result of %d bytes is over the limit of %d; it has no undo", id, len(result), g.opts.MaxResultBytes)})
	}
	if o.observe != nil {
		// The write happened: a failing Observe must not lose that fact.
		// Without an "after" snapshot the undo has nothing to compare with,
		// so it will refuse.
		if after, err := g.observe(context.WithoutCancel(ctx), o, c.Payload); err == nil {
			c.After = after
		} else {
			g.log.Warn("observe after apply failed; undo will be refused", "change_id", id, "err", err)
		}
	}

	now := g.now()
	c.Status, c.Result, c.AppliedAt = ledger.Applied, result, now
	res := &ApplyResult{Status: "applied", ChangeID: id, Result: result}
	if o.undo != nil {
		undoToken := newToken(undoPrefix)
		c.UndoHash = tokenDigest(purposeUndo, c.ID, c.PayloadHash, undoToken)
		res.UndoToken = undoToken
		if g.opts.UndoTTL != NoExpiry {
			c.UndoExpiresAt = now.Add(g.opts.UndoTTL)
			res.UndoExpiresAt = formatTime(c.UndoExpiresAt)
		}
	}
	if err := g.finish(ctx, c, ledger.Applying, by); err != nil {
		return nil, &ChangeError{ChangeID: id, Err: err, Msg: fmt.Sprintf(
			"change %s was applied, but the ledger could not record it (%s); it stays 'applying' for an operator to reconcile, and no undo token was issued", id, agentText(err))}
	}
	return res, nil
}

func (g *Guard) undo(ctx context.Context, req *mcp.CallToolRequest, id, token, by string, trusted bool) (*UndoResult, error) {
	scope, err := g.scopeOf(ctx, req)
	if err != nil {
		return nil, err
	}
	return g.undoChange(ctx, id, token, scope, by, trusted)
}

// undoChange is the one path every undo takes: a single change's, and each
// change of a run's.
func (g *Guard) undoChange(ctx context.Context, id, token, scope, by string, trusted bool) (*UndoResult, error) {
	if !g.WritesEnabled() {
		return nil, &WritesDisabledError{ChangeID: id, EnvVar: g.opts.WriteModeEnv}
	}
	c, err := g.claim(ctx, undoClaim, id, token, scope, by, trusted)
	if err != nil {
		return nil, err
	}
	o, ok := g.lookup(c.Action)
	if !ok || o.undo == nil {
		return nil, g.fail(ctx, c, ledger.UndoFailed, by, &ChangeError{ChangeID: id,
			Msg: fmt.Sprintf("change %s was not undone: this server no longer has the undo of %q", id, c.Action)})
	}
	if o.observe != nil {
		current, err := g.observe(ctx, o, c.Payload)
		if err != nil {
			return nil, g.fail(ctx, c, ledger.UndoFailed, by, err)
		}
		if c.After == nil || string(current) != string(c.After) {
			return nil, g.fail(ctx, c, ledger.UndoFailed, by, &StateChangedError{ChangeID: id, Phase: "undo"})
		}
	}
	if _, err := call(func() (any, error) { return nil, o.undo(ctx, c.Payload, c.Result) }); err != nil {
		return nil, g.fail(ctx, c, ledger.UndoFailed, by, err)
	}
	c.Status, c.UndoneAt = ledger.Undone, g.now()
	if err := g.finish(ctx, c, ledger.Undoing, by); err != nil {
		return nil, &ChangeError{ChangeID: id, Err: err, Msg: fmt.Sprintf(
			"change %s was undone, but the ledger could not record it (%s); it stays 'undoing' for an operator to reconcile", id, agentText(err))}
	}
	return &UndoResult{Status: "undone", ChangeID: id}, nil
}

// fail records a claimed change as failed (status to) with the error's type
// and full text, and returns the error the agent should see.
func (g *Guard) fail(ctx context.Context, c *ledger.Change, to ledger.Status, by string, cause error) error {
	from := c.Status
	c.Status, c.ErrorType, c.Error = to, typeName(cause), cause.Error()
	c.UndoHash = ""
	if err := g.finish(ctx, c, from, by); err != nil {
		g.log.Error("failure not recorded", "change_id", c.ID, "err", err)
	}
	if msg := agentText(cause); msg != typeName(cause) {
		return &ChangeError{ChangeID: c.ID, Msg: msg, Err: cause}
	}
	verb := "applied"
	if to == ledger.UndoFailed {
		verb = "undone"
	}
	return &ChangeError{ChangeID: c.ID, Err: cause,
		Msg: fmt.Sprintf("change %s was not %s: the operation failed with %s (details are in the ledger for operators)", c.ID, verb, typeName(cause))}
}

// observe calls an operation's Observe and returns its canonical JSON.
func (g *Guard) observe(ctx context.Context, o *op, payload json.RawMessage) (json.RawMessage, error) {
	state, err := call(func() (any, error) { return o.observe(ctx, payload) })
	if err != nil {
		return nil, err
	}
	b, err := canonjson.Marshal(state)
	if err != nil {
		return nil, fmt.Errorf("observe of %s returned a value with no canonical JSON form: %w", o.name, err)
	}
	return b, nil
}

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
