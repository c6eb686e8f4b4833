package sqlite

import (
	"context"
	"database/sql"
	"errors"

	"github.com/mcp-changeset/changeset-go/ledger"
	"github.com/mcp-changeset/changeset-go/ledger/driver"
	"github.com/mcp-changeset/changeset-go/ledger/internal/sqlval"
)

// finishedIndexTerm is the WHERE term of the partial index
// changes_finished (migrations 010, 013 and 017), word for word: SQLite uses a partial
// index only for a query whose WHERE clause contains the index's own
// term.
const finishedIndexTerm = `status IN ('expired', 'apply_failed', 'applied', 'undone', 'undo_failed', 'declined')`

// pruneWhere is the part of PrunableChanges' WHERE clause that decides
// whether a change may go at all, whatever its age: its status is one of
// f.Statuses, and it is not an applied change still within its undo
// window.
func pruneWhere(f ledger.PruneFilter) (string, []any) {
	args := appendStrings(nil, f.Statuses)
	args = append(args, f.Now.UnixMicro())
	return `status IN (` + placeholders(len(f.Statuses)) + `)
		AND NOT (status = 'applied' AND undoable = 1 AND (undo_expires_at IS NULL OR undo_expires_at > ?))`, args
}

// keepQuery is the statement that finds the Keep-th newest change f
// allows, walking the index of creation times from the newest, and its
// arguments.
func keepQuery(f ledger.PruneFilter) (string, []any) {
	may, args := pruneWhere(f)
	return `SELECT created_at, id FROM changes INDEXED BY changes_created WHERE ` + may +
		` ORDER BY created_at DESC, id DESC LIMIT 1 OFFSET ?`, append(args, f.Keep-1)
}

// pickQuery is the statement that selects the changes f allows, last
// updated before f.UpdatedBefore, through the index changes_finished,
// and its arguments; with kept, only those older than a change whose
// creation time and ID are two more arguments.
func pickQuery(f ledger.PruneFilter, kept bool) (string, []any) {
	may, args := pruneWhere(f)
	query := `SELECT id, coalesce(run_id, '') FROM changes INDEXED BY changes_finished WHERE ` + finishedIndexTerm + ` AND ` + may + ` AND updated_at < ?`
	args = append(args, sqlval.CeilMicro(f.UpdatedBefore))
	if kept {
		query += ` AND (created_at, id) < (?, ?)`
	}
	return query + ` ORDER BY created_at DESC, id DESC`, args
}

// PrunableChanges returns the changes f selects, newest first, reading
// the index changes_finished and, of each selected change, its ID and
// run. With f.Keep it first finds the Keep-th newest change that may go
// (keepQuery): only the changes older than that one are selected.
func (b *Backend) PrunableChanges(ctx context.Context, q driver.Querier, f ledger.PruneFilter) ([]ledger.PrunableChange, error) {
	const op = "find the changes to prune in"
	if len(f.Statuses) == 0 {
		return nil, nil
	}
	query, args := pickQuery(f, f.Keep > 0)
	if f.Keep > 0 {
		kq, kargs := keepQuery(f)
		var created int64
		var id string
		err := q.QueryRowContext(ctx, kq, kargs...).Scan(&created, &id)
		if errors.Is(err, sql.ErrNoRows) {
			return nil, nil // no more than Keep may go: all are kept
		}
		if err != nil {
			return nil, b.interpretError(op, err)
		}
		args = append(args, created, id)
	}
	rows, err := q.QueryContext(ctx, query, args...)
	if err != nil {
		return nil, b.interpretError(op, err)
	}
	out, err := sqlval.ScanAll(rows, func(s sqlval.Scanner) (ledger.PrunableChange, error) {
		var c ledger.PrunableChange
		err := s.Scan(&c.ID, &c.RunID)
		return c, err
	})
	return out, b.interpretError(op, err)
}

// PrunableRuns returns the runs in one of f.RunStatuses last updated
// before f.UpdatedBefore, newest first, each with how many changes it
// holds (counted in the index changes_run_created_id).
func (b *Backend) PrunableRuns(ctx context.Context, q driver.Querier, f ledger.PruneFilter) ([]ledger.PrunableRun, error) {
	const op = "find the runs to prune in"
	if len(f.RunStatuses) == 0 {
		return nil, nil
	}
	args := appendStrings(nil, f.RunStatuses)
	args = append(args, sqlval.CeilMicro(f.UpdatedBefore))
	rows, err := q.QueryContext(ctx, `SELECT r.id, (SELECT count(*) FROM changes AS c WHERE c.run_id = r.id)
		FROM runs AS r WHERE r.status IN (`+placeholders(len(f.RunStatuses))+`) AND r.updated_at < ?
		ORDER BY r.created_at DESC, r.id DESC`, args...)
	if err != nil {
		return nil, b.interpretError(op, err)
	}
	out, err := sqlval.ScanAll(rows, func(s sqlval.Scanner) (ledger.PrunableRun, error) {
		var r ledger.PrunableRun
		err := s.Scan(&r.ID, &r.Changes)
		return r, err
	})
	return out, b.interpretError(op, err)
}
