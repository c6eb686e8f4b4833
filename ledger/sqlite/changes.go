package sqlite

import (
	"context"
	"database/sql"
	"strings"

	"github.com/mcp-changeset/changeset-go/ledger"
	"github.com/mcp-changeset/changeset-go/ledger/internal/sqlval"
)

// changeColumns are the columns of the changes table in the order
// changeArgs and scanChange use.
const changeColumns = `id, action, status, scope_hash, run_id, resource,
	payload, payload_hash, diff, summary, warnings, state_hash,
	before_state, after_state, confirm_hash, undo_hash, undoable, transactional,
	result, error_type, error, note, applied_by, undone_by,
	created_at, updated_at, expires_at, applied_at, undo_expires_at, undone_at,
	redact_fields, redacted_at`

var getChangeSQL = `SELECT ` + changeColumns + ` FROM changes WHERE id = ?`

var insertChangeSQL = `INSERT INTO changes (` + changeColumns + `) VALUES (` + placeholders(32) + `)`

// updateChangeSQL writes back every column except the ones fixed when the
// change was previewed: id, action, scope_hash, run_id and created_at.
const updateChangeSQL = `UPDATE changes SET
	status = ?, resource = ?, payload = ?, payload_hash = ?, diff = ?,
	summary = ?, warnings = ?, state_hash = ?, before_state = ?, after_state = ?,
	confirm_hash = ?, undo_hash = ?, undoable = ?, transactional = ?, result = ?,
	error_type = ?, error = ?, note = ?, applied_by = ?, undone_by = ?,
	updated_at = ?, expires_at = ?, applied_at = ?, undo_expires_at = ?, undone_at = ?,
	redact_fields = ?, redacted_at = ?
	WHERE id = ? AND status = ?`

// InsertChange stores a new change. It fails if a change with the same ID
// exists or if c.RunID names no run.
func (b *Backend) InsertChange(ctx context.Context, q ledger.Querier, c *ledger.Change) error {
	op := "insert change " + c.ID
	warnings, err := sqlval.StringsArg(c.Warnings)
	if err != nil {
		return b.interpretError(op, err)
	}
	redact, err := sqlval.StringsArg(c.RedactFields)
	if err != nil {
		return b.interpretError(op, err)
	}
	_, err = b.execPrepared(ctx, q, insertChangeSQL,
		c.ID, c.Action, string(c.Status), c.ScopeHash, sqlval.OptString(c.RunID), c.Resource,
		sqlval.JSONArg(c.Payload), c.PayloadHash, sqlval.JSONArg(c.Diff), c.Summary, warnings, c.StateHash,
		sqlval.JSONArg(c.Before), sqlval.JSONArg(c.After), c.ConfirmHash, c.UndoHash, boolArg(c.Undoable), boolArg(c.Transactional),
		sqlval.JSONArg(c.Result), c.ErrorType, c.Error, c.Note, c.AppliedBy, c.UndoneBy,
		sqlval.TimeArg(c.CreatedAt), sqlval.TimeArg(c.UpdatedAt), sqlval.TimeArg(c.ExpiresAt), sqlval.TimeArg(c.AppliedAt), sqlval.TimeArg(c.UndoExpiresAt), sqlval.TimeArg(c.UndoneAt),
		redact, sqlval.TimeArg(c.RedactedAt),
	)
	return b.interpretError(op, err)
}

