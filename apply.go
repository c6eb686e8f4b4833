package changeset

import (
	"context"
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
	by, err := g.agentBy(ctx, nil)
	if err != nil {
		return nil, err
	}
	return g.apply(ctx, nil, changeID, confirmationToken, byToken, by)
}

// Undo undoes an applied change with its undo token, as undo_change does.
func (g *Guard) Undo(ctx context.Context, changeID, undoToken string) (*UndoResult, error) {
	by, err := g.agentBy(ctx, nil)
	if err != nil {
		return nil, err
	}
	return g.undo(ctx, nil, changeID, undoToken, byToken, by)
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
// claim unwritten. A transactional operation is then performed inside that same
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
