package changeset

import (
	"context"
	"errors"
	"time"

	"github.com/mcp-changeset/changeset-go/internal/voice"
	"github.com/mcp-changeset/changeset-go/ledger"
)

// claimKind is the difference between claiming an apply and an undo.
type claimKind struct {
	purpose string        // token purpose
	from    ledger.Status // the status a claim requires
	to      ledger.Status // the in-flight status it sets
	verb    string        // "applied" / "undone", for refusals
	token   string        // the token's name, for refusals
	prefix  string        // the token's prefix
}

var (
	applyClaim = claimKind{purposeApply, ledger.Pending, ledger.Applying, "applied", "confirmation token", confirmPrefix}
	undoClaim  = claimKind{purposeUndo, ledger.Applied, ledger.Undoing, "undone", "undo token", undoPrefix}
)

// checkClaimArgs refuses malformed IDs and tokens before the ledger is
// asked: a malformed token is refused like a wrong one.
func checkClaimArgs(k claimKind, id, token string, trusted bool) error {
	if !validID(id, changeIDPrefix) {
		return changeNotFound(id)
	}
	if !trusted && token != userApproved && !validToken(token, k.prefix) {
		return refuse(ErrInvalidToken, id, "%s", voice.InvalidToken(k.token, id))
	}
	return nil
}

// claimConflict explains a compare-and-set that lost a race.
func claimConflict(id string, err error) error {
	if errors.Is(err, ledger.ErrConflict) {
		return refuse(ErrBusy, id, "%s", voice.ClaimedElsewhere(id))
	}
	return err
}

// claimIn is every check of a claim, inside the caller's write transaction:
// the row exists in the caller's scope, the clock is sane, the status is
// k.from, the preview has not expired (an expired one is marked expired in
// tx), the undo is possible, the token matches, and a change of a run
// is applied only while the run is open. It returns the change with its
// in-flight status set and its token spent, not yet written, or a refusal
// (with the change only when the refusal marked it expired).
// The stored payload is hashed again: a token binds the payload's hash,
// and this binds the hash to the bytes Apply will receive.
func (g *Guard) claimIn(tx *ledger.Tx, k claimKind, id, token string, scope ledger.Digest, by string, trusted bool) (*ledger.Change, error, error) {
	c, err := tx.Change(id)
	if errors.Is(err, ledger.ErrNotFound) || (err == nil && c.ScopeHash != scope) {
		return nil, changeNotFound(id), nil
	}
	if err != nil {
		return nil, nil, err
	}
	if hashOf(c.Payload) != c.PayloadHash {
		return nil, &ChangeError{ChangeID: id, Err: ledger.Errorf("verify the stored payload of change "+id+" in", g.ledger.Location(), ledger.ErrCorrupt),
			Msg: voice.PayloadAltered(id)}, nil
	}
	now := g.now()
	if now.Add(g.opts.MaxClockSkew).Before(c.CreatedAt) {
		return nil, refuse(ErrExpired, id, "%s", voice.ClockBehind(id, g.opts.MaxClockSkew)), nil
	}
	if c.Status != k.from {
		return nil, statusRefusal(id, c.Status, k), nil
	}
	if k.from == ledger.Pending && !now.Before(c.ExpiresAt) {
		c.Status, c.ConfirmHash, c.UpdatedAt = ledger.Expired, "", now
		refusal := refuse(ErrExpired, id, "%s", voice.PreviewExpired(id, formatTime(c.ExpiresAt)))
		return c, refusal, tx.UpdateChange(c, ledger.Pending) // the caller logs the expiry
	}
	if k.from == ledger.Applied {
		if !c.Undoable {
			return nil, refuse(ErrWrongStatus, id, "%s", voice.NoUndo(id)), nil
		}
		if !c.UndoExpiresAt.IsZero() && !now.Before(c.UndoExpiresAt) {
			return nil, refuse(ErrExpired, id, "%s", voice.UndoWindowClosed(id, formatTime(c.UndoExpiresAt))), nil
		}
	}
	if !trusted {
		stored := c.ConfirmHash
		if k.from == ledger.Applied {
			stored = c.UndoHash
		}
		if token == userApproved {
			if g.sealer == nil {
				return nil, refuse(ErrInvalidToken, id, "%s", voice.InvalidToken(k.token, id)), nil
			}
			token = g.sealer.tokenFor(k.prefix, k.purpose, c.ID, c.PayloadHash)
		}
		if !tokenMatches(stored, k.purpose, c.ID, c.PayloadHash, token) {
			return nil, refuse(ErrInvalidToken, id, "%s", voice.InvalidToken(k.token, id)), nil
		}
	}
	if c.RunID != "" && k.from == ledger.Pending {
		if r, err := tx.Run(c.RunID); err == nil && r.Status != ledger.RunOpen {
			return nil, refuse(ErrRunClosed, id, "%s", voice.RunNotOpenForApply(id, c.RunID, string(r.Status))), nil
		}
	}
	c.Status, c.UpdatedAt = k.to, now
	if k.from == ledger.Pending {
		c.ConfirmHash, c.AppliedBy = "", by
	} else {
		c.UndoHash, c.UndoneBy = "", by
	}
	return c, nil, nil
}

// userApproved, passed as the token of a claim, stands for the user's
// approval in the client: the claim then checks the token the Guard
// derived for the change at preview (or apply) from the approval key, the
// change's ID and the payload hash of the row it claims (sealer.tokenFor).
// It is never a valid token of its own.
const userApproved = "\x00approved by the user"

// statusRefusal is the refusal for a change in the wrong status. Its text is
// part of the contract: "change <id> cannot be applied (status: <status>)".
func statusRefusal(id string, s ledger.Status, k claimKind) error {
	return refuse(ErrWrongStatus, id, "%s", voice.WrongStatus(id, k.verb, string(s)))
}

// finish records the outcome of a claimed apply or undo: it moves c from
// the in-flight status from to c.Status with the fields update sets. It
// runs even if the caller's context was cancelled, since the write it
// records may already have happened, and retries a busy ledger for a while
// before giving up (the row then stays in flight for an operator).
func (g *Guard) finish(ctx context.Context, c *ledger.Change, from ledger.Status, by string) error {
	ctx = context.WithoutCancel(ctx)
	c.UpdatedAt = g.now()
	var err error
	for attempt := 0; attempt < 5; attempt++ {
		err = g.ledger.WithTx(ctx, func(tx *ledger.Tx) error { return tx.UpdateChange(c, from) })
		if err == nil {
			g.logTransition(ctx, c, from, by)
			return nil
		}
		if !errors.Is(err, ledger.ErrBusy) {
			break
		}
		time.Sleep(time.Duration(attempt+1) * 100 * time.Millisecond)
	}
	g.log.Error("change outcome not recorded; the row stays in flight for an operator to reconcile",
		"change_id", c.ID, "status", string(from), "outcome", string(c.Status), "err", err)
	return err
}
