package ledger

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"time"
)

// DefaultPruneBatch is how many changes one transaction of [Ledger.Prune]
// deletes when PruneOptions.BatchSize is zero. On SQLite a batch of 1000
// changes of a few KB each, with their history, takes about 40 ms on the
// machine of docs/benchmarks.md: what a live server's claims wait at most
// while a prune runs. Smaller batches barely shorten that wait (each
// commit costs its sync), and larger ones lengthen it in proportion.
const DefaultPruneBatch = 1000

// PruneOptions select what Prune deletes.
type PruneOptions struct {
	// OlderThan: only rows last updated strictly before now (the ledger's
	// clock, see [Ledger.Now]) minus OlderThan are deleted. Zero means every eligible row, whatever its age.
	OlderThan time.Duration
	// Keep keeps the newest Keep eligible changes whatever their age
	// (count-based retention), newest as [Ledger.Changes] orders them.
	Keep int
	// IncludeApplied also deletes applied changes that can no longer be
	// undone: their operation has no undo, or their undo window closed.
	IncludeApplied bool
	// DryRun reports what would be deleted and deletes nothing.
	DryRun bool
	// BatchSize is how many rows one transaction deletes
	// (DefaultPruneBatch when zero), so that a live server's claims wait
	// at most one short batch.
	BatchSize int
	// Progress, if set, is called after each batch of changes with how
	// many changes are deleted so far and how many Prune picked.
	Progress func(deleted, total int)
	// By names who prunes (e.g. "operator:ann"), for the history entry
	// each of Prune's transactions appends (see HistoryPruned).
	By string
}

// PruneResult lists what Prune deleted (or, on a dry run, would delete),
// and what became of the space it took.
type PruneResult struct {
	// Changes are the IDs of the changes picked, newest first.
	Changes []string
	// Runs are the IDs of the runs deleted, newest first.
	Runs []string
	// Space is the ledger's size on disk before the prune deleted
	// anything and after it gave the space back; zero on a dry run and
	// on a backend that cannot tell.
	Space Space
}

// Space is a ledger's size on disk before and after Prune or Vacuum.
type Space struct {
	// Before and After are sizes in bytes: on SQLite the file with its
	// write-ahead log, on PostgreSQL the ledger's tables with their
	// indexes and TOAST.
	Before, After int64
	// Returned reports that the backend gave the space of deleted rows
	// back to the disk (SQLite with incremental auto-vacuum). When it is
	// false the space stays with the database, which reuses it for new
	// rows: a SQLite ledger created before this package set incremental
	// auto-vacuum (run [Ledger.Vacuum] once), or PostgreSQL, whose files
	// shrink only with Vacuum (VACUUM FULL).
	Returned bool
}

// PruneFilter selects the changes and runs that Prune may delete. It is
// what Prune hands the backend (see package ledger/driver), which applies
// it in its query language so that nothing is read row by row.
type PruneFilter struct {
	// Statuses are the statuses a change may be deleted in.
	Statuses []Status
	// UpdatedBefore: only changes and runs last updated strictly before
	// it.
	UpdatedBefore time.Time
	// Now decides which applied changes can still be undone: one that is
	// Undoable and whose UndoExpiresAt is zero or after Now is never
	// selected, and does not count towards Keep.
	Now time.Time
	// Keep skips the newest Keep changes that Statuses and Now allow,
	// whatever their age, newest as ListChanges orders them (CreatedAt,
	// then ID, descending).
	Keep int
	// RunStatuses are the statuses a run may be deleted in.
	RunStatuses []RunStatus
}

// A PrunableChange is a change that Prune may delete.
type PrunableChange struct {
	ID    string
	RunID string // "" when it belongs to no run
}

// A PrunableRun is a run that Prune may delete once it holds no changes.
type PrunableRun struct {
	ID      string
	Changes int // how many changes it holds now
}

// prunable are the statuses Prune may delete without IncludeApplied. Pending,
// Applying and Undoing rows are never deleted: a pending row must first be
// expired (ExpireStale), and an in-flight row reconciled. A change's
// approvals and their decisions go with it.
var prunable = []Status{Expired, ApplyFailed, Undone, UndoFailed, Declined}

