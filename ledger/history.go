package ledger

import (
	"context"
	"time"
)

// HistoryEntry is one transition of a change or a run, as the history
// keeps it: who moved which row from which status to which, when, and
// why. The ledger appends an entry in the same transaction as every
// transition (see Tx.UpdateChange, Tx.InsertChange, Tx.UpdateRun and
// Tx.InsertRun), so the history holds a transition exactly when the rows
// do: a transaction that rolls back leaves neither.
//
// An entry of a change carries the change's run, if it has one, so that a
// run's history lists its changes' transitions beside its own; an entry
// of the run itself has an empty ChangeID. An entry with neither is about
// the ledger itself: a prune (To is [HistoryPruned]), appended before the
// rows it deletes in the same transaction.
type HistoryEntry struct {
	// Seq orders the entries: it grows with every entry appended, in the
	// order their transactions committed, and is never handed out twice
	// (a pruned entry keeps its number, see [Link]).
	Seq int64
	// At is when the transition happened: the row's UpdatedAt (its
	// CreatedAt for a new row).
	At time.Time
	// ChangeID is the change that moved, or empty for a run's own
	// transition.
	ChangeID string
	// RunID is the run that moved, or the run of the change that moved,
	// or empty.
	RunID string
	// ApprovalID, when set, says that the entry is about that approval,
	// not about the change or run it names: From and To are then approval
	// statuses (ApprovalStatus), By the agent that asked (From empty),
	// the person who decided (Note "approve" or "decline", then ": " and
	// their note, if any), or the caller that used it; empty for an
	// expiry. ChangeID and RunID name what the approval is for, so that
	// the history of a change or run lists its approvals.
	ApprovalID string
	// From is the status before the transition, empty when the row was
	// created; To is the status after it. They are change statuses
	// (Status) for a change and run statuses (RunStatus) for a run.
	From string
	To   string
	// By names who made the transition, as PreviewedBy, AppliedBy and
	// UndoneBy do; empty for the library's own moves (an expiry, a run
	// starting, an undo giving a run back).
	By string
	// Note says more about the transition: the kind of failure of a
	// change that failed (e.g. "state_changed"), or an operator's note
	// when one reconciled the row. Never a payload, token or digest.
	Note string
	// Removed, on a prune's entry, is how many history entries its
	// transaction deleted with the rows they describe (their links stay:
	// see [Ledger.Verify]); 0 on every other entry.
	Removed int
	// Hash chains the entry to the entries before it (see [HistoryHash]):
	// the ledger sets it, with Seq, when the transaction commits.
	Hash Hash
}

// About names what e is about, for messages: the approval, the change or
// the run it records a move of, or the ledger itself (a prune's entry).
func (e HistoryEntry) About() string {
	switch {
	case e.ApprovalID != "":
		return "approval " + e.ApprovalID
	case e.ChangeID != "":
		return "change " + e.ChangeID
	case e.RunID != "":
		return "run " + e.RunID
	}
	return "the ledger"
}

// HistoryPruned is the To of the entry a prune appends: ChangeID and
// RunID empty, By the operator who pruned, Note what was deleted. Such an
// entry is never deleted (no row owns it), which on SQLite also keeps
// every Seq from being handed out twice.
const HistoryPruned = "pruned"

// HistoryFilter selects entries for [Ledger.History]. Zero fields do not
// filter.
type HistoryFilter struct {
	Since    time.Time // entries at or after this instant
	ChangeID string    // entries of this change
	RunID    string    // entries of this run and of its changes
	By       string    // entries made by exactly this actor
	// ApprovalID selects the entries of this approval.
	ApprovalID string
	// After selects entries whose Seq is greater, for reading on from the
	// last entry of a page.
	After int64
	Limit int // at most this many, the oldest first; 0 means all
}

// History returns the entries f selects, oldest first (by Seq).
func (l *Ledger) History(ctx context.Context, f HistoryFilter) ([]HistoryEntry, error) {
	return l.b.ListHistory(ctx, l.b.DB(), f)
}

// changeEntry is the history entry of a change's move from from (empty
// for a new change) to c.Status. Who made it comes from the row: the
// previewer of a pending change, the claimant of the apply while it is
// applied or fails, the claimant of the undo while it is undone or fails,
// nobody (the library) for an expiry. override, when set, names who made
// it instead (an operator who reconciled it), with note.
func changeEntry(c *Change, from Status, override *actor) HistoryEntry {
	e := HistoryEntry{At: c.UpdatedAt, ChangeID: c.ID, RunID: c.RunID, From: string(from), To: string(c.Status)}
	if from == "" && !c.CreatedAt.IsZero() {
		e.At = c.CreatedAt
	}
	switch c.Status {
	case Pending:
		e.By = c.PreviewedBy
	case Applying, Applied, ApplyFailed:
		e.By = c.AppliedBy
	case Undoing, Undone, UndoFailed:
		e.By = c.UndoneBy
	}
	if c.Status == ApplyFailed || c.Status == UndoFailed {
		e.Note = string(c.Failure)
	}
	if override != nil {
		e.By, e.Note = override.by, override.note
	}
	return e
}

// runEntry is the history entry of a run's move from from (empty for a
// new run) to r.Status: made by whoever undoes it while it is undoing or
// undone, else by nobody (the library), unless override names someone.
func runEntry(r *Run, from RunStatus, override *actor) HistoryEntry {
	e := HistoryEntry{At: r.UpdatedAt, RunID: r.ID, From: string(from), To: string(r.Status)}
	if from == "" && !r.CreatedAt.IsZero() {
		e.At = r.CreatedAt
	}
	switch r.Status {
	case RunUndoing, RunUndone, RunPartiallyUndone:
		e.By = r.UndoneBy
	}
	if override != nil {
		e.By, e.Note = override.by, override.note
	}
	return e
}

// actor names who made a transition when the row cannot say it, and why:
// an operator reconciling a change or a run.
type actor struct{ by, note string }

// appendHistory appends e to the transaction's history, which its commit
// numbers, chains and writes (see Tx.seal). Its time is the row's, set by
// whoever made the transition; the ledger's clock stands in only when the
// row had none (a prune's entry, a row written without times).
func (tx *Tx) appendHistory(e HistoryEntry) error {
	if e.At.IsZero() {
		e.At = tx.l.now()
	}
	tx.entries = append(tx.entries, e)
	return nil
}