// GetChange reads the change with the given ID. A missing change is an
// error wrapping [ledger.ErrNotFound].
func (b *Backend) GetChange(ctx context.Context, q ledger.Querier, id string) (*ledger.Change, error) {
	row := b.queryRowPrepared(ctx, q, getChangeSQL, id)
	c, err := scanChange(row)
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
func (b *Backend) UpdateChange(ctx context.Context, q ledger.Querier, c *ledger.Change, from ledger.Status) error {
	const op = "update"
	warnings, err := sqlval.StringsArg(c.Warnings)
	if err != nil {
		return b.interpretError(op+" change "+c.ID, err)
	}
	redact, err := sqlval.StringsArg(c.RedactFields)
	if err != nil {
		return b.interpretError(op+" change "+c.ID, err)
	}
	res, err := b.execPrepared(ctx, q, updateChangeSQL,
		string(c.Status), c.Resource, sqlval.JSONArg(c.Payload), c.PayloadHash, sqlval.JSONArg(c.Diff),
		c.Summary, warnings, c.StateHash, sqlval.JSONArg(c.Before), sqlval.JSONArg(c.After),
		c.ConfirmHash, c.UndoHash, boolArg(c.Undoable), boolArg(c.Transactional), sqlval.JSONArg(c.Result),
		c.ErrorType, c.Error, c.Note, c.AppliedBy, c.UndoneBy,
		sqlval.TimeArg(c.UpdatedAt), sqlval.TimeArg(c.ExpiresAt), sqlval.TimeArg(c.AppliedAt), sqlval.TimeArg(c.UndoExpiresAt), sqlval.TimeArg(c.UndoneAt),
		redact, sqlval.TimeArg(c.RedactedAt),
		c.ID, string(from),
	)
	return b.casResult(ctx, q, op, "change", c.ID, string(from), res, err)
}

// ListChanges returns the changes that match f, newest first (by creation
// time, then by ID descending for changes created in the same
// microsecond).
func (b *Backend) ListChanges(ctx context.Context, q ledger.Querier, f ledger.ChangeFilter) ([]*ledger.Change, error) {
	var where []string
	var args []any
	if len(f.Statuses) > 0 {
		where = append(where, "status IN ("+placeholders(len(f.Statuses))+")")
		args = appendStrings(args, f.Statuses)
	}
	if f.RunID != "" {
		where = append(where, "run_id = ?")
		args = append(args, f.RunID)
	}
	if !f.UpdatedBefore.IsZero() {
		where = append(where, "updated_at < ?")
		args = append(args, sqlval.CeilMicro(f.UpdatedBefore))
	}
	query := `SELECT ` + changeColumns + ` FROM changes`
	if len(where) > 0 {
		query += " WHERE " + strings.Join(where, " AND ")
	}
	query += " ORDER BY created_at DESC, id DESC"
	if f.Limit > 0 {
		query += " LIMIT ?"
		args = append(args, f.Limit)
	}
	const op = "list changes in"
	rows, err := q.QueryContext(ctx, query, args...)
	if err != nil {
		return nil, b.interpretError(op, err)
	}
	out, err := sqlval.ScanAll(rows, scanChange)
	return out, b.interpretError(op, err)
}

// DeleteChanges deletes the changes with the given IDs whose status is
// still one of statuses, and reports how many it deleted. IDs that match
// nothing are ignored.
func (b *Backend) DeleteChanges(ctx context.Context, q ledger.Querier, ids []string, statuses []ledger.Status) (int, error) {
	if len(statuses) == 0 {
		return 0, nil
	}
	n := 0
	for _, part := range chunks(ids) {
		args := appendStrings(nil, part)
		args = appendStrings(args, statuses)
		res, err := q.ExecContext(ctx, `DELETE FROM changes WHERE id IN (`+placeholders(len(part))+
			`) AND status IN (`+placeholders(len(statuses))+`)`, args...)
		if err != nil {
			return n, b.interpretError("delete changes from", err)
		}
		k, err := res.RowsAffected()
		if err != nil {
			return n, b.interpretError("delete changes from", err)
		}
		n += int(k)
	}
	return n, nil
}

// casResult interprets the result of a compare-and-set UPDATE of the row
// id of kind ("change", "run") in table kind+"s": one row written is
// success; none means the row is gone (ErrNotFound) or in another status
// (ErrConflict), which a second read tells apart.
func (b *Backend) casResult(ctx context.Context, q ledger.Querier, op, kind, id, from string, res sql.Result, err error) error {
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

// scanChange reads one row of changeColumns.
func scanChange(s sqlval.Scanner) (*ledger.Change, error) {
	var (
		c                                           ledger.Change
		status                                      string
		runID, payload, diff, warnings              sql.NullString
		before, after, result                       sql.NullString
		undoable, transactional                     int64
		created, updated, expires, applied, undoExp sql.NullInt64
		undone, redactedAt                          sql.NullInt64
		redact                                      sql.NullString
	)
	err := s.Scan(
		&c.ID, &c.Action, &status, &c.ScopeHash, &runID, &c.Resource,
		&payload, &c.PayloadHash, &diff, &c.Summary, &warnings, &c.StateHash,
		&before, &after, &c.ConfirmHash, &c.UndoHash, &undoable, &transactional,
		&result, &c.ErrorType, &c.Error, &c.Note, &c.AppliedBy, &c.UndoneBy,
		&created, &updated, &expires, &applied, &undoExp, &undone,
		&redact, &redactedAt,
	)
	if err != nil {
		return nil, err
	}
	c.Status = ledger.Status(status)
	c.RunID = runID.String
	c.Payload, c.Diff = sqlval.JSONFrom(payload), sqlval.JSONFrom(diff)
	c.Before, c.After, c.Result = sqlval.JSONFrom(before), sqlval.JSONFrom(after), sqlval.JSONFrom(result)
	if c.Warnings, err = sqlval.StringsFrom(warnings); err != nil {
		return nil, err
	}
	c.Undoable, c.Transactional = undoable != 0, transactional != 0
	c.CreatedAt, c.UpdatedAt, c.ExpiresAt = sqlval.TimeFrom(created), sqlval.TimeFrom(updated), sqlval.TimeFrom(expires)
	c.AppliedAt, c.UndoExpiresAt, c.UndoneAt = sqlval.TimeFrom(applied), sqlval.TimeFrom(undoExp), sqlval.TimeFrom(undone)
	if c.RedactFields, err = sqlval.StringsFrom(redact); err != nil {
		return nil, err
	}
	c.RedactedAt = sqlval.TimeFrom(redactedAt)
	return &c, nil
}

// CountChanges returns how many changes match f.
// TODO(wave2): implemented by the ledger layer's work; placeholder.
func (b *Backend) CountChanges(ctx context.Context, q ledger.Querier, f ledger.ChangeFilter) (int, error) {
	return 0, b.interpretError("count changes in", errNotYet)
}
