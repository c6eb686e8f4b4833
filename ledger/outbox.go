package ledger

import (
	"context"
	"encoding/json"
	"fmt"
	"strings"
	"time"
)

// The outbox: events that people should hear of (an approval requested or
// decided, a change that failed, a run undone), written in the same
// transaction as the transition that causes them, so that an event exists
// exactly when its transition does: a rollback leaves neither, and a
// crash after the commit loses neither. A sender (the webhook sender of
// package changeset) leases due events, delivers them, and marks each
// delivered or failed; an event not marked is leased again once its lease
// runs out, so delivery is at least once, with the same ID every time.
//
// The ledger writes the events of its own transitions itself:
// approval.requested, approval.approved and approval.declined with the
// approvals' transitions, change.failed when a change moves to
// apply_failed or undo_failed, run.undone when a run's undo ends. Callers
// add others with [Tx.AddEvent].

// The names of the events the ledger writes.
const (
	EventApprovalRequested = "approval.requested"
	EventApprovalApproved  = "approval.approved"
	EventApprovalDeclined  = "approval.declined"
	EventChangeFailed      = "change.failed"
	EventRunUndone         = "run.undone"
)

// Event is one row of the outbox.
type Event struct {
	// ID is "evt_" + 20 lowercase hex characters: the delivery ID, the
	// same on every attempt.
	ID string
	// Name is the event's name, e.g. EventApprovalRequested.
	Name string
	// Body is the event as JSON (an EventBody). It never holds a token or
	// a payload.
	Body      json.RawMessage
	CreatedAt time.Time
	// Attempts counts the leases taken on it: attempts started.
	Attempts int
	// NextAttemptAt is when it is due: its creation, then what the sender
	// chose after a failed attempt.
	NextAttemptAt time.Time
	// LeaseOwner and LeaseUntil name the sender holding it and until
	// when; empty and zero when nobody does.
	LeaseOwner string
	LeaseUntil time.Time
	// DeliveredAt is when a sender marked it delivered; zero until then.
	DeliveredAt time.Time
	// LastError says why the last attempt failed (a status code, a
	// timeout), for operators; empty when none failed.
	LastError string
}

// EventBody is the JSON body of an event, with the fields of the
// notification contract. The ledger stores it without URL: the sender
// knows the dashboard's address and sets it before it sends the body.
type EventBody struct {
	ID          string    `json:"id"`
	Event       string    `json:"event"`
	At          time.Time `json:"at"`
	ApprovalID  string    `json:"approval_id"`
	ChangeID    string    `json:"change_id"`
	RunID       string    `json:"run_id"`
	Action      string    `json:"action"`
	Summary     string    `json:"summary"`
	RequestedBy string    `json:"requested_by"`
	DecidedBy   string    `json:"decided_by"`
	URL         string    `json:"url"`
}

// LeaseFilter is what [Ledger.LeaseEvents] hands the backend.
type LeaseFilter struct {
	Owner string    // who leases
	Now   time.Time // due and lease-free at this time
	Until time.Time // the lease's end
	Limit int       // at most this many
}

// EventFilter selects events for [Ledger.Events]. Zero fields do not
// filter.
type EventFilter struct {
	Name string
	// Undelivered selects the events not yet delivered.
	Undelivered bool
	// After selects events that come after this one, oldest first
	// (CreatedAt, then ID): a page's last event starts the next page.
	After *ChangeKey
	Limit int // at most this many; 0 means all
}

// MaxEventError is how many bytes of LastError the outbox keeps.
const MaxEventError = 1000

// AddEvent writes an event to the outbox in the transaction, from b: its
// ID is made here (b.ID is set to it), and b.At, when zero, is the ledger's
// clock. The body must hold no token or payload.
func (tx *Tx) AddEvent(b EventBody) (*Event, error) {
	if b.Event == "" {
		return nil, fmt.Errorf("add event: the event needs a name")
	}
	if b.At.IsZero() {
		b.At = tx.l.now()
	}
	b.At = b.At.UTC()
	id, err := newID("evt_")
	if err != nil {
		return nil, err
	}
	b.ID = id
	body, err := json.Marshal(b)
	if err != nil {
		return nil, fmt.Errorf("add event %s: %w", b.Event, err)
	}
	e := &Event{ID: id, Name: b.Event, Body: body, CreatedAt: b.At, NextAttemptAt: b.At}
	if err := tx.b.InsertEvent(tx.ctx, tx.tx, e); err != nil {
		return nil, err
	}
	return e, nil
}

