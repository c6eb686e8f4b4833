package pipeline

import (
	"context"
	"errors"

	"github.com/mcp-changeset/changeset-go/ledger"
)

// errDryCheck rolls back the transaction of a precheck.
var errDryCheck = errors.New("precheck: roll back")

// Precheck runs every check of the claim cl (scope, status, expiry, undo
// window, the token if one is given, the run), and the write mode and
// state check that follow it, without writing anything: the claim's
// checks run in a transaction that is rolled back. It returns the change.
// The user's approval asks its question only about a change that passes,
// and a write waits for people's approval only once it passes: Precheck
// does not look at the claim's approval.
func (e *Engine) Precheck(ctx context.Context, cl Claim) (*ledger.Change, error) {
	k := cl.Kind
	cl.dry = true // people's approval comes after the checks
	if err := e.checkArgs(cl); err != nil {
		return nil, err
	}
	var c *ledger.Change
	var refusal error
	err := e.Ledger.WithTx(ctx, func(tx *ledger.Tx) error {
		got, err := e.claimIn(tx, cl)
		if err != nil {
			var failure error
			refusal, failure = asRefusal(err)
			return errors.Join(failure, errDryCheck)
		}
		c = got
		if o, ok := e.Op(c.Action); ok && o.Tx != nil && o.Tx.Observe != nil {
			state, err := observeTx(ctx, tx, o, c.Payload)
			refusal = e.stateCheck(k, c, state, err)
		}
		return errDryCheck
	})
	if refusal != nil {
		return nil, refusal
	}
	if !errors.Is(err, errDryCheck) {
		return nil, err
	}
	if err := e.Host.WritesOff(cl.ID, k.Verb); err != nil {
		return nil, err
	}
	if o, ok := e.Op(c.Action); ok && o.Observe != nil {
		state, err := observe(ctx, o, c.Payload)
		if err := e.stateCheck(k, c, state, err); err != nil {
			return nil, err
		}
	}
	return c, nil
}

// stateCheck refuses to ask about a change whose resource no longer looks
// the way the apply (or undo) requires. A state that could not be read is
// left for the claim to decide.
func (e *Engine) stateCheck(k ClaimKind, c *ledger.Change, state []byte, err error) error {
	switch {
	case err != nil:
		return nil
	case k.From == ledger.Pending && hashOf(state) != c.StateHash:
		return e.Host.StateChanged(c.ID, "apply", nil)
	case k.From == ledger.Applied && (c.After == nil || string(state) != string(c.After)):
		return e.Host.StateChanged(c.ID, "undo", nil)
	}
	return nil
}
