package pipeline

import (
	"context"
	"strings"

	"github.com/mcp-changeset/changeset-go/internal/canonjson"
	"github.com/mcp-changeset/changeset-go/internal/runundo"
	"github.com/mcp-changeset/changeset-go/internal/token"
	"github.com/mcp-changeset/changeset-go/internal/voice"
	"github.com/mcp-changeset/changeset-go/ledger"
)

// An Outcome is what an apply or undo did to its change, besides its
// error.
type Outcome struct {
	// Change is the row as the step last saw it: claimed, and then
	// applied, undone or failed, or found expired; nil when the step was
	// refused before it claimed the row.
	Change *ledger.Change
	// UndoToken is the new undo token of an apply that succeeded, "" when
	// the operation has no inverse.
	UndoToken string
}

// Apply applies the change cl claims: the claim, the state check against
// the preview, the operation's Apply on the stored payload, the checks of
// its result and the "after" snapshot, and the outcome recorded. The
// caller has checked that writes are on.
func (e *Engine) Apply(ctx context.Context, cl Claim) (Outcome, error) {
	var undoToken string
	out, err := e.claim(ctx, cl, nil, func(c *ledger.Change, r runner) error {
		var err error
		undoToken, err = e.performApply(ctx, c, r)
		return err
	})
	if err == nil {
		out.UndoToken = undoToken
	}
	return out, err
}

// Undo undoes the change cl claims. It is the one path every undo takes:
// a single change's, and each change of a run's. It refuses while writes
// are off and, inside the claim, an undo that would remove what a change
// that stays in place depends on (runundo.Engine.Hold); undoing names the
// changes the caller undoes too (a run's), nil for a single undo.
func (e *Engine) Undo(ctx context.Context, cl Claim, undoing map[string]bool) (Outcome, error) {
	if err := e.Host.WritesOff(cl.ID, UndoClaim.Verb); err != nil {
		return Outcome{}, err
	}
	hold := func(tx *ledger.Tx, c *ledger.Change) error {
		reason, err := e.Runs().Hold(ctx, tx, c, undoing)
		if err != nil || reason == "" {
			return err
		}
		return refused(e.Host.ChangeError(Dependency, cl.ID,
			voice.DependencyHeld(cl.ID, strings.TrimSuffix(reason, "; it is left as it is")), &runundo.HeldError{Reason: reason}))
	}
	return e.claim(ctx, cl, hold, func(c *ledger.Change, r runner) error {
		return e.performUndo(c, r)
	})
}

// claim is the one place an apply or undo runs. Its claim transaction
// reads the row under the write lock and runs every check of claimIn,
// then hold, when not nil: a refusal of hold leaves the claim unwritten.
// A transactional operation is then performed inside that same
// transaction, which commits the write and its bookkeeping together (or
// rolls both back, and recordFailure records the failure in a second
// one). For an ordinary operation the transaction commits the claim
// alone, and perform runs after it: at most once, with the outcome
// recorded by finish or recordFailure.
func (e *Engine) claim(ctx context.Context, cl Claim,
	hold func(tx *ledger.Tx, c *ledger.Change) error, perform func(c *ledger.Change, r runner) error) (out Outcome, err error) {
	k, id := cl.Kind, cl.ID
	var (
		claimed             *ledger.Change
		o                   *Op
		refusal, failure    error
		performedInTheClaim bool
	)
	ctx, end := e.Host.Start(ctx, k, id)
	if end != nil {
		defer func() { end(out, err) }()
	}
	if err := e.checkArgs(cl); err != nil {
		return out, err
	}
	err = e.Ledger.WithTx(ctx, func(tx *ledger.Tx) error {
		out.Change, claimed, refusal, failure, performedInTheClaim = nil, nil, nil, nil, false // WithTx may run this again
		c, err := e.claimIn(tx, cl)
		out.Change = c // the row as claimed, or found expired
		if err != nil {
			refusal, err = asRefusal(err)
			return err // nil after a refusal: an expired preview is marked expired
		}
		if hold != nil {
			if err := hold(tx, c); err != nil {
				out.Change = nil
				refusal, err = asRefusal(err)
				return err
			}
		}
		o, _ = e.Op(c.Action)
		if o != nil && o.Tx != nil {
			performedInTheClaim = true
			if err := perform(c, e.inTx(ctx, tx, o)); err != nil {
				failure = err
				return errRollback
			}
		}
		claimed = c
		return tx.UpdateChange(c, k.From)
	})
	switch {
	case failure != nil:
		failed := *out.Change // rolled back with the claim; recordFailure records it failed
		failed.Status = failedStatus(k)
		out.Change = &failed
		return out, e.recordFailure(ctx, cl, nil, failure)
	case err != nil:
		return out, e.claimConflict(id, err)
	case refusal != nil:
		if out.Change != nil { // a preview found past its expiry, now expired
			e.Host.Transition(ctx, out.Change, k.From, cl.By)
		}
		return out, refusal
	}
	e.Host.Transition(ctx, claimed, k.From, cl.By)
	if performedInTheClaim {
		return out, nil
	}
	if o == nil {
		return out, e.recordFailure(ctx, cl, claimed, e.operationGone(claimed))
	}
	if err := perform(claimed, e.external(ctx, o)); err != nil {
		return out, e.recordFailure(ctx, cl, claimed, err)
	}
	if err := e.finish(ctx, claimed, k.To, cl.By); err != nil {
		return out, e.Host.ChangeError(NoKind, id, voice.NotRecorded(id, k.Verb, e.Host.Text(err), string(k.To), k.From == ledger.Pending), err)
	}
	return out, nil
}

