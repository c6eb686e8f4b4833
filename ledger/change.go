// Package ledger stores guarded changes and runs and moves them through their
// states: it is what operators and trusted code call.
//
// A ledger is a database of rows, one per previewed change and one per run.
// Every state transition is a compare-and-set: a row is written back only if
// its status is still the one that was read, inside a write transaction that
// the backend makes exclusive (BEGIN IMMEDIATE on SQLite, a row lock on
// PostgreSQL). Nothing ever moves a change back to [Pending].
//
// Trusted code normally reaches the ledger through changeset.Guard. Operators
// open an existing ledger with [Open] to read it ([Ledger.Change],
// [Ledger.Changes], [Ledger.Run], [Ledger.Runs], [Ledger.History]) and to
// expire, reconcile, check and prune its rows; the mcp-changeset command is a
// thin shell around those methods. Reads are named for what they return: a
// noun for one row by ID, its plural for the rows a filter selects, the
// same on [Ledger] and, inside a write transaction, on [Tx].
//
// Person approval keeps its state here too: an [Approval] is requested in
// a preview's transaction ([Tx.RequestApproval]), decided by people
// ([Ledger.Decide]) and spent in the claim's transaction
// ([Tx.UseApproval]), each step with its history entry. Events that
// people should hear of go to an outbox in the transaction of the
// transition that causes them, for a sender to lease and deliver
// ([Ledger.LeaseEvents]).
//
// The storage itself is a backend, one per database. What a backend
// implements, and how it registers, is in package ledger/driver; the
// SQLite backend (package ledger/sqlite) is the default and registers
// itself for plain file paths when imported, the PostgreSQL backend
// (package ledger/postgres) for postgres:// URLs.
package ledger

import (
	"encoding/json"
	"time"
)

// Status is the state of a change. The states and the transitions between
// them are drawn in docs/design.md.
type Status string

// The statuses of a change.
const (
	// Pending: previewed, waiting for a confirmation token.
	Pending Status = "pending"
	// Expired: the preview's time to live passed before it was applied.
	Expired Status = "expired"
	// Applying: claimed by a confirmation token; the apply is running, or
	// the process died while it ran (an operator must reconcile it).
	Applying Status = "applying"
	// Applied: the apply returned and its result is stored.
	Applied Status = "applied"
	// ApplyFailed: the state had changed, the apply returned an error, its
	// result was too large, or an operator reconciled an Applying row.
	ApplyFailed Status = "apply_failed"
	// Undoing: claimed by an undo token; the inverse is running.
	Undoing Status = "undoing"
	// Undone: the inverse returned.
	Undone Status = "undone"
	// UndoFailed: the state had changed since the apply, the inverse returned
	// an error, or an operator reconciled an Undoing row.
	UndoFailed Status = "undo_failed"
	// Declined: a person declined the apply (see [Tx.Decide]); nothing
	// was written and no token can apply it.
	Declined Status = "declined"
)

// Statuses lists every status in the order a change passes through them.
var Statuses = []Status{Pending, Expired, Applying, Applied, ApplyFailed, Undoing, Undone, UndoFailed, Declined}

// Valid reports whether s is one of the statuses above.
func (s Status) Valid() bool {
	for _, v := range Statuses {
		if s == v {
			return true
		}
	}
	return false
}

// Terminal reports whether no transition leaves s except deletion by
// pruning. Applied is not terminal: it may still be undone.
func (s Status) Terminal() bool {
	switch s {
	case Expired, ApplyFailed, Undone, UndoFailed, Declined:
		return true
	}
	return false
}

// InFlight reports whether a process claimed the change and has not yet
// recorded the outcome: Applying or Undoing.
func (s Status) InFlight() bool { return s == Applying || s == Undoing }

// Failure is the kind of failure of an ApplyFailed or UndoFailed change.
type Failure string

// The kinds of failure.
const (
	// FailureStateChanged: the state check refused the change because its
	// resource no longer looked as the preview (or the apply) left it.
	// Nothing was written.
	FailureStateChanged Failure = "state_changed"
	// FailureError: the operation returned an error or panicked.
	FailureError Failure = "error"
	// FailureResultTooLarge: the apply wrote, but its result was over
	// the limit, so the change has no undo.
	FailureResultTooLarge Failure = "result_too_large"
	// FailureInterrupted: the process stopped while the change was in
	// flight and an operator reconciled it.
	FailureInterrupted Failure = "interrupted"
)

// Failures lists every kind of failure.
var Failures = []Failure{FailureStateChanged, FailureError, FailureResultTooLarge, FailureInterrupted}

// Valid reports whether f is one of the kinds above.
func (f Failure) Valid() bool {
	for _, v := range Failures {
		if f == v {
			return true
		}
	}
	return false
}

