package sqlite

import (
	"context"

	"github.com/mcp-changeset/changeset-go/ledger"
	"github.com/mcp-changeset/changeset-go/ledger/driver"
	"github.com/mcp-changeset/changeset-go/ledger/internal/sqlval"
)

// The statements of a run's row, built from sqlval.Runs.
var (
	insertRunSQL = `INSERT INTO runs (` + sqlval.Runs.Columns() + `) VALUES (` + placeholders(sqlval.Runs.Len()) + `)`
	getRunSQL    = `SELECT ` + sqlval.Runs.Columns() + ` FROM runs WHERE id = ?`
	// updateRunSQL writes back every column except the fixed ones.
	updateRunSQL = `UPDATE runs SET ` + sqlval.Runs.Assignments(question) + ` WHERE id = ? AND status = ?`
)

// InsertRun stores a new run. It fails if a run with the same ID exists.
func (b *Backend) InsertRun(ctx context.Context, q driver.Querier, r *ledger.Run) error {
	_, err := b.execPrepared(ctx, q, insertRunSQL, sqlval.Runs.InsertArgs(r, dialect)...)
	return b.interpretError("insert run "+r.ID, err)
}

// GetRun reads the run with the given ID. A missing run is an error
// wrapping [ledger.ErrNotFound].
func (b *Backend) GetRun(ctx context.Context, q driver.Querier, id string) (*ledger.Run, error) {
	r, err := sqlval.Runs.Scan(b.queryRowPrepared(ctx, q, getRunSQL, id))
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
	res, err := b.execPrepared(ctx, q, updateRunSQL, sqlval.Runs.UpdateArgs(r, dialect, r.ID, string(from))...)
	return b.casResult(ctx, q, "update", "run", r.ID, string(from), res, err)
}

// ListRuns returns the runs that match f, newest first (by creation time,
// then by ID descending).
func (b *Backend) ListRuns(ctx context.Context, q driver.Querier, f ledger.RunFilter) ([]*ledger.Run, error) {
	query, args := listRunsQuery(f)
	const op = "list runs in"
	rows, err := b.queryPrepared(ctx, q, query, args...)
	if err != nil {
		return nil, b.interpretError(op, err)
	}
	out, err := sqlval.ScanAll(rows, sqlval.Runs.Scan)
	return out, b.interpretError(op, err)
}

// listRunsQuery is the statement of ListRuns and its arguments.
func listRunsQuery(f ledger.RunFilter) (string, []any) {
	w := sqlval.RunWhere(dialect, f)
	return `SELECT ` + sqlval.Runs.Columns() + ` FROM runs` + w.String() + sqlval.NewestFirst + w.Limit(f.Limit), w.Args
}

// DeleteRuns deletes the runs with the given IDs that no change refers to
// any more, with their history entries, whose links it keeps, and reports
// how many runs and entries it deleted.
func (b *Backend) DeleteRuns(ctx context.Context, q driver.Querier, ids []string) (rows, entries int, err error) {
	for _, part := range chunks(ids) {
		args := appendStrings(nil, part)
		gone := `SELECT id FROM runs WHERE id IN (` + placeholders(len(part)) + `)
			AND NOT EXISTS (SELECT 1 FROM changes WHERE changes.run_id = runs.id)`
		k, err := b.keepLinks(ctx, q, `run_id IN (`+gone+`)`, args)
		if err != nil {
			return rows, entries, err
		}
		entries += k
		n, err := sqlval.Affected(q.ExecContext(ctx, `DELETE FROM runs WHERE id IN (`+gone+`)`, args...))
		if err != nil {
			return rows, entries, b.interpretError("delete runs from", err)
		}
		rows += n
	}
	return rows, entries, nil
}
