package ledger

import (
	"context"
	"fmt"
	"time"
)

// Check runs the backend's own integrity check (SQLite's quick_check, for
// one) and then checks the ledger's invariants, row by row. It returns one
// line per problem, none when the ledger is sound. It only reads, so it works on a
// ledger opened with [OpenOptions.ReadOnly].
//
// The invariants are those every transition of this package keeps:
//
//   - every change and run has a known status;
//   - only a pending change holds a confirmation digest, and every pending
//     change holds one (ExpireStale, a claim and Reconcile clear it);
//   - only an applied change of an undoable operation holds an undo
//     digest, and it holds one unless its undo window has closed;
//   - a change that reached applied (applied, undoing, undone,
//     undo_failed) records when it was applied, and an undone change when
//     it was undone;
//   - a change's run exists;
//   - a finished run (undone, partially_undone) holds no confirmation
//     digest, and a run holds a confirmation digest only together with the
//     plan digest it is bound to;
//   - a change or run with history entries is in the status its last
//     entry reached (rows from before the history have none).
//
// Lines name rows by ID and never quote a stored digest.
func (l *Ledger) Check(ctx context.Context) ([]string, error) {
	problems, err := l.b.Check(ctx)
	if err != nil {
		return nil, err
	}
	rowProblems, err := l.checkRows(ctx)
	problems = append(problems, rowProblems...)
	if err != nil {
		if len(problems) > 0 {
			// The damage already reported stops the row checks.
			return append(problems, "invariants: not checked: "+err.Error()), nil
		}
		return nil, err
	}
	return problems, nil
}

// checkRows checks the invariants of every run and change, reading the
// history, the runs and the changes a page at a time: memory holds a page
// of rows and, per row with history, the status its last entry reached.
func (l *Ledger) checkRows(ctx context.Context) ([]string, error) {
	reached := map[string]string{} // change or run ID → its last entry's status
	for page, err := range l.historyPages(ctx, HistoryFilter{}) {
		if err != nil {
			return nil, err
		}
		for _, e := range page {
			switch {
			case e.ChangeID != "":
				reached[e.ChangeID] = e.To
			case e.RunID != "":
				reached[e.RunID] = e.To
			}
		}
	}
	var problems []string
	known := map[string]bool{}
	for page, err := range l.runPages(ctx, RunFilter{}) {
		if err != nil {
			return problems, err
		}
		for _, r := range page {
			known[r.ID] = true
			problems = append(problems, runProblems(r)...)
			if to, ok := reached[r.ID]; ok && to != string(r.Status) && r.Status.Valid() {
				problems = append(problems, fmt.Sprintf("run %s: %s, but its history ends at %s: a transition was written without its history entry", r.ID, r.Status, to))
			}
		}
	}
	now := l.now()
	for page, err := range l.changePages(ctx, ChangeFilter{}) {
		if err != nil {
			return problems, err
		}
		for _, c := range page {
			problems = append(problems, changeProblems(c, now)...)
			if c.RunID != "" && !known[c.RunID] {
				problems = append(problems, fmt.Sprintf("change %s: its run %s does not exist", c.ID, c.RunID))
			}
			if to, ok := reached[c.ID]; ok && to != string(c.Status) && c.Status.Valid() {
				problems = append(problems, fmt.Sprintf("change %s: %s, but its history ends at %s: a transition was written without its history entry", c.ID, c.Status, to))
			}
		}
	}
	return problems, nil
}

// changeProblems checks one change against the invariants of [Ledger.Check]
// that concern it alone.
func changeProblems(c *Change, now time.Time) []string {
	var out []string
	add := func(format string, args ...any) {
		out = append(out, "change "+c.ID+": "+fmt.Sprintf(format, args...))
	}
	if !c.Status.Valid() {
		add("unknown status %q", c.Status)
		return out
	}
	switch {
	case c.Status == Pending && c.ConfirmHash == "":
		add("pending without a confirmation digest: no token can apply it")
	case c.Status != Pending && c.ConfirmHash != "":
		add("%s but still holds a confirmation digest", c.Status)
	}
	undoOpen := c.UndoExpiresAt.IsZero() || now.Before(c.UndoExpiresAt)
	switch {
	case c.UndoHash != "" && (c.Status != Applied || !c.Undoable):
		add("%s (undoable: %t) but holds an undo digest", c.Status, c.Undoable)
	case c.Status == Applied && c.Undoable && c.UndoHash == "" && undoOpen:
		add("applied and undoable within its undo window, but holds no undo digest: no token can undo it")
	}
	switch c.Status {
	case Applied, Undoing, Undone, UndoFailed:
		if c.AppliedAt.IsZero() {
			add("%s without the time it was applied", c.Status)
		}
	}
	if c.Status == Undone && c.UndoneAt.IsZero() {
		add("undone without the time it was undone")
	}
	return out
}

// runProblems checks one run against the invariants of [Ledger.Check].
func runProblems(r *Run) []string {
	var out []string
	add := func(format string, args ...any) {
		out = append(out, "run "+r.ID+": "+fmt.Sprintf(format, args...))
	}
	if !r.Status.Valid() {
		add("unknown status %q", r.Status)
		return out
	}
	if r.ConfirmHash != "" {
		if r.Status == RunUndone || r.Status == RunPartiallyUndone {
			add("%s but still holds an undo confirmation digest", r.Status)
		}
		if r.PlanHash == "" {
			add("holds an undo confirmation digest without the plan digest it is bound to")
		}
	}
	return out
}
