package postgres

import (
	"context"
	"database/sql"

	"github.com/mcp-changeset/changeset-go/ledger"
	"github.com/mcp-changeset/changeset-go/ledger/driver"
	"github.com/mcp-changeset/changeset-go/ledger/internal/sqlval"
)

// InsertChange stores a new change. It fails if a change with the same ID
// exists or if c.RunID names no run.
func (b *Backend) InsertChange(ctx context.Context, q driver.Querier, c *ledger.Change) error {
	_, err := q.ExecContext(ctx, b.sql.insertChange, sqlval.Changes.InsertArgs(c, dialect)...)
	return b.interpretError("insert change "+c.ID, err)
}

// GetChange reads the change with the given ID. Inside a transaction (q a
// *sql.Tx, from BeginWrite) it locks the row until the transaction ends
// (SELECT … FOR UPDATE): a second transaction reading the same change
// waits, then sees what the first one committed. A missing change is an
// error wrapping [ledger.ErrNotFound].
func (b *Backend) GetChange(ctx context.Context, q driver.Querier, id string) (*ledger.Change, error) {
	query := b.sql.selectChanges + ` WHERE id = $1`
	if b.locks(q) {
		query += ` FOR UPDATE`
	}
	c, err := sqlval.Changes.Scan(q.QueryRowContext(ctx, query, id))
	if err != nil {
		return nil, b.interpretError("find change "+id, err)
	}
	return c, nil
}

// UpdateChange writes c back if the stored change's status is still from.
// It writes every column except those fixed at preview (ID, Action,
// ScopeHash, RunID and CreatedAt). If the status has moved on it fails with
// an error wrapping [ledger.ErrConflict], and if the change is gone with
// one wrapping [ledger.ErrNotFound].
func (b *Backend) UpdateChange(ctx context.Context, q driver.Querier, c *ledger.Change, from ledger.Status) error {
	res, err := q.ExecContext(ctx, b.sql.updateChange, sqlval.Changes.UpdateArgs(c, dialect, c.ID, string(from))...)
	return b.casResult(ctx, q, "update", "change", c.ID, string(from), res, err)
}

// ListChanges returns the changes that match f, newest first (by creation
// time, then by ID descending, byte by byte, for changes created in the
// same microsecond), at most f.Limit of them, from just after f.Before.
// It locks nothing.
func (b *Backend) ListChanges(ctx context.Context, q driver.Querier, f ledger.ChangeFilter) ([]*ledger.Change, error) {
	query, args := listChangesQuery(b, f)
	const op = "list changes in"
	rows, err := q.QueryContext(ctx, query, args...)
	if err != nil {
		return nil, b.interpretError(op, err)
	}
	out, err := sqlval.ScanAll(rows, sqlval.Changes.Scan)
	return out, b.interpretError(op, err)
}

// listChangesQuery is the statement of ListChanges and its arguments.
func listChangesQuery(b *Backend, f ledger.ChangeFilter) (string, []any) {
	return sqlval.ChangeList(dialect, f, b.sql.tables, b.sql.selectChanges)
}

// CountChanges returns how many changes match f, whatever its Limit and
// Before. It locks nothing.
func (b *Backend) CountChanges(ctx context.Context, q driver.Querier, f ledger.ChangeFilter) (int, error) {
	w := sqlval.ChangeWhere(dialect, f, b.sql.tables, false)
	var n int
	err := q.QueryRowContext(ctx, b.sql.countChanges+w.String(), w.Args...).Scan(&n)
	return n, b.interpretError("count changes in", err)
}

// TallyChanges counts the changes that match f by action and status.
func (b *Backend) TallyChanges(ctx context.Context, q driver.Querier, f ledger.ChangeFilter) ([]ledger.Tally, error) {
	w := sqlval.ChangeWhere(dialect, f, b.sql.tables, false)
	rows, err := q.QueryContext(ctx, b.sql.tallyChanges+w.String()+sqlval.TallyGroup, w.Args...)
	if err != nil {
		return nil, b.interpretError("tally changes in", err)
	}
	out, err := sqlval.ScanTallies(rows)
	return out, b.interpretError("tally changes in", err)
}

// DeleteChanges deletes the changes with the given IDs whose status is
// still one of statuses, with their history entries, whose links it keeps
// (ledger_history_pruned), and reports how many changes and entries it
// deleted. IDs that match nothing are ignored. A row that another
// transaction is changing is waited for and judged by the status it is
// left in.
func (b *Backend) DeleteChanges(ctx context.Context, q driver.Querier, ids []string, statuses []ledger.Status) (rows, entries int, err error) {
	if len(ids) == 0 || len(statuses) == 0 {
		return 0, 0, nil
	}
	err = inTx(ctx, q, func(q driver.Querier) error {
		gone, err := returnedIDs(q.QueryContext(ctx, b.sql.deleteChanges, ids, stringSlice(statuses)))
		if err != nil {
			return err
		}
		rows = len(gone)
		entries, err = sqlval.Affected(q.ExecContext(ctx, b.sql.unlinkChanges, gone))
		return err
	})
	return rows, entries, b.interpretError("delete changes from", err)
}

// returnedIDs reads the ids a statement's RETURNING id gave.
func returnedIDs(rows *sql.Rows, err error) ([]string, error) {
	if err != nil {
		return nil, err
	}
	return sqlval.ScanAll(rows, func(s sqlval.Scanner) (string, error) {
		var id string
		err := s.Scan(&id)
		return id, err
	})
}

// casResult interprets the result of a compare-and-set UPDATE of the row
// id of kind ("change", "run"): one row written is success; none means the
// row is gone (ErrNotFound) or in another status (ErrConflict), which a
// second read tells apart.
func (b *Backend) casResult(ctx context.Context, q driver.Querier, op, kind, id, from string, res sql.Result, err error) error {
	if err != nil {
		return b.interpretError(op+" "+kind+" "+id, err)
	}
	n, err := res.RowsAffected()
	if err != nil {
		return b.interpretError(op+" "+kind+" "+id, err)
	}
	if n == 1 {
		return nil
	}
	query := b.sql.changeStatus
	if kind == "run" {
		query = b.sql.runStatus
	}
	var now string
	switch err := q.QueryRowContext(ctx, query, id).Scan(&now); {
	case err == sql.ErrNoRows:
		return rowError(op, kind, id, ledger.ErrNotFound)
	case err != nil:
		return b.interpretError(op+" "+kind+" "+id, err)
	}
	return rowError(op, kind, id, conflict(from, now))
}
