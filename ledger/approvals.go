package ledger

import (
	"errors"
	"time"
)

// Person approval: a named person, not the agent, says yes to one apply,
// one undo or one run undo before it may go ahead. The request, every
// decision and the use of an approval are rows of the ledger, written in
// transactions of their own or of the transition they belong to, each with
// its history entry and, where a person should hear of it, an event in the
// outbox (see outbox.go). The rules live here, once, for every caller: the
// Guard, the dashboard, the CLI and an application's own interface.
//
// The life of an approval:
//
//	waiting ─┬─► approved ──► used
//	         ├─► declined
//	         └─► expired   (also approved ─► expired: its deadline passed unused)
//
// An approval is bound to what it approves when it is requested: the
// change's payload hash (apply, undo) or the run's plan hash (run undo).
// Using it checks the binding again, so an approval can never be moved to
// another change, run, payload or plan, and never outlives its deadline,
// which is never later than the expiry of the token it goes with.

// ApprovalKind is what an approval lets go ahead.
type ApprovalKind string

// The kinds of approval.
const (
	// ApproveApply: the apply of a pending change.
	ApproveApply ApprovalKind = "apply"
	// ApproveUndo: the undo of an applied change.
	ApproveUndo ApprovalKind = "undo"
	// ApproveRunUndo: the undo of a run, as its dry run planned it.
	ApproveRunUndo ApprovalKind = "run_undo"
)

// Valid reports whether k is one of the kinds above.
func (k ApprovalKind) Valid() bool {
	return k == ApproveApply || k == ApproveUndo || k == ApproveRunUndo
}

// ApprovalStatus is the state of an approval.
type ApprovalStatus string

// The statuses of an approval.
const (
	// ApprovalWaiting: fewer people than needed have approved, and nobody
	// declined.
	ApprovalWaiting ApprovalStatus = "waiting"
	// ApprovalApproved: as many distinct people as needed approved; the
	// apply or undo may use it once, before its deadline.
	ApprovalApproved ApprovalStatus = "approved"
	// ApprovalDeclined: a person declined. Final.
	ApprovalDeclined ApprovalStatus = "declined"
	// ApprovalExpired: the deadline passed before it was used. Final.
	ApprovalExpired ApprovalStatus = "expired"
	// ApprovalUsed: an apply or undo used it. Final.
	ApprovalUsed ApprovalStatus = "used"
)

// ApprovalStatuses lists every approval status.
var ApprovalStatuses = []ApprovalStatus{ApprovalWaiting, ApprovalApproved, ApprovalDeclined, ApprovalExpired, ApprovalUsed}

// Valid reports whether s is one of the statuses above.
func (s ApprovalStatus) Valid() bool {
	for _, v := range ApprovalStatuses {
		if s == v {
			return true
		}
	}
	return false
}

// Final reports whether nothing moves an approval on from s.
func (s ApprovalStatus) Final() bool {
	return s == ApprovalDeclined || s == ApprovalExpired || s == ApprovalUsed
}

// Approval is one request for people to approve an apply, an undo or a run
// undo, and where it stands.
type Approval struct {
	ID   string // "apr_" + 20 lowercase hex characters
	Kind ApprovalKind
	// ChangeID is the change of an apply or undo approval; empty for a run
	// undo.
	ChangeID string
	// RunID is the run of a run undo approval; empty for the others.
	RunID string
	// BoundHash is what the approval is bound to: the change's payload
	// hash (apply, undo) or the run's plan hash (run undo), when it was
	// requested. Using it requires the same hash.
	BoundHash Digest
	// Needed is how many distinct people must approve (at least 1);
	// Approvals is how many have so far.
	Needed    int
	Approvals int
	// RequestedBy names who asked, "agent:<principal>".
	RequestedBy string
	Status      ApprovalStatus
	// DecidedBy is the person whose decision settled the approval (the
	// last needed approval, or the decline), "person:<name>"; Note is that
	// decision's note. Empty while it waits.
	DecidedBy string
	Note      string
	// UsedBy names who used it ("agent:<principal>"), empty until then.
	UsedBy string

	CreatedAt time.Time
	// UpdatedAt is when the approval last moved (its status or its count).
	UpdatedAt time.Time
	// Deadline is when it stops counting: never later than the expiry of
	// the token it goes with.
	Deadline  time.Time
	DecidedAt time.Time // zero while it waits
	UsedAt    time.Time // zero until used
}

