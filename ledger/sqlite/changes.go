package sqlite

import (
	"context"
	"database/sql"
	"unicode/utf8"

	"github.com/mcp-changeset/changeset-go/ledger"
	"github.com/mcp-changeset/changeset-go/ledger/driver"
	"github.com/mcp-changeset/changeset-go/ledger/internal/sqlval"
)

// The statements of a change's row, built from sqlval.Changes: the one
// list of its columns, shared with the PostgreSQL backend.
var (
	getChangeSQL    = `SELECT ` + sqlval.Changes.Columns() + ` FROM changes WHERE id = ?`
	insertChangeSQL = `INSERT INTO changes (` + sqlval.Changes.Columns() + `) VALUES (` + placeholders(sqlval.Changes.Len()) + `)`
	// updateChangeSQL writes back every column except the fixed ones.
	updateChangeSQL = `UPDATE changes SET ` + sqlval.Changes.Assignments(question) + ` WHERE id = ? AND status = ?`
)

// InsertChange stores a new change. It fails if a change with the same ID
// exists or if c.RunID names no run.
func (b *Backend) InsertChange(ctx context.Context, q driver.Querier, c *ledger.Change) error {
	_, err := b.execPrepared(ctx, q, insertChangeSQL, sqlval.Changes.InsertArgs(c, dialect)...)
	return b.interpretError("insert change "+c.ID, err)
}

// GetChange reads the change with the given ID. A missing change is an
// error wrapping [ledger.ErrNotFound].
func (b *Backend) GetChange(ctx context.Context, q driver.Querier, id string) (*ledger.Change, error) {
	c, err := sqlval.Changes.Scan(b.queryRowPrepared(ctx, q, getChangeSQL, id))
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
	res, err := b.execPrepared(ctx, q, updateChangeSQL, sqlval.Changes.UpdateArgs(c, dialect, c.ID, string(from))...)
	return b.casResult(ctx, q, "update", "change", c.ID, string(from), res, err)
}

// ListChanges returns the changes that match f, newest first (by creation
// time, then by ID descending for changes created in the same
// microsecond), at most f.Limit of them, from just after f.Before.
func (b *Backend) ListChanges(ctx context.Context, q driver.Querier, f ledger.ChangeFilter) ([]*ledger.Change, error) {
	const op = "list changes in"
	common, err := commonText(ctx, q, f)
	if err != nil {
		return nil, b.interpretError(op, err)
	}
	query, args := listChangesQuery(f, common)
	rows, err := b.queryPrepared(ctx, q, query, args...)
	if err != nil {
		return nil, b.interpretError(op, err)
	}
	out, err := sqlval.ScanAll(rows, sqlval.Changes.Scan)
	return out, b.interpretError(op, err)
}

// listChangesQuery is the statement of ListChanges and its arguments.
// common says that f.Text is in at least commonTextMatches changes (see
// commonText).
func listChangesQuery(f ledger.ChangeFilter, common bool) (string, []any) {
	t := tables
	t.CommonText = common
	return sqlval.ChangeList(dialect, f, t, `SELECT `+sqlval.Changes.Columns()+` FROM changes`)
}

// commonTextMatches is how many matches in the full-text index make a
// search text common. A page of a rarer text reads its matches from the
// index, each one's row, and sorts them: at most this many rows. A page of
// a commoner one reads the list newest first and tests each change's text,
// as a plain scan does, until the page is full; with matches spread over
// the ledger, that is within about 50 × (changes ÷ commonTextMatches)
// changes, and within a few hundred for the common words of real ledgers.
const commonTextMatches = 4000

// countTextMatchesSQL counts the full-text matches of a phrase, up to a
// bound.
const countTextMatchesSQL = `SELECT count(*) FROM (SELECT rowid FROM changes_text WHERE changes_text MATCH ? LIMIT ?)`

