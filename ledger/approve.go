package ledger

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"errors"
	"fmt"
	"slices"
	"strings"
	"time"
	"unicode"
	"unicode/utf8"
)

// MaxApprovalNote is the longest note, in bytes, a decision may carry.
const MaxApprovalNote = 2000

// RequestApproval asks people to approve req's apply, undo or run undo, in
// the transaction (a preview's, so that people can decide before the
// agent asks to apply), and returns the approval. The ledger binds it to
// what the change or run holds now: the change's payload hash, or the
// run's plan hash. It appends the approval's first history entry and an
// approval.requested event.
//
// What it approves must be possible now: the apply of a pending change,
// the undo of an applied, undoable change whose undo token is live, the
// undo of an open run whose dry run stored a token. Otherwise it fails
// with an error wrapping ErrConflict. The deadline is never later than the
// expiry of that token (the change's ExpiresAt, its UndoExpiresAt, the
// run's ConfirmExpiresAt): a later or zero req.Deadline is cut to it; an
// undo that never expires needs a deadline of the caller's.
//
// An approval already waiting, or approved and unused, for the same kind,
// target and hash, whose deadline has not passed, is returned instead of
// a new one, so that a second preview, dry run or undo call names the same
// approval.
func (tx *Tx) RequestApproval(req ApprovalRequest) (*Approval, error) {
	op := "request approval for " + req.target()
	if !req.Kind.Valid() {
		return nil, fmt.Errorf("%s: unknown kind %q (apply, undo or run_undo)", op, req.Kind)
	}
	if req.Needed == 0 {
		req.Needed = 1
	}
	if req.Needed < 1 || req.Needed > MaxApprovers {
		return nil, fmt.Errorf("%s: %d people needed; it must be 1 to %d", op, req.Needed, MaxApprovers)
	}
	if err := checkText(req.RequestedBy, 200); err != nil || req.RequestedBy == "" {
		return nil, fmt.Errorf("%s: requested by %q: say who asks, as agent:<principal>, in valid UTF-8 without control characters", op, req.RequestedBy)
	}
	at := req.At
	if at.IsZero() {
		at = tx.l.now()
	}
	a := &Approval{Kind: req.Kind, Needed: req.Needed, RequestedBy: req.RequestedBy, Status: ApprovalWaiting, CreatedAt: at, UpdatedAt: at}
	var (
		expiry time.Time
		runID  string // the run of a change, for the history
		why    string // what is not possible, if anything
	)
	switch req.Kind {
	case ApproveApply, ApproveUndo:
		if req.ChangeID == "" || req.RunID != "" {
			return nil, fmt.Errorf("%s: an %s approval names a change and no run", op, req.Kind)
		}
		c, err := tx.Change(req.ChangeID)
		if err != nil {
			return nil, err
		}
		a.ChangeID, a.BoundHash, runID = c.ID, c.PayloadHash, c.RunID
		if req.Kind == ApproveApply {
			expiry = c.ExpiresAt
			if c.Status != Pending || c.ConfirmHash == "" {
				why = "the change is " + string(c.Status) + ", not pending"
			}
		} else {
			expiry = c.UndoExpiresAt
			if c.Status != Applied || !c.Undoable || c.UndoHash == "" {
				why = fmt.Sprintf("the change is %s (undoable: %t) and holds no live undo token", c.Status, c.Undoable)
			}
		}
	case ApproveRunUndo:
		if req.RunID == "" || req.ChangeID != "" {
			return nil, fmt.Errorf("%s: a run_undo approval names a run and no change", op)
		}
		r, err := tx.Run(req.RunID)
		if err != nil {
			return nil, err
		}
		a.RunID, a.BoundHash, runID = r.ID, r.PlanHash, r.ID
		expiry = r.ConfirmExpiresAt
		if r.Status != RunOpen || r.ConfirmHash == "" || r.PlanHash == "" || expiry.IsZero() {
			why = "the run is " + string(r.Status) + " and holds no undo token from a dry run"
		}
	}
	if why != "" {
		return nil, &Error{Op: op, Err: fmt.Errorf("%w: %s", ErrConflict, why)}
	}
	a.Deadline = req.Deadline
	if !expiry.IsZero() && (a.Deadline.IsZero() || a.Deadline.After(expiry)) {
		a.Deadline = expiry
	}
	switch {
	case a.Deadline.IsZero():
		return nil, fmt.Errorf("%s: the undo never expires, so the request needs a deadline", op)
	case !at.Before(a.Deadline):
		return nil, &Error{Op: op, Err: fmt.Errorf("%w: the deadline (the token's expiry at the latest) has passed", ErrApprovalExpired)}
	}
	live, err := tx.b.ListApprovals(tx.ctx, tx.tx, ApprovalFilter{ChangeID: a.ChangeID, RunID: a.RunID, Statuses: []ApprovalStatus{ApprovalWaiting, ApprovalApproved}})
	if err != nil {
		return nil, err
	}
	for _, o := range live {
		if o.Kind == a.Kind && o.BoundHash == a.BoundHash && at.Before(o.Deadline) {
			return o, nil
		}
	}
	if a.ID, err = newID("apr_"); err != nil {
		return nil, err
	}
	if err := tx.b.InsertApproval(tx.ctx, tx.tx, a); err != nil {
		return nil, err
	}
	if err := tx.appendHistory(approvalEntry(a, "", runID, a.RequestedBy, string(a.Kind))); err != nil {
		return nil, err
	}
	return a, tx.approvalEvent(EventApprovalRequested, a, runID)
}