// StatusAt is the status of a at now: Expired for one still waiting or
// approved whose deadline has passed (the row says so only once
// [Ledger.ExpireApprovals], a decision or a use has moved it), else its
// Status.
func (a *Approval) StatusAt(now time.Time) ApprovalStatus {
	if (a.Status == ApprovalWaiting || a.Status == ApprovalApproved) && !now.Before(a.Deadline) {
		return ApprovalExpired
	}
	return a.Status
}

// Verdict is what a person decided.
type Verdict string

// The verdicts of a decision.
const (
	Approve Verdict = "approve"
	Decline Verdict = "decline"
)

// Decision is one person's approval or decline of an approval. A person
// decides an approval once: see [ErrDecided].
type Decision struct {
	ApprovalID string
	// Person names who decided: "person:<name>". The ledger refuses any
	// other kind of actor, so that no agent can approve.
	Person  string
	Verdict Verdict
	// Note is the person's optional note, shown to the agent when they
	// decline.
	Note string
	// At is when they decided; zero means the ledger's clock.
	At time.Time
}

// ApprovalRequest asks for an approval (see [Tx.RequestApproval]).
type ApprovalRequest struct {
	Kind ApprovalKind
	// ChangeID names the change (apply, undo); RunID the run (run undo).
	ChangeID string
	RunID    string
	// Needed is how many distinct people must approve; zero means one.
	Needed int
	// RequestedBy names who asks, "agent:<principal>".
	RequestedBy string
	// Deadline is when the approval stops counting. Zero, or a time later
	// than the token's expiry, means the token's expiry (see
	// [Tx.RequestApproval]).
	Deadline time.Time
	// At is when it was asked; zero means the ledger's clock.
	At time.Time
}

// ApprovalUse is the claim that uses an approval (see [Tx.UseApproval]):
// what it goes ahead with, by whom and when.
type ApprovalUse struct {
	Kind     ApprovalKind
	ChangeID string // the change applied or undone
	RunID    string // the run undone
	// PlanHash, when set for a run undo, is the plan about to run: it must
	// be the plan the approval is bound to.
	PlanHash Digest
	By       string    // who uses it, "agent:<principal>"
	At       time.Time // zero means the ledger's clock
}

// ApprovalFilter selects approvals for [Ledger.Approvals]. Zero fields do
// not filter.
type ApprovalFilter struct {
	Statuses []ApprovalStatus
	ChangeID string // approvals of this change
	RunID    string // run undo approvals of this run
	// DueBy selects approvals whose deadline is at or before it.
	DueBy time.Time
	// Before selects approvals that come after this key, newest first
	// (CreatedAt, then ID, descending): a page's last approval starts the
	// next page.
	Before *ChangeKey
	Limit  int // at most this many; 0 means all
}

// MaxApprovers is the most people an approval can need.
const MaxApprovers = 20

// The refusals of approvals. Each reaches the caller wrapped in an *Error
// that names the approval; errors.Is tells them apart.
var (
	// ErrDecided: this person already decided this approval; one person
	// approving twice is one approval. Nothing was written.
	ErrDecided = errors.New("this person already decided this approval")
	// ErrApprovalWaiting: the approval is still waiting for people.
	ErrApprovalWaiting = errors.New("the approval is still waiting for a person")
	// ErrApprovalDeclined: a person declined.
	ErrApprovalDeclined = errors.New("the approval was declined")
	// ErrApprovalExpired: its deadline passed.
	ErrApprovalExpired = errors.New("the approval expired")
	// ErrApprovalUsed: it was used already.
	ErrApprovalUsed = errors.New("the approval was used already")
	// ErrApprovalApproved: a decision came after enough people approved.
	ErrApprovalApproved = errors.New("the approval is already approved")
	// ErrApprovalMismatch: the approval is for another kind of action,
	// another change or run, or another payload or plan.
	ErrApprovalMismatch = errors.New("the approval is not for this")
)

// statusError is the error of an approval found in status s, when it had
// to be waiting (decide) or approved (use).
func statusError(op string, a *Approval, s ApprovalStatus) error {
	var cause error
	switch s {
	case ApprovalWaiting:
		cause = ErrApprovalWaiting
	case ApprovalApproved:
		cause = ErrApprovalApproved
	case ApprovalDeclined:
		cause = ErrApprovalDeclined
	case ApprovalExpired:
		cause = ErrApprovalExpired
	default:
		cause = ErrApprovalUsed
	}
	return &Error{Op: op + " approval " + a.ID, Err: cause}
}
