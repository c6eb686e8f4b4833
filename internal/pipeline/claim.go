package pipeline

import (
	"errors"
	"time"

	"github.com/mcp-changeset/changeset-go/internal/canonjson"
	"github.com/mcp-changeset/changeset-go/internal/token"
	"github.com/mcp-changeset/changeset-go/internal/voice"
	"github.com/mcp-changeset/changeset-go/ledger"
)

// ClaimKind is the difference between claiming an apply and an undo.
type ClaimKind struct {
	Purpose string        // the token's purpose
	From    ledger.Status // the status a claim requires
	To      ledger.Status // the in-flight status it sets
	Verb    string        // "applied" / "undone", for refusals
	Token   string        // the token's name, for refusals
	Prefix  string        // the token's prefix
}

// The two kinds of claim.
var (
	ApplyClaim = ClaimKind{token.PurposeApply, ledger.Pending, ledger.Applying, "applied", "confirmation token", token.ConfirmPrefix}
	UndoClaim  = ClaimKind{token.PurposeUndo, ledger.Applied, ledger.Undoing, "undone", "undo token", token.UndoPrefix}
)

// Phase is "apply" or "undo": what a StateChangedError names.
func (k ClaimKind) Phase() string {
	if k.From == ledger.Applied {
		return "undo"
	}
	return "apply"
}

// An Authority is what lets a claim through besides the checks every
// claim makes. It is chosen by the code path that makes the claim (the
// tool registered for the server's approval mode, or a trusted method),
// never by anything an agent sends: a token is only ever checked as a
// token.
type Authority int

const (
	// ByToken: the agent's token, which must match the stored digest.
	ByToken Authority = iota
	// ByUser: the user approved in the client (UserApproval). A token the
	// agent gave anyway must match; without one, the claim checks the token
	// the Guard derived for the change at preview (or apply) from the
	// approval key, the change's ID and the payload hash of the row it
	// claims (seal.Sealer.Token).
	ByUser
	// ByTrusted: trusted code acting for a person (Guard.UndoAs, a run's
	// undo by a person); no token.
	ByTrusted
)

// A Claim is one request to claim a change for its apply or undo: which
// change, on what authority, from which scope, for whom.
type Claim struct {
	Kind  ClaimKind
	ID    string
	Token string // the agent's token; "" under ByTrusted, and may be "" under ByUser
	Auth  Authority
	Scope ledger.Digest // the caller's scope: a change of another is not found
	By    string        // who applies or undoes, recorded in the ledger
	// Approval is the ID of the people's approval the claim uses (person
	// approval), "" for none. A change whose operation needs people to
	// approve (Op.Approvers) is claimed only with one, except ByTrusted;
	// the claim marks it used in its own transaction.
	Approval string

	dry bool // a Precheck: the approval is not looked at yet
}

// checkArgs refuses malformed IDs and tokens before the ledger is asked:
// a malformed token is refused like a wrong one.
func (e *Engine) checkArgs(cl Claim) error {
	if !token.ValidID(cl.ID, token.ChangeIDPrefix) {
		return e.notFound(cl.ID)
	}
	if cl.needsToken() && !token.Valid(cl.Token, cl.Kind.Prefix) {
		return e.invalidToken(cl)
	}
	return nil
}

// needsToken reports whether the claim checks a token the caller gave.
func (cl Claim) needsToken() bool {
	switch cl.Auth {
	case ByTrusted:
		return false
	case ByUser:
		return cl.Token != ""
	}
	return true
}

func (e *Engine) invalidToken(cl Claim) error {
	return e.refuse(InvalidToken, cl.ID, voice.InvalidToken(cl.Kind.Token, cl.ID))
}

// notFound is the refusal for an unknown change (or one of another
// scope). An ID that is not even well formed is quoted and cut short, so
// that whatever the caller sent is not echoed at length.
func (e *Engine) notFound(id string) error {
	return e.refuse(NotFound, id, voice.ChangeNotFound(id))
}

// claimConflict explains a compare-and-set that lost a race.
func (e *Engine) claimConflict(id string, err error) error {
	if errors.Is(err, ledger.ErrConflict) {
		return e.refuse(Busy, id, voice.ClaimedElsewhere(id))
	}
	return err
}

