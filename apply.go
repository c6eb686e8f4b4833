package changeset

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"strings"

	"github.com/mcp-changeset/changeset-go/internal/canonjson"
	"github.com/mcp-changeset/changeset-go/internal/runundo"
	"github.com/mcp-changeset/changeset-go/internal/token"
	"github.com/mcp-changeset/changeset-go/internal/voice"
	"github.com/mcp-changeset/changeset-go/ledger"
	"github.com/modelcontextprotocol/go-sdk/mcp"
)

// Apply applies a pending change for trusted code, as apply_change does for
// the agent: it needs the change's confirmation token, spends it, checks
// that the observed state is still the one the preview saw, and runs the
// operation's Apply on the stored payload.
func (g *Guard) Apply(ctx context.Context, changeID, confirmationToken string) (*ApplyResult, error) {
	return g.apply(ctx, nil, changeID, confirmationToken, byToken, g.agentBy(ctx, nil))
}

// Undo undoes an applied change with its undo token, as undo_change does.
func (g *Guard) Undo(ctx context.Context, changeID, undoToken string) (*UndoResult, error) {
	return g.undo(ctx, nil, changeID, undoToken, byToken, g.agentBy(ctx, nil))
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
	return g.undoChange(ctx, claim{kind: undoClaim, id: changeID, auth: byTrusted, scope: c.ScopeHash, by: by}, nil)
}

// apply is the apply of a change for the agent (req is nil for trusted
// code calling Apply): auth is what the caller's path lets through, a
// token or the user's approval.
func (g *Guard) apply(ctx context.Context, req *mcp.CallToolRequest, id, token string, auth authority, by string) (*ApplyResult, error) {
	ctx = g.withPrincipal(ctx, req)
	if !g.WritesEnabled() {
		return nil, g.writesOff(id, applyClaim.verb)
	}
	scope, err := g.scopeOf(ctx, req)
	if err != nil {
		return nil, err
	}
	var res *ApplyResult
	cl := claim{kind: applyClaim, id: id, token: token, auth: auth, scope: scope, by: by}
	err = g.change(ctx, cl, nil, func(c *ledger.Change, r runner) error {
		var err error
		res, err = g.performApply(ctx, c, r)
		return err
	})
	if err != nil {
		return nil, err
	}
	return res, nil
}

// undo is the undo of one change for the agent, as apply.
func (g *Guard) undo(ctx context.Context, req *mcp.CallToolRequest, id, token string, auth authority, by string) (*UndoResult, error) {
	ctx = g.withPrincipal(ctx, req)
	scope, err := g.scopeOf(ctx, req)
	if err != nil {
		return nil, err
	}
	return g.undoChange(ctx, claim{kind: undoClaim, id: id, token: token, auth: auth, scope: scope, by: by}, nil)
}

// undoChange is the one path every undo takes: a single change's, and each
// change of a run's. It refuses, inside the claim, an undo that would
// remove what a change that stays in place depends on (runundo.Engine.Hold);
// undoing names the changes the caller undoes too (a run's), nil for a
// single undo.
func (g *Guard) undoChange(ctx context.Context, cl claim, undoing map[string]bool) (*UndoResult, error) {
	if !g.WritesEnabled() {
		return nil, g.writesOff(cl.id, undoClaim.verb)
	}
	hold := func(tx *ledger.Tx, c *ledger.Change) error {
		reason, err := g.runs().Hold(ctx, tx, c, undoing)
		if err != nil || reason == "" {
			return err
		}
		return &ChangeError{ChangeID: cl.id, Kind: ErrDependency, Err: &runundo.HeldError{Reason: reason},
			Msg: voice.DependencyHeld(cl.id, strings.TrimSuffix(reason, "; it is left as it is"))}
	}
	err := g.change(ctx, cl, hold, func(c *ledger.Change, r runner) error {
		return g.performUndo(ctx, c, r)
	})
	if err != nil {
		return nil, err
	}
	return &UndoResult{Status: "undone", ChangeID: cl.id}, nil
}

