package ledger

import (
	"context"
	"errors"
	"fmt"
	"time"
)

// PruneOptions select what Prune deletes.
type PruneOptions struct {
	// OlderThan: only rows last updated strictly before now (the ledger's
	// clock, see [Ledger.Now]) minus OlderThan are deleted. Zero means every eligible row, whatever its age.
	OlderThan time.Duration
	// Keep keeps the newest Keep eligible changes whatever their age
	// (count-based retention).
	Keep int
	// IncludeApplied also deletes applied changes that can no longer be
	// undone: their operation has no undo, or their undo window closed.
	IncludeApplied bool
	// DryRun reports what would be deleted and deletes nothing.
	DryRun bool
	// BatchSize is how many rows one transaction deletes (default 200), so
	// that a live server's claims wait at most one short batch.
	BatchSize int
	// Progress, if set, is called after each batch.
	Progress func(deleted, total int)
	// By names who prunes (e.g. "operator:ann"), for the history entry
	// each of Prune's transactions appends (see HistoryPruned).
	By string
}

// PruneResult lists what Prune deleted (or, on a dry run, would delete).
type PruneResult struct {
	Changes []string
	Runs    []string
}

// prunable are the statuses Prune may delete without IncludeApplied. Pending,
// Applying and Undoing rows are never deleted: a pending row must first be
// expired (ExpireStale), and an in-flight row reconciled.
var prunable = []Status{Expired, ApplyFailed, Undone, UndoFailed}

// Prune deletes finished changes, and runs left with no changes, as opts
// select. It deletes in batches, each in its own transaction, and re-checks
// each row's status as it deletes, so a row that moved on meanwhile is kept.
func (l *Ledger) Prune(ctx context.Context, opts PruneOptions) (PruneResult, error) {
	if opts.BatchSize <= 0 {
		opts.BatchSize = 200
	}
	now := l.now()
	cutoff := now.Add(-opts.OlderThan)
	statuses := prunable
	if opts.IncludeApplied {
		statuses = append(append([]Status(nil), prunable...), Applied)
	}
	res := PruneResult{Changes: []string{}, Runs: []string{}}
	// Pick what to delete a page at a time, newest first: memory holds one
	// page of rows and the IDs picked, never the whole ledger.
	gonePerRun := map[string]int{} // the changes picked, by run
	eligible := 0
	for page, err := range l.changePages(ctx, ChangeFilter{Statuses: statuses}) {
		if err != nil {
			return PruneResult{}, err
		}
		for _, c := range page {
			if c.Status == Applied && c.Undoable && (c.UndoExpiresAt.IsZero() || now.Before(c.UndoExpiresAt)) {
				continue // still undoable
			}
			if eligible >= opts.Keep && c.UpdatedAt.Before(cutoff) {
				res.Changes = append(res.Changes, c.ID)
				if c.RunID != "" {
					gonePerRun[c.RunID]++
				}
			}
			eligible++
		}
	}
	if !opts.DryRun {
		deleted := res.Changes[:0:0]
		for start := 0; start < len(res.Changes); start += opts.BatchSize {
			batch := res.Changes[start:min(start+opts.BatchSize, len(res.Changes))]
			err := l.WithTx(ctx, func(tx *Tx) error {
				if err := tx.appendPruneEntry(opts.By, fmt.Sprintf("pruned up to %d changes", len(batch))); err != nil {
					return err
				}
				_, err := l.b.DeleteChanges(ctx, tx.tx, batch, statuses)
				return err
			})
			if err != nil {
				return res, err
			}
			deleted = append(deleted, batch...)
			if opts.Progress != nil {
				opts.Progress(len(deleted), len(res.Changes))
			}
		}
	}
	// A run goes when it is old, not being undone, and left with no
	// changes: none at all once the changes are deleted, or on a dry run
	// none but those picked.
	notUndoing := []RunStatus{RunOpen, RunUndone, RunPartiallyUndone}
	for page, err := range l.runPages(ctx, RunFilter{Statuses: notUndoing, UpdatedBefore: cutoff}) {
		if err != nil {
			return res, err
		}
		for _, r := range page {
			n, err := l.b.CountChanges(ctx, l.b.DB(), ChangeFilter{RunID: r.ID})
			if err != nil {
				return res, err
			}
			want := 0
			if opts.DryRun {
				want = gonePerRun[r.ID]
			}
			if n == want {
				res.Runs = append(res.Runs, r.ID)
			}
		}
	}
	if !opts.DryRun && len(res.Runs) > 0 {
		err := l.WithTx(ctx, func(tx *Tx) error {
			if err := tx.appendPruneEntry(opts.By, fmt.Sprintf("pruned up to %d runs left with no changes", len(res.Runs))); err != nil {
				return err
			}
			n, err := l.b.DeleteRuns(ctx, tx.tx, res.Runs)
			if err == nil && n != len(res.Runs) {
				// A change joined a run meanwhile; report what was deleted.
				res.Runs, err = l.remainingRuns(ctx, tx, res.Runs)
			}
			return err
		})
		if err != nil {
			return res, err
		}
	}
	return res, nil
}

// appendPruneEntry appends the history entry of a prune transaction, before
// it deletes anything: appended first, its Seq is above every entry the
// transaction deletes, so the numbering never goes back (see
// HistoryPruned).
func (tx *Tx) appendPruneEntry(by, note string) error {
	return tx.appendHistory(HistoryEntry{To: HistoryPruned, By: by, Note: note})
}

// remainingRuns returns the IDs among ids that no longer exist.
func (l *Ledger) remainingRuns(ctx context.Context, tx *Tx, ids []string) ([]string, error) {
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
