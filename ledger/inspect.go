package ledger

import (
	"context"
	"errors"
	"fmt"
	"time"
)

// CheckOptions say how much of the ledger [Ledger.CheckWith] reads.
type CheckOptions struct {
	// Full reads the whole ledger: the backend's whole-file check (see
	// Check) and every row and history entry. It costs time in
	// proportion to the ledger (about a minute per GB on SQLite).
	//
	// Without it, the routine check costs the same at any size: the
	// backend's routine check (on SQLite, the open-time check of the
	// pages where every b-tree starts and ends, and the file's identity;
	// on PostgreSQL, the schema and its constraints), and the invariants
	// of every change and run with a history entry at or after Since,
	// and of every change still applying or undoing (in flight: its
	// outcome is not in the history yet), each against its own last
	// history entry.
	Full bool
	// Since is where the routine check's window of history starts; the
	// zero time means 24 hours before now (the ledger's clock).
	Since time.Time
	// Progress, if set, is called as the check goes: stage names what it
	// reads ("file", "history", "runs", "changes"), done how many rows of
	// it are read, total how many there are (0 when unknown).
	Progress func(stage string, done, total int)
}

// Check is CheckWith with CheckOptions{Full: true}: it reads the whole
// ledger.
func (l *Ledger) Check(ctx context.Context) ([]string, error) {
	return l.CheckWith(ctx, CheckOptions{Full: true})
}