// change is the one place an apply or undo runs. Its claim transaction
// reads the row under the write lock and runs every check of claimIn,
// then hold, when not nil: a refusal of hold (a *ChangeError) leaves the
// claim unwritten. A TxOperation is then performed inside that same
// transaction, which commits the write and its bookkeeping together (or
// rolls both back, and recordFailure records the failure in a second one).
// For an ordinary operation the transaction commits the claim alone, and
// perform runs after it: at most once, with the outcome recorded by finish
// or recordFailure.
func (g *Guard) change(ctx context.Context, cl claim,
	hold func(tx *ledger.Tx, c *ledger.Change) error, perform func(c *ledger.Change, r runner) error) (err error) {
	k, id := cl.kind, cl.id
	var (
		seen                *ledger.Change // the row as claimed (or found expired)
		claimed             *ledger.Change
		o                   *op
		refusal, failure    error
		performedInTheClaim bool
	)
	ctx, end := g.start(ctx, Event{Step: k.step(), ChangeID: id})
	if end != nil {
		defer func() { end(changeOutcome(k, id, seen, failure, err)) }()
	}
	if err := cl.checkArgs(); err != nil {
		return err
	}
	err = g.ledger.WithTx(ctx, func(tx *ledger.Tx) error {
		seen, claimed, refusal, failure, performedInTheClaim = nil, nil, nil, nil, false // WithTx may run this again
		c, err := g.claimIn(tx, cl)
		seen = c
		if err != nil {
			refusal, err = asRefusal(err)
			return err // nil after a refusal: an expired preview is marked expired
		}
		if hold != nil {
			if err := hold(tx, c); err != nil {
				seen = nil
				refusal, err = asRefusal(err)
				return err
			}
		}
		o, _ = g.lookup(c.Action)
		if o != nil && o.tx != nil {
			performedInTheClaim = true
			if err := perform(c, g.inTx(ctx, tx, o)); err != nil {
				failure = err
				return errRollback
			}
		}
		claimed = c
		return tx.UpdateChange(c, k.from)
	})
	switch {
	case failure != nil:
		return g.recordFailure(ctx, cl, nil, failure)
	case err != nil:
		return claimConflict(id, err)
	case refusal != nil:
		if seen != nil { // a preview found past its expiry, now expired
			g.logTransition(ctx, seen, k.from, cl.by)
		}
		return refusal
	}
	g.logTransition(ctx, claimed, k.from, cl.by)
	if performedInTheClaim {
		return nil
	}
	if o == nil {
		return g.recordFailure(ctx, cl, claimed, errOperationGone(claimed))
	}
	if err := perform(claimed, g.external(ctx, o)); err != nil {
		return g.recordFailure(ctx, cl, claimed, err)
	}
	if err := g.finish(ctx, claimed, k.to, cl.by); err != nil {
		return &ChangeError{ChangeID: id, Err: err, Msg: voice.NotRecorded(id, k.verb, agentText(err), string(k.to), k.from == ledger.Pending)}
	}
	return nil
}

// runner calls an operation's functions: directly for an Operation, or
// inside a ledger transaction for a TxOperation. observe is nil when the
// operation has no Observe, undo when it has no inverse.
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