// target names what a request is for, for messages.
func (req ApprovalRequest) target() string {
	if req.RunID != "" {
		return "run " + req.RunID
	}
	return "change " + req.ChangeID
}

// Decide records d, one person's approval or decline, in the transaction,
// and returns the approval as it stands after it. The approval must be
// waiting (else an error wrapping ErrApprovalApproved, ErrApprovalDeclined,
// ErrApprovalUsed or ErrApprovalExpired, the last also for one whose
// deadline has passed), and the person must not have decided it before
// (else ErrDecided: one person approving twice is one approval). Nothing
// is written on a refusal.
//
// The approval is approved once Needed distinct people have approved, and
// declined at the first decline. Each decision appends a history entry
// made by d.Person; the decisive one appends an approval.approved or
// approval.declined event. A declined apply also ends its change, if it
// is still pending, in the terminal status Declined; a declined undo or
// run undo leaves the change or run as it is.
func (tx *Tx) Decide(d Decision) (*Approval, error) {
	op := "decide approval " + d.ApprovalID
	if !strings.HasPrefix(d.Person, "person:") || len(d.Person) == len("person:") || checkText(d.Person, 200) != nil {
		return nil, fmt.Errorf("%s: %q is not a person: decisions are made by person:<name>, a name in valid UTF-8 without control characters", op, d.Person)
	}
	if d.Verdict != Approve && d.Verdict != Decline {
		return nil, fmt.Errorf("%s: unknown verdict %q (approve or decline)", op, d.Verdict)
	}
	if err := checkText(d.Note, MaxApprovalNote); err != nil {
		return nil, fmt.Errorf("%s: the note %v", op, err)
	}
	if d.At.IsZero() {
		d.At = tx.l.now()
	}
	// Lock what the approval is for before the approval, in the order a
	// claim takes them (the change, then its approval), so that a decline
	// and a claim on PostgreSQL wait for each other instead of
	// deadlocking. What it is for never changes: an unlocked read tells.
	target, err := tx.b.GetApproval(tx.ctx, tx.l.b.DB(), d.ApprovalID)
	if err != nil {
		return nil, err
	}
	var change *Change
	runID := target.RunID
	if target.ChangeID != "" {
		if change, err = tx.Change(target.ChangeID); err != nil {
			return nil, err
		}
		runID = change.RunID
	} else if _, err := tx.Run(target.RunID); err != nil {
		return nil, err
	}
	a, err := tx.Approval(d.ApprovalID)
	if err != nil {
		return nil, err
	}
	if s := a.StatusAt(d.At); s != ApprovalWaiting {
		return a, statusError("decide", a, s)
	}
	decided, err := tx.b.ListDecisions(tx.ctx, tx.tx, a.ID)
	if err != nil {
		return nil, err
	}
	if slices.ContainsFunc(decided, func(o Decision) bool { return o.Person == d.Person }) {
		return a, &Error{Op: op, Err: fmt.Errorf("%w (%s)", ErrDecided, d.Person)}
	}
	if err := tx.b.InsertDecision(tx.ctx, tx.tx, d); err != nil {
		return nil, err
	}
	next := *a
	next.UpdatedAt = d.At
	if d.Verdict == Approve {
		next.Approvals++
		if next.Approvals >= next.Needed {
			next.Status = ApprovalApproved
		}
	} else {
		next.Status = ApprovalDeclined
	}
	if next.Status != ApprovalWaiting {
		next.DecidedBy, next.Note, next.DecidedAt = d.Person, d.Note, d.At
	}
	if err := tx.b.UpdateApproval(tx.ctx, tx.tx, &next, ApprovalWaiting); err != nil {
		return nil, err
	}
	note := string(d.Verdict)
	if d.Note != "" {
		note += ": " + d.Note
	}
	if err := tx.appendHistory(approvalEntry(&next, ApprovalWaiting, runID, d.Person, note)); err != nil {
		return nil, err
	}
	switch {
	case next.Status == ApprovalApproved:
		err = tx.approvalEvent(EventApprovalApproved, &next, runID)
	case next.Status == ApprovalDeclined:
		err = tx.approvalEvent(EventApprovalDeclined, &next, runID)
		if err == nil && next.Kind == ApproveApply && change.Status == Pending {
			err = tx.declineChange(change, d, note)
		}
	}
	if err != nil {
		return nil, err
	}
	return &next, nil
}

