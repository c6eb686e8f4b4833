package postgres

import (
	"context"
	"database/sql"
	"strings"

	"github.com/mcp-changeset/changeset-go/ledger"
	"github.com/mcp-changeset/changeset-go/ledger/internal/sqlval"
)

// changeColumns are the columns of the changes table in the order
// InsertChange and scanChange use.
const changeColumns = `id, action, status, scope_hash, run_id, resource,
	payload, payload_hash, diff, summary, warnings, state_hash,
	before_state, after_state, confirm_hash, undo_hash, undoable, transactional,
	result, error_type, error, note, applied_by, undone_by,
	created_at, updated_at, expires_at, applied_at, undo_expires_at, undone_at,
	redact_fields, redacted_at`

// updateChangeSQL writes back every column except the ones fixed when the
// change was previewed: id, action, scope_hash, run_id and created_at.
const updateChangeSQL = `UPDATE {changes} SET
	status = $1, resource = $2, payload = $3, payload_hash = $4, diff = $5,
	summary = $6, warnings = $7, state_hash = $8, before_state = $9, after_state = $10,
	confirm_hash = $11, undo_hash = $12, undoable = $13, transactional = $14, result = $15,
	error_type = $16, error = $17, note = $18, applied_by = $19, undone_by = $20,
	updated_at = $21, expires_at = $22, applied_at = $23, undo_expires_at = $24, undone_at = $25,
	redact_fields = $26, redacted_at = $27
	WHERE id = $28 AND status = $29`

// InsertChange stores a new change. It fails if a change with the same ID
// exists or if c.RunID names no run.
func (b *Backend) InsertChange(ctx context.Context, q ledger.Querier, c *ledger.Change) error {
	op := "insert change " + c.ID
	warnings, redact, err := listArgs(c)
	if err != nil {
		return b.interpretError(op, err)
	}
	_, err = q.ExecContext(ctx, b.sql.insertChange,
		c.ID, c.Action, string(c.Status), c.ScopeHash, sqlval.OptString(c.RunID), c.Resource,
		sqlval.JSONArg(c.Payload), c.PayloadHash, sqlval.JSONArg(c.Diff), c.Summary, warnings, c.StateHash,
		sqlval.JSONArg(c.Before), sqlval.JSONArg(c.After), c.ConfirmHash, c.UndoHash, c.Undoable, c.Transactional,
		sqlval.JSONArg(c.Result), c.ErrorType, c.Error, c.Note, c.AppliedBy, c.UndoneBy,
		sqlval.TimeArg(c.CreatedAt), sqlval.TimeArg(c.UpdatedAt), sqlval.TimeArg(c.ExpiresAt), sqlval.TimeArg(c.AppliedAt), sqlval.TimeArg(c.UndoExpiresAt), sqlval.TimeArg(c.UndoneAt),
		redact, sqlval.TimeArg(c.RedactedAt),
	)
	return b.interpretError(op, err)
}

// GetChange reads the change with the given ID. Inside a transaction (q a
// *sql.Tx, from BeginWrite) it locks the row until the transaction ends
// (SELECT … FOR UPDATE): a second transaction reading the same change
// waits, then sees what the first one committed. A missing change is an
// error wrapping [ledger.ErrNotFound].
func (b *Backend) GetChange(ctx context.Context, q ledger.Querier, id string) (*ledger.Change, error) {
	query := b.sql.selectChanges + ` WHERE id = $1`
	if _, inTx := q.(*sql.Tx); inTx {
		query += ` FOR UPDATE`
	}
	c, err := scanChange(q.QueryRowContext(ctx, query, id))
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
	warnings, redact, err := listArgs(c)
	if err != nil {
		return b.interpretError(op+" change "+c.ID, err)
	}
	res, err := q.ExecContext(ctx, b.sql.updateChange,
		string(c.Status), c.Resource, sqlval.JSONArg(c.Payload), c.PayloadHash, sqlval.JSONArg(c.Diff),
		c.Summary, warnings, c.StateHash, sqlval.JSONArg(c.Before), sqlval.JSONArg(c.After),
		c.ConfirmHash, c.UndoHash, c.Undoable, c.Transactional, sqlval.JSONArg(c.Result),
		c.ErrorType, c.Error, c.Note, c.AppliedBy, c.UndoneBy,
		sqlval.TimeArg(c.UpdatedAt), sqlval.TimeArg(c.ExpiresAt), sqlval.TimeArg(c.AppliedAt), sqlval.TimeArg(c.UndoExpiresAt), sqlval.TimeArg(c.UndoneAt),
		redact, sqlval.TimeArg(c.RedactedAt),
		c.ID, string(from),
	)
	return b.casResult(ctx, q, op, "change", c.ID, string(from), res, err)
}

