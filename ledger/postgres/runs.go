package postgres

import (
	"context"
	"database/sql"

	"github.com/mcp-changeset/changeset-go/ledger"
	"github.com/mcp-changeset/changeset-go/ledger/driver"
	"github.com/mcp-changeset/changeset-go/ledger/internal/sqlval"
)

// InsertRun stores a new run. It fails if a run with the same ID exists.
func (b *Backend) InsertRun(ctx context.Context, q driver.Querier, r *ledger.Run) error {
	_, err := q.ExecContext(ctx, b.sql.insertRun, sqlval.Runs.InsertArgs(r, dialect)...)
	return b.interpretError("insert run "+r.ID, err)
}

// GetRun reads the run with the given ID. Inside a transaction it locks
// the row until the transaction ends, as GetChange does, so that a change
// joining a run and an undo of the run are serialised. A missing run is an
// error wrapping [ledger.ErrNotFound].
func (b *Backend) GetRun(ctx context.Context, q driver.Querier, id string) (*ledger.Run, error) {
	query := b.sql.selectRuns + ` WHERE id = $1`
	if b.locks(q) {
		query += ` FOR UPDATE`
	}
	r, err := sqlval.Runs.Scan(q.QueryRowContext(ctx, query, id))
	if err != nil {
		return nil, b.interpretError("find run "+id, err)
	}
	return r, nil
}

// UpdateRun writes r back if the stored run's status is still from. It
// writes every column except those fixed when the run started (ID,
// ScopeHash and CreatedAt). If the status has moved on it fails with an
// error wrapping [ledger.ErrConflict], and if the run is gone with one
// wrapping [ledger.ErrNotFound].
func (b *Backend) UpdateRun(ctx context.Context, q driver.Querier, r *ledger.Run, from ledger.RunStatus) error {
	res, err := q.ExecContext(ctx, b.sql.updateRun, sqlval.Runs.UpdateArgs(r, dialect, r.ID, string(from))...)
	return b.casResult(ctx, q, "update", "run", r.ID, string(from), res, err)
}

// ListRuns returns the runs that match f, newest first (by creation time,
// then by ID descending). It locks nothing.
func (b *Backend) ListRuns(ctx context.Context, q driver.Querier, f ledger.RunFilter) ([]*ledger.Run, error) {
	w := sqlval.RunWhere(dialect, f)
	query := b.sql.selectRuns + w.String() + sqlval.NewestFirst + w.Limit(f.Limit)
	const op = "list runs in"
	rows, err := q.QueryContext(ctx, query, w.Args...)
	if err != nil {
		return nil, b.interpretError(op, err)
	}
	out, err := sqlval.ScanAll(rows, sqlval.Runs.Scan)
	return out, b.interpretError(op, err)
}

// DeleteRuns deletes the runs with the given IDs that no change refers to
// any more, with their history entries, whose links it keeps, and reports
// how many runs and entries it deleted.
//
// It first locks the runs, then deletes in a second statement, inside q's
// transaction or one of its own. The lock waits for any transaction that
// is adding a change to one of the runs (its insert holds a key-share lock
// on the run), and the second statement, with a fresh snapshot at READ
// COMMITTED, then sees that change and keeps the run. A single DELETE
// would not see it and fail on the foreign key instead.
func (b *Backend) DeleteRuns(ctx context.Context, q driver.Querier, ids []string) (rows, entries int, err error) {
	if len(ids) == 0 {
		return 0, 0, nil
	}
	err = inTx(ctx, q, func(q driver.Querier) error {
		locked, err := q.QueryContext(ctx, b.sql.lockRuns, ids)
		if err != nil {
			return err
		}
		for locked.Next() {
		}
		if err := sqlval.CloseRows(locked); err != nil {
			return err
		}
		gone, err := returnedIDs(q.QueryContext(ctx, b.sql.deleteRuns, ids))
		if err != nil {
			return err
		}
		rows = len(gone)
		entries, err = sqlval.Affected(q.ExecContext(ctx, b.sql.unlinkRuns, gone))
		return err
	})
	return rows, entries, b.interpretError("delete runs from", err)
}

// inTx runs fn in q's transaction, or in a new one when q is the database.
func inTx(ctx context.Context, q driver.Querier, fn func(driver.Querier) error) error {
	db, ok := q.(*sql.DB)
	if !ok {
		return fn(q)
	}
	tx, err := db.BeginTx(ctx, &sql.TxOptions{Isolation: sql.LevelReadCommitted})
	if err != nil {
		return err
	}
	if err := fn(tx); err != nil {
		tx.Rollback()
		return err
	}
	return tx.Commit()
}
