package sqlval

import (
	"encoding/json"
	"fmt"
	"slices"
	"strings"
	"time"

	"github.com/mcp-changeset/changeset-go/ledger"
)

// Approvals is the one mapping between rows of ledger_approvals and
// ledger.Approval, for every backend. Fixed columns are set when the
// approval is requested.
var Approvals = NewTable(
	fixed(Text("id", func(a *ledger.Approval) *string { return &a.ID })),
	fixed(Text("kind", func(a *ledger.Approval) *ledger.ApprovalKind { return &a.Kind })),
	fixed(OptText("change_id", func(a *ledger.Approval) *string { return &a.ChangeID })),
	fixed(OptText("run_id", func(a *ledger.Approval) *string { return &a.RunID })),
	fixed(Text("bound_hash", func(a *ledger.Approval) *ledger.Digest { return &a.BoundHash })),
	fixed(Int("needed", func(a *ledger.Approval) *int { return &a.Needed })),
	Int("approvals", func(a *ledger.Approval) *int { return &a.Approvals }),
	fixed(Text("requested_by", func(a *ledger.Approval) *string { return &a.RequestedBy })),
	Text("status", func(a *ledger.Approval) *ledger.ApprovalStatus { return &a.Status }),
	Text("decided_by", func(a *ledger.Approval) *string { return &a.DecidedBy }),
	Text("note", func(a *ledger.Approval) *string { return &a.Note }),
	Text("used_by", func(a *ledger.Approval) *string { return &a.UsedBy }),
	fixed(Time("created_at", func(a *ledger.Approval) *time.Time { return &a.CreatedAt })),
	Time("updated_at", func(a *ledger.Approval) *time.Time { return &a.UpdatedAt }),
	fixed(Time("deadline", func(a *ledger.Approval) *time.Time { return &a.Deadline })),
	Time("decided_at", func(a *ledger.Approval) *time.Time { return &a.DecidedAt }),
	Time("used_at", func(a *ledger.Approval) *time.Time { return &a.UsedAt }),
)

// Events is the one mapping between rows of ledger_outbox and
// ledger.Event, for every backend. A sender's lease and outcome are the
// mutable columns.
var Events = NewTable(
	fixed(Text("id", func(e *ledger.Event) *string { return &e.ID })),
	fixed(Text("name", func(e *ledger.Event) *string { return &e.Name })),
	fixed(JSON("body", func(e *ledger.Event) *json.RawMessage { return &e.Body })),
	fixed(Time("created_at", func(e *ledger.Event) *time.Time { return &e.CreatedAt })),
	Int("attempts", func(e *ledger.Event) *int { return &e.Attempts }),
	Time("next_attempt_at", func(e *ledger.Event) *time.Time { return &e.NextAttemptAt }),
	Text("lease_owner", func(e *ledger.Event) *string { return &e.LeaseOwner }),
	Time("lease_until", func(e *ledger.Event) *time.Time { return &e.LeaseUntil }),
	Time("delivered_at", func(e *ledger.Event) *time.Time { return &e.DeliveredAt }),
	Text("last_error", func(e *ledger.Event) *string { return &e.LastError }),
)

// DecisionColumns are the columns of ledger_decisions, in the order of
// DecisionArgs and ScanDecision.
const DecisionColumns = "approval_id, person, verdict, note, at"

// DecisionArgs binds d to DecisionColumns.
func DecisionArgs(d ledger.Decision) []any {
	return []any{d.ApprovalID, d.Person, string(d.Verdict), d.Note, TimeArg(d.At)}
}

// ScanDecision reads one row of DecisionColumns.
func ScanDecision(s Scanner) (ledger.Decision, error) {
	var d ledger.Decision
	if err := s.Scan(&d.ApprovalID, &d.Person, textDest[ledger.Verdict]{p: &d.Verdict}, &d.Note, timeDest{p: &d.At}); err != nil {
		return d, err
	}
	return d, nil
}

// ApprovalWhere is the clause that selects the approvals f selects, except
// for its Limit; the order is NewestFirst.
func ApprovalWhere(d Dialect, f ledger.ApprovalFilter) *Where {
	w := NewWhere(d)
	if len(f.Statuses) > 0 {
		w.approvalStatusIn(f.Statuses)
	}
	if f.ChangeID != "" {
		w.Cond("change_id = " + w.Arg(f.ChangeID))
	}
	if f.RunID != "" {
		w.Cond("run_id = " + w.Arg(f.RunID))
	}
	if !f.DueBy.IsZero() {
		w.Cond("deadline <= " + w.Arg(f.DueBy.UnixMicro()))
	}
	if f.Before != nil {
		w.after(f.Before.CreatedAt, f.Before.ID)
	}
	return w
}

// approvalStatusIn adds "status is one of statuses", written as literals,
// "(status = 'waiting' OR …)", when every status is valid: SQLite reads its
// partial indexes of approvals (the waiting ones; the waiting and approved
// ones) only for a condition that spells the index's own WHERE term. The
// literals are the ledger's constants, never the filter's text.
func (w *Where) approvalStatusIn(statuses []ledger.ApprovalStatus) {
	ors := make([]string, 0, len(statuses))
	for _, s := range statuses {
		if !s.Valid() {
			w.In("status", strs(statuses))
			return
		}
		ors = append(ors, "status = '"+string(s)+"'")
	}
	w.Cond("(" + strings.Join(ors, " OR ") + ")")
}

// EventWhere is the clause that selects the events f selects, except for
// its Limit; the order is EventOrder.
func EventWhere(d Dialect, f ledger.EventFilter) *Where {
	w := NewWhere(d)
	if f.Name != "" {
		w.Cond("name = " + w.Arg(f.Name))
	}
	if f.Undelivered {
		w.Cond("delivered_at IS NULL")
	}
	if f.After != nil {
		w.Cond("(created_at, id) > (" + w.Arg(f.After.CreatedAt.UnixMicro()) + ", " + w.Arg(f.After.ID) + ")")
	}
	return w
}

// EventOrder is the order of a list of events: oldest first.
const EventOrder = " ORDER BY created_at, id"

// Int is a NOT NULL integer column.
func Int[T any](name string, field func(*T) *int) column[T] {
	return column[T]{name: name,
		arg:  func(v *T, _ Dialect) any { return int64(*field(v)) },
		dest: func(v *T) any { return field(v) },
	}
}

// SortEvents orders events as a lease returns them: the soonest due
// first, then by ID (an UPDATE … RETURNING returns its rows in no set
// order).
func SortEvents(es []*ledger.Event) {
	slices.SortFunc(es, func(a, b *ledger.Event) int {
		if c := a.NextAttemptAt.Compare(b.NextAttemptAt); c != 0 {
			return c
		}
		return strings.Compare(a.ID, b.ID)
	})
}

// LeaseLost is the cause of an outcome refused because the event is no
// longer leased to owner: another replica holds it (now), or it was
// delivered already.
func LeaseLost(owner, now string, delivered bool) error {
	if delivered {
		return fmt.Errorf("%w: it was delivered already", ledger.ErrConflict)
	}
	if now == "" {
		return fmt.Errorf("%w: its lease to %q ran out", ledger.ErrConflict, owner)
	}
	return fmt.Errorf("%w: it is leased to %q, not %q (the lease ran out and another sender took it)", ledger.ErrConflict, now, owner)
}
