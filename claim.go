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

// An authority is what lets a claim through besides the checks every
// claim makes. It is chosen by the code path that makes the claim (the
// tool registered for the server's approval mode, or a trusted method),
// never by anything an agent sends: a token is only ever checked as a
// token.
type authority int

const (
	// byToken: the agent's token, which must match the stored digest.
	byToken authority = iota
	// byUser: the user approved in the client (UserApproval). A token the
	// agent gave anyway must match; without one, the claim checks the token
	// the Guard derived for the change at preview (or apply) from the
	// approval key, the change's ID and the payload hash of the row it
	// claims (sealer.tokenFor).
	byUser
	// byTrusted: trusted code acting for a person (Guard.UndoAs, a run's
	// undo by a person); no token.
	byTrusted
)

// A claim is one request to claim a change for its apply or undo: which
// change, on what authority, from which scope, for whom.
type claim struct {
	kind  claimKind
	id    string
	token string // the agent's token; "" under byTrusted, and may be "" under byUser
	auth  authority
	scope ledger.Digest // the caller's scope: a change of another is not found
	by    string        // who applies or undoes, recorded in the ledger
}

// checkArgs refuses malformed IDs and tokens before the ledger is asked:
// a malformed token is refused like a wrong one.
func (cl claim) checkArgs() error {
	if !validID(cl.id, changeIDPrefix) {
		return changeNotFound(cl.id)
	}
	if cl.needsToken() && !validToken(cl.token, cl.kind.prefix) {
		return cl.invalidToken()
	}
	return nil
}

// needsToken reports whether the claim checks a token the caller gave.
func (cl claim) needsToken() bool {
	switch cl.auth {
	case byTrusted:
		return false
	case byUser:
		return cl.token != ""
	}
	return true
}

func (cl claim) invalidToken() error {
	return refuse(ErrInvalidToken, cl.id, "%s", voice.InvalidToken(cl.kind.token, cl.id))
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
// the kind's from, the preview has not expired (an expired one is marked
// expired in tx), the undo is possible, the authority holds, and a change
// of a run is applied only while the run is open. It returns the change
// with its in-flight status set and its token spent, not yet written.
//
// A refusal is a *ChangeError (see asRefusal), returned with the change
// only when the refusal marked it expired, which the caller commits; any
// other error is the ledger's. The stored payload is hashed again: a token
// binds the payload's hash, and this binds the hash to the bytes Apply
// will receive.
func (g *Guard) claimIn(tx *ledger.Tx, cl claim) (*ledger.Change, error) {
	id, k := cl.id, cl.kind
	c, err := tx.Change(id)
	if errors.Is(err, ledger.ErrNotFound) || (err == nil && c.ScopeHash != cl.scope) {
		return nil, changeNotFound(id)
	}
	if err != nil {
		return nil, err
	}
	if hashOf(c.Payload) != c.PayloadHash {
		return nil, &ChangeError{ChangeID: id, Err: ledger.Errorf("verify the stored payload of change "+id+" in", g.ledger.Location(), ledger.ErrCorrupt),
			Msg: voice.PayloadAltered(id)}
	}
	now := g.now()
	if now.Add(g.opts.MaxClockSkew).Before(c.CreatedAt) {
		return nil, refuse(ErrExpired, id, "%s", voice.ClockBehind(id, g.opts.MaxClockSkew))
	}
	if c.Status != k.from {
		return nil, statusRefusal(id, c.Status, k)
	}
	if k.from == ledger.Pending && !now.Before(c.ExpiresAt) {
		c.Status, c.ConfirmHash, c.UpdatedAt = ledger.Expired, "", now
		if err := tx.UpdateChange(c, ledger.Pending); err != nil {
			return nil, err
		}
		return c, refuse(ErrExpired, id, "%s", voice.PreviewExpired(id, formatTime(c.ExpiresAt))) // the caller logs the expiry
	}
	if k.from == ledger.Applied {
		if !c.Undoable {
			return nil, refuse(ErrWrongStatus, id, "%s", voice.NoUndo(id))
		}
		if !c.UndoExpiresAt.IsZero() && !now.Before(c.UndoExpiresAt) {
			return nil, refuse(ErrExpired, id, "%s", voice.UndoWindowClosed(id, formatTime(c.UndoExpiresAt)))
		}
	}
	if !g.authorized(cl, c) {
		return nil, cl.invalidToken()
	}
	if c.RunID != "" && k.from == ledger.Pending {
		if r, err := tx.Run(c.RunID); err == nil && r.Status != ledger.RunOpen {
			return nil, refuse(ErrRunClosed, id, "%s", voice.RunNotOpenForApply(id, c.RunID, string(r.Status)))
		}
	}
	spend(c, k, cl.by, now)
	return c, nil
}

// authorized reports whether the claim's authority lets it claim c.
func (g *Guard) authorized(cl claim, c *ledger.Change) bool {
	k := cl.kind
	token := cl.token
	switch cl.auth {
	case byTrusted:
		return true
	case byUser:
		if token == "" {
			if g.sealer == nil { // cannot happen: byUser is only made under UserApproval
				return false
			}
			token = g.sealer.tokenFor(k.prefix, k.purpose, c.ID, c.PayloadHash)
		}
	case byToken:
	default:
		return false
	}
	stored := c.ConfirmHash
	if k.from == ledger.Applied {
		stored = c.UndoHash
	}
	return tokenMatches(stored, k.purpose, c.ID, c.PayloadHash, token)
}

// spend moves c, found in k.from, to k's in-flight status for by: the
// token is spent and by recorded.
func spend(c *ledger.Change, k claimKind, by string, now time.Time) {
	c.Status, c.UpdatedAt = k.to, now
	if k.from == ledger.Pending {
		c.ConfirmHash, c.AppliedBy = "", by
	} else {
		c.UndoHash, c.UndoneBy = "", by
	}
}

// asRefusal splits what a check inside a claim transaction returned: a
// refusal (a *ChangeError), which lets the transaction commit what the
// check wrote, or the ledger's error, which rolls it back.
func asRefusal(err error) (refusal, failure error) {
	if _, ok := errors.AsType[*ChangeError](err); ok {
		return err, nil
	}
	return nil, err
}

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
	err := g.retryBusy(ctx, func(tx *ledger.Tx) error { return tx.UpdateChange(c, from) })
	if err == nil {
		g.logTransition(ctx, c, from, by)
		return nil
	}
	g.log.Error("change outcome not recorded; the row stays in flight for an operator to reconcile",
		"change_id", c.ID, "status", string(from), "outcome", string(c.Status), "err", err)
	return err
}

// busyAttempts is how often retryBusy tries a transaction.
const busyAttempts = 5

// retryBusy runs fn in a write transaction, again after a growing pause
// while the ledger stays busy (ledger.ErrBusy) past its own busy timeout:
// for the bookkeeping that must not be lost to a moment of contention
// (an outcome, a failure, a run released). It returns the last error.
// None of that is a claim, so the transaction is lazy: under
// ledger.DurabilityClaims it rides on the next claim's sync, and a machine
// that stops first leaves the row in flight for an operator, as a crash
// does.
func (g *Guard) retryBusy(ctx context.Context, fn func(tx *ledger.Tx) error) error {
	var err error
	for attempt := range busyAttempts {
		if err = g.ledger.WithLazyTx(ctx, fn); err == nil || !errors.Is(err, ledger.ErrBusy) {
			return err
		}
		if attempt < busyAttempts-1 {
			time.Sleep(time.Duration(attempt+1) * 100 * time.Millisecond)
		}
	}
	return err
}