// claimIn is every check of a claim, inside the caller's write transaction:
// the row exists in the caller's scope, the clock is sane, the status is
// the kind's From, the preview has not expired (an expired one is marked
// expired in tx), the undo is possible, the authority holds, and a change
// of a run is applied only while the run is open. It returns the change
// with its in-flight status set and its token spent, not yet written.
//
// A refusal is marked (see asRefusal), and returned with the change only
// when the refusal marked it expired, which the caller commits; any other
// error is the ledger's. The stored payload is hashed again: a token
// binds the payload's hash, and this binds the hash to the bytes Apply
// will receive.
func (e *Engine) claimIn(tx *ledger.Tx, cl Claim) (*ledger.Change, error) {
	id, k := cl.ID, cl.Kind
	c, err := tx.Change(id)
	if errors.Is(err, ledger.ErrNotFound) || (err == nil && c.ScopeHash != cl.Scope) {
		return nil, refused(e.notFound(id))
	}
	if err != nil {
		return nil, err
	}
	if hashOf(c.Payload) != c.PayloadHash {
		return nil, refused(e.Host.ChangeError(NoKind, id, voice.PayloadAltered(id),
			ledger.Errorf("verify the stored payload of change "+id+" in", e.Ledger.Location(), ledger.ErrCorrupt)))
	}
	now := e.Now()
	if now.Add(e.MaxClockSkew).Before(c.CreatedAt) {
		return nil, refused(e.refuse(Expired, id, voice.ClockBehind(id, e.MaxClockSkew)))
	}
	if c.Status != k.From {
		return nil, refused(e.statusRefusal(id, c.Status, k))
	}
	if k.From == ledger.Pending && !now.Before(c.ExpiresAt) {
		c.Status, c.ConfirmHash, c.UpdatedAt = ledger.Expired, "", now
		if err := tx.UpdateChange(c, ledger.Pending); err != nil {
			return nil, err
		}
		return c, refused(e.refuse(Expired, id, voice.PreviewExpired(id, voice.Time(c.ExpiresAt)))) // the caller logs the expiry
	}
	if k.From == ledger.Applied {
		if !c.Undoable {
			return nil, refused(e.refuse(WrongStatus, id, voice.NoUndo(id)))
		}
		if !c.UndoExpiresAt.IsZero() && !now.Before(c.UndoExpiresAt) {
			return nil, refused(e.refuse(Expired, id, voice.UndoWindowClosed(id, voice.Time(c.UndoExpiresAt))))
		}
	}
	if !e.authorized(cl, c) {
		return nil, refused(e.invalidToken(cl))
	}
	if err := e.useApproval(tx, cl, c, now); err != nil {
		return nil, err
	}
	if c.RunID != "" && k.From == ledger.Pending {
		if r, err := tx.Run(c.RunID); err == nil && r.Status != ledger.RunOpen {
			return nil, refused(e.refuse(RunClosed, id, voice.RunNotOpenForApply(id, c.RunID, string(r.Status))))
		}
	}
	spend(c, k, cl.By, now)
	return c, nil
}

// authorized reports whether the claim's authority lets it claim c.
func (e *Engine) authorized(cl Claim, c *ledger.Change) bool {
	k := cl.Kind
	tok := cl.Token
	switch cl.Auth {
	case ByTrusted:
		return true
	case ByUser:
		if tok == "" {
			if e.Sealer == nil { // cannot happen: ByUser is only made under UserApproval
				return false
			}
			tok = e.Sealer.Token(k.Prefix, k.Purpose, c.ID, c.PayloadHash)
		}
	case ByToken:
	default:
		return false
	}
	stored := c.ConfirmHash
	if k.From == ledger.Applied {
		stored = c.UndoHash
	}
	return token.Matches(stored, k.Purpose, c.ID, c.PayloadHash, tok)
}

// spend moves c, found in k.From, to k's in-flight status for by: the
// token is spent and by recorded.
func spend(c *ledger.Change, k ClaimKind, by string, now time.Time) {
	c.Status, c.UpdatedAt = k.To, now
	if k.From == ledger.Pending {
		c.ConfirmHash, c.AppliedBy = "", by
	} else {
		c.UndoHash, c.UndoneBy = "", by
	}
}

// statusRefusal is the refusal for a change in the wrong status. Its text is
// part of the contract: "change <id> cannot be applied (status: <status>)".
func (e *Engine) statusRefusal(id string, s ledger.Status, k ClaimKind) error {
	return e.refuse(WrongStatus, id, voice.WrongStatus(id, k.Verb, string(s)))
}

// hashOf is the digest of canonical JSON (a payload, or a state
// canonicalState returned), as the ledger stores it.
func hashOf(canonical []byte) ledger.Digest { return ledger.Digest(canonjson.Hash(canonical)) }