// declineChange ends the pending change c in Declined, by d's person.
func (tx *Tx) declineChange(c *Change, d Decision, note string) error {
	c.Status, c.ConfirmHash, c.UpdatedAt = Declined, "", d.At
	c.Failure, c.NothingWritten = "", false // a decline is not a failure
	tx.override = &actor{by: d.Person, note: note}
	return tx.UpdateChange(c, Pending)
}

// UseApproval checks that the approval id lets u go ahead and marks it
// used, in the transaction of u's claim, so that the approval is spent
// exactly when the claim commits. It must be approved, its deadline not
// passed at u.At, and for u's kind and change or run; and that change's
// payload hash, or that run's plan hash (and u.PlanHash when set), must
// still be the one it is bound to. Otherwise it writes nothing and fails
// with an error wrapping ErrApprovalWaiting, ErrApprovalDeclined,
// ErrApprovalExpired, ErrApprovalUsed or ErrApprovalMismatch, and returns
// the approval as it is (who declined it and their note are in it).
func (tx *Tx) UseApproval(id string, u ApprovalUse) (*Approval, error) {
	if u.At.IsZero() {
		u.At = tx.l.now()
	}
	a, err := tx.Approval(id)
	if err != nil {
		return nil, err
	}
	mismatch := func(format string, args ...any) (*Approval, error) {
		return a, &Error{Op: "use approval " + id, Err: fmt.Errorf("%w: "+format, append([]any{ErrApprovalMismatch}, args...)...)}
	}
	if a.Kind != u.Kind || a.ChangeID != u.ChangeID || a.RunID != u.RunID {
		return mismatch("it approves the %s of %s", a.Kind, a.subject())
	}
	if s := a.StatusAt(u.At); s != ApprovalApproved {
		return a, statusError("use", a, s)
	}
	var current Digest
	runID := a.RunID
	if a.ChangeID != "" {
		c, err := tx.Change(a.ChangeID)
		if err != nil {
			return nil, err
		}
		current, runID = c.PayloadHash, c.RunID
	} else {
		r, err := tx.Run(a.RunID)
		if err != nil {
			return nil, err
		}
		current = r.PlanHash
		if u.PlanHash != "" && u.PlanHash != a.BoundHash {
			return mismatch("the plan about to run is not the plan it approves")
		}
	}
	if current != a.BoundHash {
		what := "plan"
		if a.ChangeID != "" {
			what = "payload"
		}
		return mismatch("the %s of %s changed since it was approved", what, a.subject())
	}
	next := *a
	next.Status, next.UsedBy, next.UsedAt, next.UpdatedAt = ApprovalUsed, u.By, u.At, u.At
	if err := tx.b.UpdateApproval(tx.ctx, tx.tx, &next, ApprovalApproved); err != nil {
		return nil, err
	}
	if err := tx.appendHistory(approvalEntry(&next, ApprovalApproved, runID, u.By, "")); err != nil {
		return nil, err
	}
	return &next, nil
}