// ListChanges returns the changes that match f, newest first (by creation
// time, then by ID descending, byte by byte, for changes created in the
// same microsecond). It locks nothing.
func (b *Backend) ListChanges(ctx context.Context, q ledger.Querier, f ledger.ChangeFilter) ([]*ledger.Change, error) {
	var a args
	var where []string
	if len(f.Statuses) > 0 {
		where = append(where, "status = ANY("+a.add(stringSlice(f.Statuses))+")")
	}
	if f.RunID != "" {
		where = append(where, "run_id = "+a.add(f.RunID))
	}
	if !f.UpdatedBefore.IsZero() {
		where = append(where, "updated_at < "+a.add(sqlval.CeilMicro(f.UpdatedBefore)))
	}
	query := b.sql.selectChanges
	if len(where) > 0 {
		query += " WHERE " + strings.Join(where, " AND ")
	}
	query += " ORDER BY created_at DESC, id DESC"
	if f.Limit > 0 {
		query += " LIMIT " + a.add(f.Limit)
	}
	const op = "list changes in"
	rows, err := q.QueryContext(ctx, query, a...)
	if err != nil {
		return nil, b.interpretError(op, err)
	}
	out, err := sqlval.ScanAll(rows, scanChange)
	return out, b.interpretError(op, err)
}

// DeleteChanges deletes the changes with the given IDs whose status is
// still one of statuses, and reports how many it deleted. IDs that match
// nothing are ignored. A row that another transaction is changing is
// waited for and judged by the status it is left in.
func (b *Backend) DeleteChanges(ctx context.Context, q ledger.Querier, ids []string, statuses []ledger.Status) (int, error) {
	if len(ids) == 0 || len(statuses) == 0 {
		return 0, nil
	}
	const op = "delete changes from"
	res, err := q.ExecContext(ctx, b.sql.deleteChanges, ids, stringSlice(statuses))
	if err != nil {
		return 0, b.interpretError(op, err)
	}
	n, err := res.RowsAffected()
	if err != nil {
		return 0, b.interpretError(op, err)
	}
	return int(n), nil
}

// casResult interprets the result of a compare-and-set UPDATE of the row
// id of kind ("change", "run"): one row written is success; none means the
// row is gone (ErrNotFound) or in another status (ErrConflict), which a
// second read tells apart.
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

// listArgs encodes the two string lists of c, Warnings and RedactFields.
func listArgs(c *ledger.Change) (warnings, redact any, err error) {
	if warnings, err = sqlval.StringsArg(c.Warnings); err != nil {
		return nil, nil, err
	}
	redact, err = sqlval.StringsArg(c.RedactFields)
	return warnings, redact, err
}

// scanChange reads one row of changeColumns.
func scanChange(s sqlval.Scanner) (*ledger.Change, error) {
	var (
		c                                           ledger.Change
		status                                      string
		runID, payload, diff, warnings              sql.NullString
		before, after, result                       sql.NullString
		created, updated, expires, applied, undoExp sql.NullInt64
		undone, redactedAt                          sql.NullInt64
		redact                                      sql.NullString
	)
	err := s.Scan(
		&c.ID, &c.Action, &status, &c.ScopeHash, &runID, &c.Resource,
		&payload, &c.PayloadHash, &diff, &c.Summary, &warnings, &c.StateHash,
		&before, &after, &c.ConfirmHash, &c.UndoHash, &c.Undoable, &c.Transactional,
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
