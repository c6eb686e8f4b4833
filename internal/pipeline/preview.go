package pipeline

import (
	"context"
	"errors"
	"time"

	"github.com/mcp-changeset/changeset-go/internal/token"
	"github.com/mcp-changeset/changeset-go/internal/voice"
	"github.com/mcp-changeset/changeset-go/ledger"
)

// A preview is stored in two steps around what only the Guard knows (who
// previews, and the caller's session): Check refuses a proposal before
// anything is stored, Store stores it as a pending change.

// Check makes the checks of o's proposal p that come before anything is
// stored: a diff that changes something (unless o allows an empty one),
// the size, and the state the preview is computed from, which is p's own
// snapshot or what o's Observe reads now, outside the write lock (it may
// be slow I/O). It returns the state's digest; "" when o checks no state,
// or observes in the ledger's transaction, where Store reads it.
func (e *Engine) Check(ctx context.Context, o *Op, p Proposal) (ledger.Digest, error) {
	if string(p.Diff) == "[]" && !o.AllowEmptyDiff {
		return "", e.refuse(NoChange, "", voice.EmptyDiff(o.Name))
	}
	if size := len(p.Payload) + len(p.Diff) + len(p.Summary); size > e.MaxPayloadBytes {
		return "", e.refuse(Quota, "", voice.ProposalTooLarge(o.Name, size, e.MaxPayloadBytes))
	}
	switch {
	case p.State != nil && o.HasObserve(): // the state the preview itself read
		return hashOf(p.State), nil
	case o.Observe != nil:
		state, err := observe(ctx, o, p.Payload)
		if err == nil {
			err = CheckStates(p.Resources, state)
		}
		if err != nil {
			return "", e.Host.PreviewFailed(ctx, o.Name, err)
		}
		return hashOf(state), nil
	}
	return "", nil
}

// A Pending is a checked proposal, to be stored as a pending change.
type Pending struct {
	Op       *Op
	Proposal Proposal
	// StateHash is what Check returned.
	StateHash ledger.Digest
	// Scope is the caller's scope; By names who previews.
	Scope ledger.Digest
	By    string
	// RunID is the run the preview joins, or "".
	RunID string
	// SessionKey identifies the caller's session, whose run a preview
	// without RunID joins; "" joins none. Client is the client's name,
	// for the label of a new session run.
	SessionKey ledger.Digest
	Client     string
}

// A Stored is a preview stored: the pending change, its confirmation
// token, and, when the operation needs people to approve (Op.Approvers),
// the approval of its apply, requested in the same transaction.
type Stored struct {
	Change   *ledger.Change
	Token    string
	Approval *ledger.Approval
}

// Store stores p as a pending change, and returns it and its
// confirmation token. In one transaction it reads the state of a
// transactional operation, refuses a scope that has MaxPendingPerScope
// previews waiting or a run that takes no new changes, joins or starts the
// caller's session run, inserts the row and, for an operation that needs
// people to approve, requests the approval of its apply, bound to the
// payload's hash, with the token's expiry as its deadline: the change and
// its approval exist together or not at all.
func (e *Engine) Store(ctx context.Context, p Pending) (Stored, error) {
	o, prop := p.Op, p.Proposal
	now := e.Now()
	c := &ledger.Change{
		ID:            token.NewID(token.ChangeIDPrefix),
		Action:        o.Name,
		PreviewedBy:   p.By,
		Status:        ledger.Pending,
		ScopeHash:     p.Scope,
		RunID:         p.RunID,
		Resource:      prop.Resource,
		Resources:     prop.Resources,
		DependsOn:     prop.DependsOn,
		Payload:       prop.Payload,
		PayloadHash:   hashOf(prop.Payload),
		Diff:          prop.Diff,
		Summary:       prop.Summary,
		Warnings:      prop.Warnings,
		StateHash:     p.StateHash,
		Undoable:      o.HasUndo(),
		Transactional: o.Tx != nil,
		RedactFields:  o.Redact,
		CreatedAt:     now,
		UpdatedAt:     now,
		ExpiresAt:     now.Add(e.TTL),
	}
	tok := token.New(token.ConfirmPrefix)
	if e.Sealer != nil { // the user approves in the client; see ByUser
		tok = e.Sealer.Token(token.ConfirmPrefix, token.PurposeApply, c.ID, c.PayloadHash)
	}
	c.ConfirmHash = token.Digest(token.PurposeApply, c.ID, c.PayloadHash, tok)

	var (
		sessionRun string // the session run the preview joined, if any
		approval   *ledger.Approval
	)
	// A preview claims nothing: it may ride on the next claim's sync.
	err := e.Ledger.WithLazyTx(ctx, func(tx *ledger.Tx) error {
		// WithLazyTx may run this again.
		sessionRun, approval = "", nil
		if o.Tx != nil && o.Tx.Observe != nil && prop.State == nil { // in the same transaction as the row
			state, err := observeTx(ctx, tx, o, c.Payload)
			if err == nil {
				err = CheckStates(c.Resources, state)
			}
			if err != nil {
				return e.Host.PreviewFailed(ctx, o.Name, err)
			}
			c.StateHash = hashOf(state)
		}
		if err := e.checkPendingQuota(tx, p.Scope, now); err != nil {
			return err
		}
		switch {
		case p.RunID != "":
			if err := e.checkRunOpen(tx, p.RunID, p.Scope); err != nil {
				return err
			}
		case p.SessionKey != "":
			id, err := e.sessionRun(tx, p, now)
			if err != nil {
				return err
			}
			c.RunID, sessionRun = id, id
		}
		if err := tx.InsertChange(c); err != nil || o.Approvers == 0 {
			return err
		}
		var err error
		approval, err = tx.RequestApproval(ledger.ApprovalRequest{Kind: ledger.ApproveApply, ChangeID: c.ID,
			Needed: o.Approvers, RequestedBy: p.By, Deadline: c.ExpiresAt, At: now})
		return err
	})
	if err != nil {
		return Stored{}, err
	}
	if sessionRun != "" {
		e.recent.saw(sessionRun, c.CreatedAt)
	}
	e.Host.Transition(ctx, c, "", c.PreviewedBy)
	return Stored{Change: c, Token: tok, Approval: approval}, nil
}

// checkPendingQuota refuses a preview when the scope already has
// MaxPendingPerScope previews waiting that have not expired: previews an
// agent walked away from stop counting once they expire.
func (e *Engine) checkPendingQuota(tx *ledger.Tx, scope ledger.Digest, now time.Time) error {
	n, err := tx.CountChanges(ledger.ChangeFilter{ScopeHash: scope, Statuses: []ledger.Status{ledger.Pending}, ExpiresAfter: now})
	if err != nil {
		return err
	}
	if n >= e.MaxPendingPerScope {
		return e.refuse(Quota, "", voice.PendingQuota(n))
	}
	return nil
}

// checkRunOpen refuses to join a change to a run that is unknown, in
// another scope, or being or already undone.
func (e *Engine) checkRunOpen(tx *ledger.Tx, runID string, scope ledger.Digest) error {
	r, err := tx.Run(runID)
	if errors.Is(err, ledger.ErrNotFound) || (err == nil && r.ScopeHash != scope) {
		return e.refuse(NotFound, "", e.Voice.RunNotFound(runID))
	}
	if err != nil {
		return err
	}
	if r.Status != ledger.RunOpen {
		return e.refuse(RunClosed, "", e.Voice.RunClosed(runID, string(r.Status)))
	}
	return nil
}