// subject names what an approval is for, for messages.
func (a *Approval) subject() string {
	if a.RunID != "" {
		return "run " + a.RunID
	}
	return "change " + a.ChangeID
}

// Approval reads an approval inside the transaction, locking its row where
// the database has row locks. It returns an error wrapping ErrNotFound
// when there is none.
func (tx *Tx) Approval(id string) (*Approval, error) { return tx.b.GetApproval(tx.ctx, tx.tx, id) }

// Approvals returns the approvals that match f inside the transaction,
// newest first.
func (tx *Tx) Approvals(f ApprovalFilter) ([]*Approval, error) {
	return tx.b.ListApprovals(tx.ctx, tx.tx, f)
}

// RequestApproval is [Tx.RequestApproval] in a transaction of its own.
func (l *Ledger) RequestApproval(ctx context.Context, req ApprovalRequest) (*Approval, error) {
	var out *Approval
	err := l.WithTx(ctx, func(tx *Tx) error {
		var err error
		out, err = tx.RequestApproval(req)
		return err
	})
	return out, err
}

// Decide is [Tx.Decide] in a transaction of its own: what the dashboard,
// the CLI and an application's own interface call when a person approves
// or declines. On a refusal it returns the approval as it is, with the
// error.
func (l *Ledger) Decide(ctx context.Context, d Decision) (*Approval, error) {
	var out *Approval
	err := l.WithTx(ctx, func(tx *Tx) error {
		var err error
		out, err = tx.Decide(d)
		return err
	})
	return out, err
}

// Approval reads one approval. It returns an error wrapping ErrNotFound
// when there is none.
func (l *Ledger) Approval(ctx context.Context, id string) (*Approval, error) {
	return l.b.GetApproval(ctx, l.b.DB(), id)
}

// Approvals returns the approvals that match f, newest first: the waiting
// ones a page at a time (Statuses: waiting, Limit and Before), or those of
// one change or run.
func (l *Ledger) Approvals(ctx context.Context, f ApprovalFilter) ([]*Approval, error) {
	return l.b.ListApprovals(ctx, l.b.DB(), f)
}

// Decisions returns the decisions made on an approval, oldest first.
func (l *Ledger) Decisions(ctx context.Context, approvalID string) ([]Decision, error) {
	return l.b.ListDecisions(ctx, l.b.DB(), approvalID)
}