// LeaseEvents leases to owner (a name of the sender's replica, unique
// among the replicas) up to limit events that are due at the ledger's
// clock and not leased, for d, and returns them, the soonest due first;
// none when nothing is due. While the lease runs, no other call of
// LeaseEvents returns them, in this process or another: the sender must
// deliver each and call [Ledger.EventDelivered] or [Ledger.EventFailed]
// before the lease ends, or another replica may lease and deliver it
// again. Each lease counts an attempt.
func (l *Ledger) LeaseEvents(ctx context.Context, owner string, limit int, d time.Duration) ([]*Event, error) {
	if owner == "" || limit <= 0 || d <= 0 {
		return nil, fmt.Errorf("lease events: owner, a positive limit and a positive duration are required")
	}
	now := l.now()
	var out []*Event
	err := l.WithLazyTx(ctx, func(tx *Tx) error {
		var err error
		out, err = tx.b.LeaseEvents(tx.ctx, tx.tx, LeaseFilter{Owner: owner, Now: now, Until: now.Add(d), Limit: limit})
		return err
	})
	return out, err
}

// EventDelivered records that the event id, leased to owner, was
// delivered, at the ledger's clock. It fails with an error wrapping
// ErrConflict when the event is no longer leased to owner (its lease ran
// out and another replica took it) or was delivered already.
func (l *Ledger) EventDelivered(ctx context.Context, id, owner string) error {
	return l.finishEvent(ctx, &Event{ID: id, LeaseOwner: owner, DeliveredAt: l.now()})
}

// EventFailed records that an attempt at the event id, leased to owner,
// failed with reason (a status code, a timeout; never a secret), and
// makes it due again at next, which the sender chooses (its backoff). It
// fails as EventDelivered does.
func (l *Ledger) EventFailed(ctx context.Context, id, owner string, next time.Time, reason string) error {
	if len(reason) > MaxEventError {
		reason = reason[:MaxEventError]
	}
	// A cut through a rune, or bytes that are not text, become "?".
	reason = strings.ToValidUTF8(strings.ReplaceAll(reason, "\x00", ""), "?")
	if next.IsZero() {
		next = l.now()
	}
	return l.finishEvent(ctx, &Event{ID: id, LeaseOwner: owner, NextAttemptAt: next, LastError: reason})
}

// finishEvent writes the outcome of an attempt.
func (l *Ledger) finishEvent(ctx context.Context, e *Event) error {
	return l.WithLazyTx(ctx, func(tx *Tx) error { return tx.b.FinishEvent(tx.ctx, tx.tx, e) })
}

// Events returns the events f selects, oldest first.
func (l *Ledger) Events(ctx context.Context, f EventFilter) ([]*Event, error) {
	return l.b.ListEvents(ctx, l.b.DB(), f)
}

// PruneEvents deletes the events delivered before the ledger's clock
// minus olderThan, in batches of DefaultPruneBatch, and reports how many
// it deleted: what a sender calls to keep the outbox small. Undelivered
// events wait for a sender; [Ledger.Prune] deletes them once they are
// older than its cut-off, with the changes of that age, so that a ledger
// without a sender does not keep every event forever.
func (l *Ledger) PruneEvents(ctx context.Context, olderThan time.Duration) (int, error) {
	return l.deleteEvents(ctx, l.now().Add(-olderThan), time.Time{})
}

// deleteEvents deletes the events delivered before deliveredBefore and
// those created before createdBefore, in batches.
func (l *Ledger) deleteEvents(ctx context.Context, deliveredBefore, createdBefore time.Time) (int, error) {
	total := 0
	for {
		var n int
		err := l.WithLazyTx(ctx, func(tx *Tx) error {
			var err error
			n, err = tx.b.DeleteEvents(tx.ctx, tx.tx, deliveredBefore, createdBefore, DefaultPruneBatch)
			return err
		})
		total += n
		if err != nil || n < DefaultPruneBatch {
			return total, err
		}
	}
}