// CheckWith runs the backend's own integrity check (SQLite's
// integrity_check and foreign_key_check, for one; a cheaper one without
// opts.Full) and then checks the ledger's invariants, row by row: every
// row with opts.Full, else the rows of the routine check (see
// [CheckOptions]). It returns one line per problem, none when what it
// read is sound. It only reads, so it works on a ledger opened with
// [OpenOptions.ReadOnly].
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
func (l *Ledger) CheckWith(ctx context.Context, opts CheckOptions) ([]string, error) {
	progress := opts.Progress
	if progress == nil {
		progress = func(string, int, int) {}
	}
	progress("file", 0, 0)
	check := l.b.CheckRoutine
	if opts.Full {
		check = l.b.Check
	}
	problems, err := check(ctx)
	if err != nil {
		return nil, err
	}
	var rowProblems []string
	if opts.Full {
		rowProblems, err = l.checkRows(ctx, progress)
	} else {
		since := opts.Since
		if since.IsZero() {
			since = l.now().Add(-24 * time.Hour)
		}
		rowProblems, err = l.checkRecent(ctx, since, progress)
	}
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
func (l *Ledger) checkRows(ctx context.Context, progress func(string, int, int)) ([]string, error) {
	reached := map[string]string{} // change or run ID → its last entry's status
	read := 0
	for page, err := range l.historyPages(ctx, l.b.DB(), HistoryFilter{}) {
		if err != nil {
			return nil, err
		}
		for _, e := range page {
			reach(reached, e)
		}
		read += len(page)
		progress("history", read, 0)
	}
	return l.checkAgainst(ctx, l.b.DB(), reached, progress)
}

// reach records in reached the status e leaves its change or run in.
func reach(reached map[string]string, e HistoryEntry) {
	switch {
	case e.ApprovalID != "":
		// About an approval, not about the row it names.
	case e.ChangeID != "":
		reached[e.ChangeID] = e.To
	case e.RunID != "":
		reached[e.RunID] = e.To
	}
}

// checkAgainst checks the invariants of every run and change in q, each
// against reached, the status the last history entry of each row reached.
func (l *Ledger) checkAgainst(ctx context.Context, q querier, reached map[string]string, progress func(string, int, int)) ([]string, error) {
	var problems []string
	known := map[string]bool{}
	read := 0
	for page, err := range l.runPages(ctx, q, RunFilter{}) {
		if err != nil {
			return problems, err
		}
		for _, r := range page {
			known[r.ID] = true
			problems = append(problems, runProblems(r, reached)...)
		}
		read += len(page)
		progress("runs", read, 0)
	}
	now := l.now()
	changes, _ := l.b.CountChanges(ctx, q, ChangeFilter{}) // for progress only: 0 if it fails
	read = 0
	for page, err := range l.changePages(ctx, q, ChangeFilter{}) {
		if err != nil {
			return problems, err
		}
		for _, c := range page {
			problems = append(problems, changeProblems(c, now, reached)...)
			if c.RunID != "" && !known[c.RunID] {
				problems = append(problems, fmt.Sprintf("change %s: its run %s does not exist", c.ID, c.RunID))
			}
		}
		read += len(page)
		progress("changes", read, changes)
	}
	return problems, nil
}

// checkRecent checks the invariants of the rows the routine check reads:
// every change and run with a history entry at or after since, and every
// change still applying or undoing. Pending changes are left to the window:
// a preview made in it has an entry there, and one older than it is a
// stale preview that expire moves on (a neglected ledger may hold tens of
// thousands, which would make the routine check grow with the ledger).
// Each is checked against its
// own last history entry, read through the history's index by row. It
// reads the history since since a page at a time; memory holds the IDs
// of the rows to check.
func (l *Ledger) checkRecent(ctx context.Context, since time.Time, progress func(string, int, int)) ([]string, error) {
	var changeIDs, runIDs []string
	seen := map[string]bool{}
	add := func(list *[]string, id string) {
		if id != "" && !seen[id] {
			seen[id] = true
			*list = append(*list, id)
		}
	}
	read := 0
	for page, err := range l.historyPages(ctx, l.b.DB(), HistoryFilter{Since: since}) {
		if err != nil {
			return nil, err
		}
		for _, e := range page {
			add(&changeIDs, e.ChangeID)
			add(&runIDs, e.RunID)
		}
		read += len(page)
		progress("history", read, 0)
	}
	for page, err := range l.changePages(ctx, l.b.DB(), ChangeFilter{Statuses: []Status{Applying, Undoing}}) {
		if err != nil {
			return nil, err
		}
		for _, c := range page {
			add(&changeIDs, c.ID)
		}
	}
	return l.checkNamed(ctx, l.b.DB(), changeIDs, runIDs, progress)
}

// checkNamed checks, in q, the invariants of the changes and runs named,
// each against its own last history entry (read through the history's
// index by row). A row that no longer exists (pruned since) is skipped.
func (l *Ledger) checkNamed(ctx context.Context, db querier, changeIDs, runIDs []string, progress func(string, int, int)) ([]string, error) {
	var problems []string
	lastEntry := func(f HistoryFilter) (map[string]string, error) {
		entries, err := l.b.ListHistory(ctx, db, f)
		if err != nil {
			return nil, err
		}
		reached := map[string]string{}
		for _, e := range entries {
			switch {
			case e.ApprovalID != "":
				// About an approval, not about the row it names.
			case e.ChangeID == f.ChangeID && f.ChangeID != "":
				reached[e.ChangeID] = e.To
			case e.ChangeID == "" && e.RunID == f.RunID:
				reached[e.RunID] = e.To
			}
		}
		return reached, nil
	}
	runExists := map[string]bool{}
	for i, id := range runIDs {
		r, err := l.b.GetRun(ctx, db, id)
		if errors.Is(err, ErrNotFound) {
			continue // pruned since its entry
		}
		if err != nil {
			return problems, err
		}
		runExists[id] = true
		reached, err := lastEntry(HistoryFilter{RunID: id})
		if err != nil {
			return problems, err
		}
		problems = append(problems, runProblems(r, reached)...)
		progress("runs", i+1, len(runIDs))
	}
	now := l.now()
	for i, id := range changeIDs {
		c, err := l.b.GetChange(ctx, db, id)
		if errors.Is(err, ErrNotFound) {
			continue // pruned since its entry
		}
		if err != nil {
			return problems, err
		}
		reached, err := lastEntry(HistoryFilter{ChangeID: id})
		if err != nil {
			return problems, err
		}
		problems = append(problems, changeProblems(c, now, reached)...)
		if c.RunID != "" {
			exists, ok := runExists[c.RunID]
			if !ok {
				_, err := l.b.GetRun(ctx, db, c.RunID)
				if err != nil && !errors.Is(err, ErrNotFound) {
					return problems, err
				}
				exists = err == nil
				runExists[c.RunID] = exists
			}
			if !exists {
				problems = append(problems, fmt.Sprintf("change %s: its run %s does not exist", c.ID, c.RunID))
			}
		}
		progress("changes", i+1, len(changeIDs))
	}
	return problems, nil
}

// changeProblems checks one change against the invariants of [Ledger.Check]
// that concern it alone, and against reached, the status of the last
// history entry of each row that has one.
func changeProblems(c *Change, now time.Time, reached map[string]string) []string {
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
	if to, ok := reached[c.ID]; ok && to != string(c.Status) {
		add("%s, but its history ends at %s: a transition was written without its history entry", c.Status, to)
	}
	return out
}

// runProblems checks one run against the invariants of [Ledger.Check],
// and against reached as changeProblems does.
func runProblems(r *Run, reached map[string]string) []string {
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
	if to, ok := reached[r.ID]; ok && to != string(r.Status) {
		add("%s, but its history ends at %s: a transition was written without its history entry", r.Status, to)
	}
	return out
}