// ExpireApprovals moves every approval still waiting, or approved and
// unused, whose deadline has passed by the ledger's clock to Expired, and
// returns their IDs. Nothing needs it for safety (an approval past its
// deadline is refused whatever its row says, see [Approval.StatusAt]); it
// keeps lists of waiting approvals short.
func (l *Ledger) ExpireApprovals(ctx context.Context) ([]string, error) {
	now := l.now()
	var ids []string
	for {
		var moved []string
		err := l.WithTx(ctx, func(tx *Tx) error {
			moved = moved[:0]
			due, err := tx.b.ListApprovals(tx.ctx, tx.tx, ApprovalFilter{Statuses: []ApprovalStatus{ApprovalWaiting, ApprovalApproved}, DueBy: now, Limit: expireBatch})
			if err != nil {
				return err
			}
			for _, a := range due {
				if now.Before(a.Deadline) {
					continue
				}
				// The run of a change, read without a lock (it never
				// changes), so that no change is locked after an
				// approval, against the order of a claim.
				runID := a.RunID
				if a.ChangeID != "" {
					c, err := tx.b.GetChange(tx.ctx, tx.l.b.DB(), a.ChangeID)
					if err != nil {
						return err
					}
					runID = c.RunID
				}
				if a, err = tx.Approval(a.ID); err != nil {
					return err
				}
				from := a.Status
				if from != ApprovalWaiting && from != ApprovalApproved {
					continue
				}
				a.Status, a.UpdatedAt = ApprovalExpired, now
				if err := tx.b.UpdateApproval(tx.ctx, tx.tx, a, from); err != nil {
					return err
				}
				if err := tx.appendHistory(approvalEntry(a, from, runID, "", "")); err != nil {
					return err
				}
				moved = append(moved, a.ID)
			}
			return nil
		})
		ids = append(ids, moved...)
		if err != nil || len(moved) < expireBatch {
			return ids, err
		}
	}
}

// approvalEntry is the history entry of an approval's move from from
// (empty when it was requested) to a.Status, made by by, with note. It
// names the approval's change or run, and runID, the run of its change,
// so that a change's or run's history lists its approvals.
func approvalEntry(a *Approval, from ApprovalStatus, runID, by, note string) HistoryEntry {
	return HistoryEntry{At: a.UpdatedAt, ChangeID: a.ChangeID, RunID: runID, ApprovalID: a.ID,
		From: string(from), To: string(a.Status), By: by, Note: note}
}

// approvalEvent adds the event name about a to the outbox.
func (tx *Tx) approvalEvent(name string, a *Approval, runID string) error {
	b := EventBody{Event: name, At: a.UpdatedAt, ApprovalID: a.ID, ChangeID: a.ChangeID, RunID: runID,
		Action: string(a.Kind), RequestedBy: a.RequestedBy, DecidedBy: a.DecidedBy}
	if a.ChangeID != "" {
		c, err := tx.Change(a.ChangeID)
		if err != nil {
			return err
		}
		b.Action, b.Summary = actionOf(a.Kind, c.Action), c.Summary
	} else {
		r, err := tx.Run(a.RunID)
		if err != nil {
			return err
		}
		b.Action, b.Summary = "undo_run", r.Label
	}
	_, err := tx.AddEvent(b)
	return err
}

// actionOf is the action an approval of kind k of a change of action
// lets go ahead: the operation's name, or "undo <name>".
func actionOf(k ApprovalKind, action string) string {
	if k == ApproveUndo {
		return "undo " + action
	}
	return action
}

// newID returns prefix followed by 20 random lowercase hex characters.
func newID(prefix string) (string, error) {
	var b [10]byte
	if _, err := rand.Read(b[:]); err != nil {
		return "", fmt.Errorf("make an ID: %w", err)
	}
	return prefix + hex.EncodeToString(b[:]), nil
}

// checkText refuses text that is too long, not valid UTF-8, or holds
// control characters other than newlines and tabs.
func checkText(s string, max int) error {
	switch {
	case len(s) > max:
		return fmt.Errorf("is %d bytes, over the limit of %d", len(s), max)
	case !utf8.ValidString(s):
		return errors.New("is not valid UTF-8")
	case strings.ContainsFunc(s, func(r rune) bool { return unicode.IsControl(r) && r != '\n' && r != '\t' }):
		return errors.New("holds control characters")
	}
	return nil
}