// commonText reports whether a page of f should be read in the list's
// order (ChangeTables.CommonText): f has a limit and a text the index
// serves, found in at least commonTextMatches changes. Asking costs one
// walk of the index's matches, stopped at that count.
func commonText(ctx context.Context, q driver.Querier, f ledger.ChangeFilter) (bool, error) {
	if f.Limit <= 0 || utf8.RuneCountInString(f.Text) < ledger.MinIndexedText {
		return false, nil
	}
	var n int
	err := q.QueryRowContext(ctx, countTextMatchesSQL, sqlval.FTSPhrase(f.Text), commonTextMatches).Scan(&n)
	return n >= commonTextMatches, err
}

// tables are the names ChangeWhere needs.
var tables = sqlval.ChangeTables{Changes: "changes", Deps: "change_deps", Text: "changes_text", Actors: "change_actors"}

// countChangesQuery is the statement of CountChanges and its arguments.
func countChangesQuery(f ledger.ChangeFilter) (string, []any) {
	w := sqlval.ChangeWhere(dialect, f, tables, false)
	return `SELECT count(*) FROM changes` + w.String(), w.Args
}

// CountChanges returns how many changes match f, whatever its Limit and
// Before.
func (b *Backend) CountChanges(ctx context.Context, q driver.Querier, f ledger.ChangeFilter) (int, error) {
	query, args := countChangesQuery(f)
	var n int
	err := b.queryRowPrepared(ctx, q, query, args...).Scan(&n)
	return n, b.interpretError("count changes in", err)
}

// TallyChanges counts the changes that match f by action and status.
func (b *Backend) TallyChanges(ctx context.Context, q driver.Querier, f ledger.ChangeFilter) ([]ledger.Tally, error) {
	w := sqlval.ChangeWhere(dialect, f, tables, false)
	rows, err := q.QueryContext(ctx, `SELECT `+sqlval.TallyColumns+` FROM changes`+w.String()+sqlval.TallyGroup, w.Args...)
	if err != nil {
		return nil, b.interpretError("tally changes in", err)
	}
	out, err := sqlval.ScanTallies(rows)
	return out, b.interpretError("tally changes in", err)
}

// DeleteChanges deletes the changes with the given IDs whose status is
// still one of statuses, with their history entries, whose links it keeps
// (ledger_history_pruned), and reports how many changes and entries it
// deleted. IDs that match nothing are ignored.
func (b *Backend) DeleteChanges(ctx context.Context, q driver.Querier, ids []string, statuses []ledger.Status) (rows, entries int, err error) {
	if len(statuses) == 0 {
		return 0, 0, nil
	}
	for _, part := range chunks(ids) {
		args := appendStrings(nil, part)
		args = appendStrings(args, statuses)
		gone := `SELECT id FROM changes WHERE id IN (` + placeholders(len(part)) + `) AND status IN (` + placeholders(len(statuses)) + `)`
		k, err := b.keepLinks(ctx, q, `change_id IN (`+gone+`)`, args)
		if err != nil {
			return rows, entries, err
		}
		entries += k
		n, err := sqlval.Affected(q.ExecContext(ctx, `DELETE FROM changes WHERE id IN (`+gone+`)`, args...))
		if err != nil {
			return rows, entries, b.interpretError("delete changes from", err)
		}
		rows += n
	}
	return rows, entries, nil
}

// keepLinks copies the link (seq, hash) of every history entry where
// selects into ledger_history_pruned, before the entries are deleted, and
// returns how many it copied.
func (b *Backend) keepLinks(ctx context.Context, q driver.Querier, where string, args []any) (int, error) {
	n, err := sqlval.Affected(q.ExecContext(ctx, `INSERT INTO ledger_history_pruned (seq, hash)
		SELECT seq, coalesce(hash, zeroblob(32)) FROM ledger_history WHERE `+where, args...))
	return n, b.interpretError("keep the links of pruned history entries in", err)
}

// casResult interprets the result of a compare-and-set UPDATE of the row
// id of kind ("change", "run") in table kind+"s": one row written is
// success; none means the row is gone (ErrNotFound) or in another status
// (ErrConflict), which a second read tells apart.
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
	query := `SELECT status FROM changes WHERE id = ?`
	if kind == "run" {
		query = `SELECT status FROM runs WHERE id = ?`
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