// Prune deletes finished changes, and runs left with no changes, as opts
// select, and then gives the space they took back to the disk where the
// backend can (see [Space]).
//
// The backend picks the changes in its own query language, reading their
// IDs, not their rows. Prune then deletes them, the oldest first, in
// batches of opts.BatchSize, each in its own short transaction that
// appends a history entry (see [HistoryPruned]) and re-checks each row's
// status as it deletes, so a row that moved on meanwhile is kept. Runs go
// last, in batches too, once they hold no changes; then the backend
// returns the free space, in steps that are short transactions as well.
// A server using the ledger keeps claiming changes meanwhile: its claims
// wait at most one batch.
func (l *Ledger) Prune(ctx context.Context, opts PruneOptions) (PruneResult, error) {
	if opts.BatchSize <= 0 {
		opts.BatchSize = DefaultPruneBatch
	}
	now := l.now()
	f := PruneFilter{
		Statuses:      prunable,
		UpdatedBefore: now.Add(-opts.OlderThan),
		Now:           now,
		Keep:          max(opts.Keep, 0),
		// A run being undone is never deleted.
		RunStatuses: []RunStatus{RunOpen, RunUndone, RunPartiallyUndone},
	}
	if opts.IncludeApplied {
		f.Statuses = append(slices.Clip(prunable), Applied)
	}
	res := PruneResult{Changes: []string{}, Runs: []string{}}
	picked, err := l.b.PrunableChanges(ctx, l.b.DB(), f)
	if err != nil {
		return res, err
	}
	gonePerRun := map[string]int{} // the changes picked, by run
	for _, c := range picked {
		res.Changes = append(res.Changes, c.ID)
		if c.RunID != "" {
			gonePerRun[c.RunID]++
		}
	}
	space, reclaim := l.b.(compactor)
	if !opts.DryRun && reclaim {
		if res.Space.Before, err = space.Size(ctx); err != nil {
			return res, err
		}
	}
	if !opts.DryRun {
		if err := l.deleteChanges(ctx, res.Changes, f.Statuses, opts); err != nil {
			return res, err
		}
	}
	// A run goes when it is old, not being undone, and left with no
	// changes: none at all once the changes are deleted, or on a dry run
	// none but those picked.
	runs, err := l.b.PrunableRuns(ctx, l.b.DB(), f)
	if err != nil {
		return res, err
	}
	for _, r := range runs {
		want := 0
		if opts.DryRun {
			want = gonePerRun[r.ID]
		}
		if r.Changes == want {
			res.Runs = append(res.Runs, r.ID)
		}
	}
	if opts.DryRun {
		return res, nil
	}
	if res.Runs, err = l.deleteRuns(ctx, res.Runs, opts); err != nil {
		return res, err
	}
	// The outbox's events of that age go too, delivered or not: a
	// notification older than the cut-off is no longer news.
	if _, err := l.deleteEvents(ctx, f.UpdatedBefore, f.UpdatedBefore); err != nil {
		return res, err
	}
	if reclaim {
		if len(res.Changes) > 0 || len(res.Runs) > 0 {
			if res.Space.Returned, err = space.Reclaim(ctx); err != nil {
				return res, err
			}
		}
		if res.Space.After, err = space.Size(ctx); err != nil {
			return res, err
		}
	}
	return res, nil
}

// deleteChanges deletes the changes ids (listed newest first) whose status
// is still one of statuses, oldest first, opts.BatchSize to a transaction,
// reporting progress after each.
func (l *Ledger) deleteChanges(ctx context.Context, ids []string, statuses []Status, opts PruneOptions) error {
	deleted := 0
	for end := len(ids); end > 0; end -= opts.BatchSize {
		batch := ids[max(end-opts.BatchSize, 0):end]
		if deleted > 0 {
			if err := l.yield(ctx); err != nil {
				return err
			}
		}
		err := l.WithTx(ctx, func(tx *Tx) error {
			n, entries, err := l.b.DeleteChanges(ctx, tx.tx, batch, statuses)
			if err != nil {
				return err
			}
			return tx.appendPruneEntry(opts.By, fmt.Sprintf("pruned %d changes", n), entries)
		})
		if err != nil {
			return err
		}
		deleted += len(batch)
		if opts.Progress != nil {
			opts.Progress(deleted, len(ids))
		}
	}
	return nil
}