// Change is one row of the ledger: a previewed change and everything that
// happened to it since. JSON values (Payload, Diff, Result, Before, After)
// are stored in canonical form so that equal values have equal bytes.
//
// A Change read from the ledger never carries a token: only digests of
// tokens are stored, and those are not exported to callers outside the
// changeset package's claim code.
type Change struct {
	ID     string // "chg_" + 20 lowercase hex characters
	Action string // the operation's name, e.g. "set_setting"
	Status Status

	// ScopeHash is the SHA-256 of the scope the change was previewed under.
	// Claims under any other scope are refused.
	ScopeHash Digest
	// RunID names the run the change belongs to, or is empty.
	RunID string
	// Resource names what the change touches (e.g. "note:todo.txt"), so that
	// changes to the same thing within a run can be related. Empty means the
	// change is its own resource.
	Resource string
	// Resources names every resource of a change that touches several (a
	// bulk update of rows); Before and After are then JSON objects holding
	// the state of each, keyed by these names, and Resource is empty. Nil
	// for a change that names one resource or none. Fixed at preview.
	Resources []string
	// DependsOn names resources the change relies on without changing them
	// (a funnel that uses "rule:42"): a run undo does not remove a resource
	// that a change it keeps depends on. Fixed at preview; nil when none.
	DependsOn []string

	Payload     json.RawMessage // canonical JSON: exactly what apply will receive
	PayloadHash Digest          // SHA-256 of Payload, hex
	Diff        json.RawMessage // canonical JSON array of {field, before, after}
	Summary     string
	Warnings    []string // what cannot be undone exactly, from the proposal

	// StateHash is the SHA-256 of the canonical observed state at preview
	// time, or empty when the operation has no Observe.
	StateHash Digest
	// Before and After are the observed states just before and just after
	// the apply, canonical JSON, or nil without Observe. A refused apply
	// keeps in Before the state its check found.
	Before json.RawMessage
	After  json.RawMessage
	// UndoFound is the state a refused undo's check found (the resource
	// no longer as the apply left it, which After holds), canonical JSON,
	// or nil.
	UndoFound json.RawMessage

	// ConfirmHash and UndoHash are digests of the live tokens, cleared when
	// a token is spent or can no longer be used.
	ConfirmHash Digest
	UndoHash    Digest
	// Undoable is true when the operation has an inverse.
	Undoable bool
	// Transactional is true when apply and undo run inside the ledger's
	// own transaction (an operation with ApplyTx).
	Transactional bool

	Result json.RawMessage // what apply returned, canonical JSON
	// ErrorType is the Go type name of the error that failed the change;
	// Error is its full text, for operators only.
	ErrorType string
	Error     string
	// Failure says why an ApplyFailed or UndoFailed change failed: one of
	// the Failure kinds (FailureStateChanged, …); empty for every other
	// status.
	Failure Failure
	// NothingWritten is true when the library knows that a failed change
	// wrote nothing: its state check refused it, or its transaction rolled
	// back. False means a write may have happened, not that one did.
	NothingWritten bool
	// Note is free text from an operator who reconciled the change.
	Note string
	// PreviewedBy, AppliedBy and UndoneBy name who previewed the change,
	// who claimed its apply and who claimed its undo, readably:
	// "agent:<principal>" for an agent acting for a principal (a user, a
	// bearer identity, a client's name), "person:<name>" for someone who
	// approved or undid it in the dashboard, "operator:<name>" for the
	// CLI. Empty when unknown (rows written before the columns existed).
	// PreviewedBy is fixed at preview.
	PreviewedBy string
	AppliedBy   string
	UndoneBy    string

	// RedactFields names payload fields (and diff entries of the same
	// field) that the ledger replaces by keyed hashes once the change is
	// terminal; RedactedAt is when it did, zero until then. See Redact.
	RedactFields []string
	RedactedAt   time.Time

	CreatedAt     time.Time
	UpdatedAt     time.Time
	ExpiresAt     time.Time // the confirmation token's expiry
	AppliedAt     time.Time // zero until applied
	UndoExpiresAt time.Time // zero when the undo never expires or there is none
	UndoneAt      time.Time // zero until undone
}

// Clone returns a copy of c that shares no mutable memory with it.
func (c *Change) Clone() *Change {
	d := *c
	d.Payload = cloneBytes(c.Payload)
	d.Diff = cloneBytes(c.Diff)
	d.Before = cloneBytes(c.Before)
	d.After = cloneBytes(c.After)
	d.UndoFound = cloneBytes(c.UndoFound)
	d.Result = cloneBytes(c.Result)
	if c.Warnings != nil {
		d.Warnings = append([]string(nil), c.Warnings...)
	}
	if c.RedactFields != nil {
		d.RedactFields = append([]string(nil), c.RedactFields...)
	}
	if c.Resources != nil {
		d.Resources = append([]string(nil), c.Resources...)
	}
	if c.DependsOn != nil {
		d.DependsOn = append([]string(nil), c.DependsOn...)
	}
	return &d
}

func cloneBytes(b json.RawMessage) json.RawMessage {
	if b == nil {
		return nil
	}
	return append(json.RawMessage{}, b...)
}