// performApply runs a claimed change: the state check against the preview,
// the Apply, the checks of its result and the "after" snapshot. On success
// c holds the applied outcome (status, result, snapshots, a new undo
// token's digest) and the new undo token is returned. On failure nothing
// in c is final; the caller records the failure.
func (e *Engine) performApply(ctx context.Context, c *ledger.Change, r runner) (undoToken string, err error) {
	if r.apply == nil {
		return "", e.operationGone(c)
	}
	if r.observe != nil {
		before, err := r.observe(c.Payload)
		if err != nil {
			return "", err
		}
		if hashOf(before) != c.StateHash {
			return "", e.Host.StateChanged(c.ID, "apply", before)
		}
		c.Before = before
	}
	out, err := r.apply(c.Payload)
	if err != nil {
		return "", err
	}
	result, err := canonjson.Marshal(out)
	if err != nil {
		return "", e.Host.ChangeError(NoKind, c.ID, voice.ResultUnstorable(c.ID), err)
	}
	if len(result) > e.MaxResultBytes {
		return "", e.Host.ChangeError(NoKind, c.ID, voice.ResultTooLarge(c.ID, len(result), e.MaxResultBytes), ErrResultTooLarge)
	}
	if r.observe != nil {
		// The write happened: a failing Observe must not lose that fact.
		// Without an "after" snapshot an undo has nothing to compare with,
		// so it will refuse.
		if after, err := r.observe(c.Payload); err == nil {
			c.After = after
		} else {
			e.Log.Warn("observe after apply failed; undo will be refused", "change_id", c.ID, "err", err)
		}
	}
	now := e.Now()
	c.Status, c.Result, c.AppliedAt = ledger.Applied, result, now
	if r.undo != nil {
		undoToken = token.New(token.UndoPrefix)
		if e.Sealer != nil { // the user approves; see ByUser
			undoToken = e.Sealer.Token(token.UndoPrefix, token.PurposeUndo, c.ID, c.PayloadHash)
		}
		c.UndoHash = token.Digest(token.PurposeUndo, c.ID, c.PayloadHash, undoToken)
		if e.UndoTTL >= 0 {
			c.UndoExpiresAt = now.Add(e.UndoTTL)
		}
	}
	return undoToken, nil
}

// performUndo runs the undo of a claimed change after checking that its
// resource still looks the way the apply left it. On success c is undone.
func (e *Engine) performUndo(c *ledger.Change, r runner) error {
	if r.undo == nil {
		return e.operationGone(c)
	}
	if r.observe != nil {
		current, err := r.observe(c.Payload)
		if err != nil {
			return err
		}
		if c.After == nil || string(current) != string(c.After) {
			return e.Host.StateChanged(c.ID, "undo", current)
		}
	}
	if err := r.undo(c.Payload, c.Result); err != nil {
		return err
	}
	c.Status, c.UndoneAt = ledger.Undone, e.Now()
	return nil
}