// performApply runs a claimed change: the state check against the preview,
// the Apply, the checks of its result and the "after" snapshot. On success
// c holds the applied outcome (status, result, snapshots, a new undo token's
// digest) and the result for the agent holds the token. On failure nothing
// in c is final; the caller records the failure.
func (g *Guard) performApply(ctx context.Context, c *ledger.Change, r runner) (*ApplyResult, error) {
	if r.apply == nil {
		return nil, errOperationGone(c)
	}
	if r.observe != nil {
		before, err := r.observe(c.Payload)
		if err != nil {
			return nil, err
		}
		if hashOf(before) != c.StateHash {
			return nil, &StateChangedError{ChangeID: c.ID, Phase: "apply", found: before}
		}
		c.Before = before
	}
	out, err := call(func() (any, error) { return r.apply(c.Payload) })
	if err != nil {
		return nil, err
	}
	result, err := canonjson.Marshal(out)
	if err != nil {
		return nil, &ChangeError{ChangeID: c.ID, Err: err,
			Msg: voice.ResultUnstorable(c.ID)}
	}
	if len(result) > g.opts.MaxResultBytes {
		return nil, &ChangeError{ChangeID: c.ID, Err: errResultTooLarge,
			Msg: voice.ResultTooLarge(c.ID, len(result), g.opts.MaxResultBytes)}
	}
	if r.observe != nil {
		// The write happened: a failing Observe must not lose that fact.
		// Without an "after" snapshot an undo has nothing to compare with,
		// so it will refuse.
		if after, err := r.observe(c.Payload); err == nil {
			c.After = after
		} else {
			g.log.Warn("observe after apply failed; undo will be refused", "change_id", c.ID, "err", err)
		}
	}
	now := g.now()
	c.Status, c.Result, c.AppliedAt = ledger.Applied, result, now
	res := &ApplyResult{Status: "applied", ChangeID: c.ID, Result: result}
	if r.undo != nil {
		undoToken := token.New(token.UndoPrefix)
		if g.opts.Approval == UserApproval { // see byUser
			undoToken = g.sealer.Token(token.UndoPrefix, token.PurposeUndo, c.ID, c.PayloadHash)
		}
		c.UndoHash = token.Digest(token.PurposeUndo, c.ID, c.PayloadHash, undoToken)
		res.UndoToken = undoToken
		if g.opts.UndoTTL != NoExpiry {
			c.UndoExpiresAt = now.Add(g.opts.UndoTTL)
			res.UndoExpiresAt = formatTime(c.UndoExpiresAt)
		}
	}
	return res, nil
}

// performUndo runs the undo of a claimed change after checking that its
// resource still looks the way the apply left it. On success c is undone.
func (g *Guard) performUndo(ctx context.Context, c *ledger.Change, r runner) error {
	if r.undo == nil {
		return errOperationGone(c)
	}
	if r.observe != nil {
		current, err := r.observe(c.Payload)
		if err != nil {
			return err
		}
		if c.After == nil || string(current) != string(c.After) {
			return &StateChangedError{ChangeID: c.ID, Phase: "undo", found: current}
		}
	}
	if _, err := call(func() (any, error) { return nil, r.undo(c.Payload, c.Result) }); err != nil {
		return err
	}
	c.Status, c.UndoneAt = ledger.Undone, g.now()
	return nil
}

// recordFailure is the one place a failed apply or undo is recorded; it
// returns the error the caller sees. c is the change as its claim
// committed it, in flight, when the operation ran after the claim. c is
// nil when nothing of the attempt was written: the operation ran in the
// claim's transaction and that rolled back (so the token is still
// unspent), or a transactional undo in a run's undo rolled back to its
// savepoint. The row is then read again and must still be in the claim's
// from status; if someone else moved it meanwhile there is nothing to
// record. Either way the change ends apply_failed or undo_failed as
// markFailed decides.
func (g *Guard) recordFailure(ctx context.Context, cl claim, c *ledger.Change, cause error) error {
	ctx = context.WithoutCancel(ctx)
	k := cl.kind
	if c != nil {
		from := c.Status
		markFailed(c, k, cause, false)
		if err := g.finish(ctx, c, from, cl.by); err != nil {
			g.log.Error("failure not recorded", "change_id", c.ID, "err", err)
		}
		return failureText(c, cause)
	}
	var failed *ledger.Change
	err := g.retryBusy(ctx, func(tx *ledger.Tx) error {
		failed = nil // WithTx may run this again
		c, err := tx.Change(cl.id)
		if err != nil || c.Status != k.from {
			return err // someone else moved it meanwhile; nothing to record
		}
		spend(c, k, cl.by, g.now())
		markFailed(c, k, cause, true)
		failed = c
		return tx.UpdateChange(c, k.from)
	})
	if err != nil || failed == nil {
		g.log.Error("failure of a transactional change not recorded", "change_id", cl.id, "err", err)
		return failureText(&ledger.Change{ID: cl.id, Status: failedStatus(k)}, cause)
	}
	g.logTransition(ctx, failed, k.from, cl.by)
	return failureText(failed, cause)
}

