package pipeline

import (
	"context"
	"errors"
	"time"

	"github.com/mcp-changeset/changeset-go/internal/voice"
	"github.com/mcp-changeset/changeset-go/ledger"
)

// Person approval: a named person, not the agent, approves each apply,
// undo or run undo of an operation that needs it (Op.Approvers). The
// approval of an apply is requested with the preview (Store), that of an
// undo by the agent's first undo call, that of a run undo by its dry run
// (OfferRunUndo); the claim uses it in its own transaction (useApproval,
// ClaimRun), so that an approval is spent exactly when the claim commits.

// ApprovalKindOf is the kind of approval a claim of kind k uses.
func ApprovalKindOf(k ClaimKind) ledger.ApprovalKind {
	if k.From == ledger.Applied {
		return ledger.ApproveUndo
	}
	return ledger.ApproveApply
}

// useApproval uses the claim's approval inside its transaction, or
// refuses a claim that needs one and has none. Trusted code acting for a
// person needs none.
func (e *Engine) useApproval(tx *ledger.Tx, cl Claim, c *ledger.Change, now time.Time) error {
	if cl.Auth == ByTrusted || cl.dry {
		return nil
	}
	if cl.Approval == "" {
		if o, ok := e.Op(c.Action); ok && o.Approvers > 0 {
			return refused(e.refuse(AwaitingApproval, cl.ID, voice.ApprovalMissing(voice.Change(cl.ID), cl.Kind.Verb)))
		}
		return nil
	}
	a, err := tx.UseApproval(cl.Approval, ledger.ApprovalUse{Kind: ApprovalKindOf(cl.Kind), ChangeID: c.ID, By: cl.By, At: now})
	if err != nil {
		if !IsApprovalRefusal(err) {
			return err
		}
		return refused(e.ApprovalRefusal(voice.Change(cl.ID), cl.ID, cl.Kind.Verb, e.approvalTool(cl.Kind), a, err))
	}
	return nil
}

// approvalTool is the agent's tool that claims k.
func (e *Engine) approvalTool(k ClaimKind) string {
	if k.From == ledger.Applied {
		return e.Voice.Tool("undo_change")
	}
	return e.Voice.Tool("apply_change")
}

// IsApprovalRefusal reports whether err is the ledger's refusal to use or
// find an approval, as opposed to a failure of the ledger itself.
func IsApprovalRefusal(err error) bool {
	for _, r := range []error{ledger.ErrApprovalWaiting, ledger.ErrApprovalDeclined, ledger.ErrApprovalExpired,
		ledger.ErrApprovalUsed, ledger.ErrApprovalMismatch, ledger.ErrApprovalApproved, ledger.ErrNotFound} {
		if errors.Is(err, r) {
			return true
		}
	}
	return false
}

// ApprovalRefusal is the refusal of subject (voice.Change or voice.Run;
// id is the change's ID, "" for a run) that was not verb because its
// approval a does not let it go ahead: still waiting, declined, expired,
// used, or (cause wraps ErrApprovalMismatch) bound to something else. tool
// is the tool to call again. a may be nil when the ledger found none.
func (e *Engine) ApprovalRefusal(subject, id, verb, tool string, a *ledger.Approval, cause error) error {
	if a == nil || errors.Is(cause, ledger.ErrApprovalMismatch) || errors.Is(cause, ledger.ErrNotFound) {
		return e.Host.ChangeError(Refused, id, voice.ApprovalNotForThis(subject, verb), cause)
	}
	link := e.Link(a.ID)
	switch a.StatusAt(e.Now()) {
	case ledger.ApprovalWaiting:
		return e.Host.ChangeError(AwaitingApproval, id, e.Voice.ApprovalWaiting(subject, verb, a.ID, link, a.Approvals, a.Needed, tool), cause)
	case ledger.ApprovalDeclined:
		return e.Host.ChangeError(Declined, id, voice.ApprovalDeclined(subject, verb, a.ID, a.DecidedBy, a.Note, a.Kind == ledger.ApproveApply), cause)
	case ledger.ApprovalExpired:
		return e.Host.ChangeError(Expired, id, voice.ApprovalExpired(subject, verb, a.ID, voice.Time(a.Deadline)), cause)
	case ledger.ApprovalUsed:
		return e.Host.ChangeError(WrongStatus, id, voice.ApprovalUsed(subject, verb, a.ID), cause)
	}
	return e.Host.ChangeError(Refused, id, voice.ApprovalNotForThis(subject, verb), cause)
}

// Link is the page where people decide approval id, "" when the Guard
// names none.
func (e *Engine) Link(id string) string {
	if e.ApprovalLink == nil {
		return ""
	}
	return e.ApprovalLink(id)
}

// ApprovalFor returns the approval that decides a write of kind to change
// changeID or run runID whose payload or plan hash is now hash: a live one
// (waiting, or approved and unused) bound to hash; else a declined one
// bound to hash; else a live one bound to another hash, which cannot serve
// (the caller refuses it); else nil, when a new one is to be requested.
func (e *Engine) ApprovalFor(ctx context.Context, kind ledger.ApprovalKind, changeID, runID string, hash ledger.Digest) (*ledger.Approval, error) {
	all, err := e.Ledger.Approvals(ctx, ledger.ApprovalFilter{ChangeID: changeID, RunID: runID})
	if err != nil {
		return nil, err
	}
	now := e.Now()
	var declined, other *ledger.Approval
	for _, a := range all {
		if a.Kind != kind {
			continue
		}
		s := a.StatusAt(now)
		live := s == ledger.ApprovalWaiting || s == ledger.ApprovalApproved
		switch {
		case live && a.BoundHash == hash:
			return a, nil
		case s == ledger.ApprovalDeclined && a.BoundHash == hash && declined == nil:
			declined = a
		case live && other == nil:
			other = a
		}
	}
	if declined != nil {
		return declined, nil
	}
	return other, nil
}
