package postgres

import (
	"context"
	"database/sql"
	"errors"
	"strings"

	"github.com/jackc/pgx/v5"
	"github.com/mcp-changeset/changeset-go/ledger"
	"github.com/mcp-changeset/changeset-go/ledger/driver"
	"github.com/mcp-changeset/changeset-go/ledger/internal/sqlval"
)

var _ driver.Compactor = (*Backend)(nil)

// table returns the quoted, schema-qualified name of one of the ledger's
// tables.
func (b *Backend) table(name string) string { return pgx.Identifier{b.schema, name}.Sanitize() }

// prunableWhere is the condition under which a change may go at all,
// whatever its age: its status is one of $1, and it is not an applied
// change still within its undo window at $2.
const prunableWhere = `status = ANY($1) AND NOT (status = 'applied' AND undoable AND (undo_expires_at IS NULL OR undo_expires_at > $2))`

// PrunableChanges returns the changes f selects, newest first, reading of
// each its ID and run. The age and status are found through the index
// changes_status_updated. With f.Keep it first finds the Keep-th newest
// change that may go, walking the index changes_created from the newest:
// only the changes older than that one are selected.
func (b *Backend) PrunableChanges(ctx context.Context, q driver.Querier, f ledger.PruneFilter) ([]ledger.PrunableChange, error) {
	const op = "find the changes to prune in"
	if len(f.Statuses) == 0 {
		return nil, nil
	}
	changes := b.table("changes")
	args := []any{stringSlice(f.Statuses), f.Now.UnixMicro()}
	query := `SELECT id, coalesce(run_id, '') FROM ` + changes + ` WHERE ` + prunableWhere + ` AND updated_at < $3`
	if f.Keep > 0 {
		var created int64
		var id string
		err := q.QueryRowContext(ctx, `SELECT created_at, id FROM `+changes+` WHERE `+prunableWhere+`
			ORDER BY created_at DESC, id DESC LIMIT 1 OFFSET $3`, append(args, f.Keep-1)...).Scan(&created, &id)
		if errors.Is(err, sql.ErrNoRows) {
			return nil, nil // no more than Keep may go: all are kept
		}
		if err != nil {
			return nil, b.interpretError(op, err)
		}
		query += ` AND (created_at, id) < ($4, $5)`
		args = append(args, sqlval.CeilMicro(f.UpdatedBefore), created, id)
	} else {
		args = append(args, sqlval.CeilMicro(f.UpdatedBefore))
	}
	rows, err := q.QueryContext(ctx, query+` ORDER BY created_at DESC, id DESC`, args...)
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
	rows, err := q.QueryContext(ctx, `SELECT r.id, (SELECT count(*) FROM `+b.table("changes")+` AS c WHERE c.run_id = r.id)
		FROM `+b.table("runs")+` AS r WHERE r.status = ANY($1) AND r.updated_at < $2
		ORDER BY r.created_at DESC, r.id DESC`, stringSlice(f.RunStatuses), sqlval.CeilMicro(f.UpdatedBefore))
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

// PostgreSQL keeps the space of deleted rows in the tables' files: VACUUM
// (which autovacuum runs by itself once enough rows are dead) makes it
// reusable for new rows, and gives back to the disk only empty pages at
// the end of a table. Only VACUUM FULL, which rewrites each table under
// an ACCESS EXCLUSIVE lock (no reads, no writes) for as long as it takes,
// shrinks the files. docs/reliability.md ("Disk space") gives the
// measured figures.

// Yield does nothing: PostgreSQL's writers lock rows, not the database,
// and wait in line for a lock.
func (b *Backend) Yield(ctx context.Context) error { return nil }

// Size returns the size on disk of the ledger's tables, with their
// indexes and TOAST.
func (b *Backend) Size(ctx context.Context) (int64, error) {
	var size int64
	err := b.db.QueryRowContext(ctx, `SELECT coalesce(sum(pg_total_relation_size(c.oid)), 0)::bigint
		FROM pg_class c JOIN pg_namespace n ON n.oid = c.relnamespace
		WHERE n.nspname = $1 AND c.relname = ANY($2) AND c.relkind IN ('r', 'p')`, b.schema, ownTables).Scan(&size)
	return size, b.interpretError("size", err)
}

// Reclaim runs a plain VACUUM on the ledger's tables: it makes the space
// of the deleted rows reusable at once, rather than when autovacuum next
// visits, without blocking reads or writes, and gives empty pages at the
// end of each table back to the disk. It reports false: the rest of the
// space stays in the files until Vacuum. A role that does not own the
// tables may not vacuum them; PostgreSQL then skips them with a warning
// and autovacuum does the work.
func (b *Backend) Reclaim(ctx context.Context) (bool, error) {
	if b.readOnly {
		return false, &ledger.Error{Op: "reclaim the free space of", Location: b.location, Err: errOpenedReadOnly}
	}
	_, err := b.db.ExecContext(ctx, "VACUUM "+b.tableList())
	return false, b.interpretError("reclaim the free space of", err)
}

// Vacuum runs VACUUM (FULL, ANALYZE) on the ledger's tables, which
// rewrites each of them and its indexes, under an ACCESS EXCLUSIVE lock:
// nothing reads or writes a table while it is rewritten. Only the tables'
// owner may run it.
func (b *Backend) Vacuum(ctx context.Context) error {
	if b.readOnly {
		return &ledger.Error{Op: "vacuum", Location: b.location, Err: errOpenedReadOnly}
	}
	_, err := b.db.ExecContext(ctx, "VACUUM (FULL, ANALYZE) "+b.tableList())
	return b.interpretError("vacuum", err)
}

// tableList is the ledger's tables, quoted, for VACUUM.
func (b *Backend) tableList() string {
	names := make([]string, len(ownTables))
	for i, t := range ownTables {
		names[i] = b.table(t)
	}
	return strings.Join(names, ", ")
}