// markFailed decides how a failed apply or undo (k) of c is recorded: its
// failed status, the kind of failure, the stored error type and text, and
// whether the library knows nothing was written (rolledBack says the
// operation ran inside a transaction that rolled back).
func markFailed(c *ledger.Change, k claimKind, cause error, rolledBack bool) {
	phase := "apply"
	if k.from == ledger.Applied {
		phase = "undo"
	}
	var sc *StateChangedError
	if errors.As(cause, &sc) && sc.ChangeID == "" { // an operation's own (see StateChangedError)
		sc.ChangeID, sc.Phase = c.ID, phase
	}
	if sc != nil && sc.found != nil { // what the check found, for the people who review the refusal
		if sc.Phase == "apply" {
			c.Before = sc.found
		} else {
			c.UndoFound = sc.found
		}
	}
	c.Status = failedStatus(k)
	c.ErrorType, c.Error = storedType(cause), storableText(cause.Error())
	c.UndoHash = ""
	c.Failure, c.NothingWritten = failureOf(cause), rolledBack
	if sc != nil || errors.Is(cause, errNothingRan) {
		c.NothingWritten = true // refused before the operation wrote
	}
}

// failedStatus is the status a failed claim of kind k ends in.
func failedStatus(k claimKind) ledger.Status {
	if k.from == ledger.Applied {
		return ledger.UndoFailed
	}
	return ledger.ApplyFailed
}

// runUndoFailure is why a transactional undo failed inside a run's undo:
// the reason the run's report gives. It is stored with the error type
// "RunUndo".
type runUndoFailure struct{ reason string }

func (e *runUndoFailure) Error() string { return e.reason }

// storedType is the error type the ledger keeps for a failure's cause.
func storedType(cause error) string {
	if _, ok := cause.(*runUndoFailure); ok {
		return "RunUndo"
	}
	return typeName(cause)
}

// failureOf classifies why a change failed.
func failureOf(cause error) ledger.Failure {
	var sc *StateChangedError
	switch {
	case errors.As(cause, &sc):
		return ledger.FailureStateChanged
	case errors.Is(cause, errResultTooLarge):
		return ledger.FailureResultTooLarge
	}
	return ledger.FailureError
}

// Causes of failure the library itself finds.
var (
	// errResultTooLarge: Apply returned a result over MaxResultBytes.
	errResultTooLarge = errors.New("result too large")
	// errNothingRan: the operation's code was never called.
	errNothingRan = errors.New("operation not run")
)

// storableText makes error text storable in every ledger backend: valid
// UTF-8 without NUL bytes (PostgreSQL refuses both in text columns).
func storableText(s string) string {
	return strings.ReplaceAll(strings.ToValidUTF8(s, "\uFFFD"), "\x00", "\uFFFD")
}

// failureText is the error the agent sees for a failed change.
func failureText(c *ledger.Change, cause error) error {
	verb := "applied"
	if c.Status == ledger.UndoFailed {
		verb = "undone"
	}
	var pe *PanicError
	if errors.As(cause, &pe) {
		return &ChangeError{ChangeID: c.ID, Err: cause, Msg: voice.FailedAs(c.ID, verb, voice.FailureKind("panic"))}
	}
	if msg := agentText(cause); msg != typeName(cause) {
		if !strings.Contains(msg, c.ID) { // an operation's own refusal
			msg = voice.Failed(c.ID, verb, msg)
		}
		return &ChangeError{ChangeID: c.ID, Msg: msg, Err: cause}
	}
	return &ChangeError{ChangeID: c.ID, Err: cause, Msg: voice.OperationFailed(c.ID, verb, typeName(cause))}
}

func errOperationGone(c *ledger.Change) error {
	return &ChangeError{ChangeID: c.ID, Err: errNothingRan, Msg: voice.OperationGone(c.ID, c.Action)}
}

// observe calls an operation's Observe and returns its canonical JSON.
func (g *Guard) observe(ctx context.Context, o *op, payload json.RawMessage) (json.RawMessage, error) {
	return canonicalState(o, func() (any, error) { return o.observe(ctx, payload) })
}

// observeTx calls a TxOperation's Observe inside tx.
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

// hashOf is the digest of canonical JSON, as the ledger stores it.
func hashOf(canonical []byte) ledger.Digest { return ledger.Digest(canonjson.Hash(canonical)) }