// deleteRuns deletes the runs ids that still hold no changes,
// opts.BatchSize to a transaction, and returns those it deleted: a run a
// change joined meanwhile is kept.
func (l *Ledger) deleteRuns(ctx context.Context, ids []string, opts PruneOptions) ([]string, error) {
	var gone []string
	for start := 0; start < len(ids); start += opts.BatchSize {
		batch := ids[start:min(start+opts.BatchSize, len(ids))]
		if err := l.yield(ctx); err != nil {
			return gone, err
		}
		err := l.WithTx(ctx, func(tx *Tx) error {
			n, entries, err := l.b.DeleteRuns(ctx, tx.tx, batch)
			if err != nil {
				return err
			}
			if err := tx.appendPruneEntry(opts.By, fmt.Sprintf("pruned %d runs left with no changes", n), entries); err != nil {
				return err
			}
			if n == len(batch) {
				gone = append(gone, batch...)
				return nil
			}
			// A change joined a run meanwhile; report what was deleted.
			left, err := l.deletedRuns(ctx, tx, batch)
			gone = append(gone, left...)
			return err
		})
		if err != nil {
			return gone, err
		}
	}
	if gone == nil {
		gone = []string{}
	}
	return gone, nil
}

// yield lets other writers in between two of Prune's transactions, as
// the backend needs it (see driver.Compactor).
func (l *Ledger) yield(ctx context.Context) error {
	c, ok := l.b.(compactor)
	if !ok {
		return nil
	}
	return c.Yield(ctx)
}

// appendPruneEntry appends the history entry of a prune transaction, which
// deleted removed history entries with its rows (see HistoryPruned and
// HistoryEntry.Removed). Its Seq comes after every link of the chain,
// those of the entries just deleted included, so the numbering never goes
// back.
func (tx *Tx) appendPruneEntry(by, note string, removed int) error {
	return tx.appendHistory(HistoryEntry{To: HistoryPruned, By: by, Note: note, Removed: removed})
}

// deletedRuns returns the IDs among ids that no longer exist.
func (l *Ledger) deletedRuns(ctx context.Context, tx *Tx, ids []string) ([]string, error) {
	var out []string
	for _, id := range ids {
		_, err := l.b.GetRun(ctx, tx.tx, id)
		if errors.Is(err, ErrNotFound) {
			out = append(out, id)
		} else if err != nil {
			return nil, err
		}
	}
	return out, nil
}

// Vacuum rewrites the whole database so that it takes no more space on
// disk than its rows need, and returns its size before and after. On
// SQLite it also turns on incremental auto-vacuum, so that every later
// Prune gives the space it frees back to the disk by itself: a ledger
// created before this package set it needs one Vacuum for that (Prune
// reports Space.Returned false until then). On PostgreSQL it runs VACUUM
// FULL on the ledger's tables.
//
// Vacuum holds the database for as long as it runs, proportional to the
// ledger's size (about 1 s per 100 MB on SQLite on the machine of
// docs/benchmarks.md): every writer waits for it, on PostgreSQL every
// reader too, and a SQLite writer of another process that waits longer
// than its busy timeout fails. It needs free disk space of about the
// ledger's size. Run it while no server writes, once, or rarely.
// A backend that cannot vacuum returns an error saying so.
func (l *Ledger) Vacuum(ctx context.Context) (Space, error) {
	c, ok := l.b.(compactor)
	if !ok {
		return Space{}, &Error{Op: "vacuum", Location: l.b.Location(), Err: errors.New("this ledger's backend cannot vacuum")}
	}
	var s Space
	var err error
	if s.Before, err = c.Size(ctx); err != nil {
		return s, err
	}
	if err := c.Vacuum(ctx); err != nil {
		return s, err
	}
	s.Returned = true
	s.After, err = c.Size(ctx)
	return s, err
}
