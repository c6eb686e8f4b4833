package ledger

import "fmt"

// The state machine of changes and runs, as tables: every move that
// Tx.UpdateChange and Tx.UpdateRun accept. Any other move is refused with
// an error wrapping ErrTransition before the database is touched, so a bug
// that would, say, make a spent token valid again (a move back to Pending)
// cannot reach the ledger. docs/design.md draws the same moves, and a test
// holds the two together.
//
// A change (the arrows marked * are made by a transactional operation, in one
// transaction each: its change is never seen in flight):
//
//	pending ─┬─► applying ─┬─► applied ─┬─► undoing ─┬─► undone
//	         │             │      ▲     │            │     ▲
//	         │             ▼      │     │            ▼     │
//	         │       apply_failed │     │      undo_failed │
//	         │             ▲      │     │            ▲     │
//	         ├───── * ─────┴──────┘     └──── * ─────┴─────┘
//	         ├─► expired
//	         └─► declined
//
//	pending  → expired       the preview's time to live passed (a claim, ExpireStale)
//	pending  → declined      a person declined the apply (Tx.Decide); a declined
//	                         undo moves no change: it stays applied
//	pending  → applying      a confirmation token claimed the change
//	pending  → applied       * a transactional operation applied inside the claim
//	pending  → apply_failed  * a transactional operation's apply failed (recorded after the rollback)
//	applying → applied       Apply returned
//	applying → apply_failed  the state check refused, Apply failed, its result was
//	                         too large, or an operator reconciled the change
//	applied  → undoing       an undo token, or a run's undo, claimed the change
//	applied  → undone        * a transactional operation undone inside the claim or inside a
//	                         run's transactional segment; a change of a run with
//	                         no net effect closed without a write
//	applied  → undo_failed   * a transactional operation's undo failed, alone or in a run
//	undoing  → undone        Undo returned, or no write was needed
//	undoing  → undo_failed   the state check refused, Undo failed, or an operator
//	                         reconciled the change
//	X        → X             for every terminal X: a finished row rewritten
//	                         without moving (redacted, annotated); nothing in
//	                         this module does it today
//
// A run:
//
//	open ─┬─► undoing ─┬─► undone
//	 ▲ ▲  │      │     └─► partially_undone
//	 │ └──┘      │
//	 └───────────┘
//
//	open    → open              a dry run stored its confirmation token
//	open    → undoing           an undo claimed the run
//	undoing → open              an undo that could not proceed gave the run back
//	undoing → undone            every change was undone or needed no write
//	undoing → partially_undone  the undo skipped or failed some changes, or an
//	                            operator reconciled an interrupted undo
//
// Nothing leaves Undone or PartiallyUndone, and nothing leads back to
// Pending.
var (
	changeMoves = map[Status][]Status{
		Pending:     {Expired, Applying, Applied, ApplyFailed, Declined},
		Applying:    {Applied, ApplyFailed},
		Applied:     {Undoing, Undone, UndoFailed},
		Undoing:     {Undone, UndoFailed},
		Expired:     {Expired},
		ApplyFailed: {ApplyFailed},
		Undone:      {Undone},
		UndoFailed:  {UndoFailed},
		Declined:    {Declined},
	}
	runMoves = map[RunStatus][]RunStatus{
		RunOpen:    {RunOpen, RunUndoing},
		RunUndoing: {RunOpen, RunUndone, RunPartiallyUndone},
	}
)

// CanMoveTo reports whether the state machine lets a change move from s to
// to (see the table above).
func (s Status) CanMoveTo(to Status) bool {
	for _, t := range changeMoves[s] {
		if t == to {
			return true
		}
	}
	return false
}

// CanMoveTo reports whether the state machine lets a run move from s to to
// (see the table above).
func (s RunStatus) CanMoveTo(to RunStatus) bool {
	for _, t := range runMoves[s] {
		if t == to {
			return true
		}
	}
	return false
}

// transitionError is the refusal of a move outside the tables, for the
// change or run id of kind ("change", "run").
func transitionError(kind, id, from, to string) error {
	return &Error{Op: "update " + kind + " " + id, Err: fmt.Errorf("%w: %s → %s", ErrTransition, from, to)}
}
