package sqlite

import (
	"context"
	"database/sql"
	"errors"
	"time"

	"github.com/mcp-changeset/changeset-go/ledger"
	"github.com/mcp-changeset/changeset-go/ledger/driver"
	"github.com/mcp-changeset/changeset-go/ledger/internal/sqlval"
)

// The statements of the outbox, built from sqlval.Events.
var (
	insertEventSQL = `INSERT INTO ledger_outbox (` + sqlval.Events.Columns() + `) VALUES (` + placeholders(sqlval.Events.Len()) + `)`
	// leaseEventsSQL leases the due, lease-free events in one statement:
	// the subquery reads the index ledger_outbox_due from the soonest
	// due. SQLite takes one writer at a time, so no other lease can come
	// between the selection and the update.
	leaseEventsSQL = `UPDATE ledger_outbox SET lease_owner = ?, lease_until = ?, attempts = attempts + 1
		WHERE id IN (SELECT id FROM ledger_outbox WHERE delivered_at IS NULL AND next_attempt_at <= ?
			AND (lease_until IS NULL OR lease_until <= ?) ORDER BY next_attempt_at, id LIMIT ?)
		RETURNING ` + sqlval.Events.Columns()
	finishEventSQL = `UPDATE ledger_outbox SET next_attempt_at = coalesce(?, next_attempt_at), delivered_at = ?, last_error = ?,
		lease_owner = '', lease_until = NULL WHERE id = ? AND lease_owner = ? AND delivered_at IS NULL`
	deleteEventsSQL = `DELETE FROM ledger_outbox WHERE id IN (SELECT id FROM ledger_outbox
		WHERE delivered_at IS NOT NULL AND delivered_at < ? UNION ALL SELECT id FROM ledger_outbox WHERE created_at < ? LIMIT ?)`
)

// InsertEvent stores a new event.
func (b *Backend) InsertEvent(ctx context.Context, q driver.Querier, e *ledger.Event) error {
	_, err := q.ExecContext(ctx, insertEventSQL, sqlval.Events.InsertArgs(e, dialect)...)
	return b.interpretError("add event "+e.ID+" to the outbox of", err)
}

// LeaseEvents leases the due events f selects (see driver.Backend). It
// must run in a write transaction, which holds the file's write lock.
func (b *Backend) LeaseEvents(ctx context.Context, q driver.Querier, f ledger.LeaseFilter) ([]*ledger.Event, error) {
	const op = "lease events in"
	now := f.Now.UnixMicro()
	rows, err := q.QueryContext(ctx, leaseEventsSQL, f.Owner, f.Until.UnixMicro(), now, now, f.Limit)
	if err != nil {
		return nil, b.interpretError(op, err)
	}
	out, err := sqlval.ScanAll(rows, sqlval.Events.Scan)
	sqlval.SortEvents(out)
	return out, b.interpretError(op, err)
}

// FinishEvent writes back the outcome of an attempt at e, provided it is
// still leased to e.LeaseOwner and undelivered.
func (b *Backend) FinishEvent(ctx context.Context, q driver.Querier, e *ledger.Event) error {
	res, err := q.ExecContext(ctx, finishEventSQL, sqlval.TimeArg(e.NextAttemptAt), sqlval.TimeArg(e.DeliveredAt), e.LastError, e.ID, e.LeaseOwner)
	return b.finishResult(ctx, q, e, res, err)
}

// finishResult interprets the UPDATE of FinishEvent: one row written, or
// why none was.
func (b *Backend) finishResult(ctx context.Context, q driver.Querier, e *ledger.Event, res sql.Result, err error) error {
	op := "finish event " + e.ID + " in"
	if err != nil {
		return b.interpretError(op, err)
	}
	if n, err := res.RowsAffected(); err != nil || n == 1 {
		return b.interpretError(op, err)
	}
	var owner string
	var delivered sql.NullInt64
	err = q.QueryRowContext(ctx, `SELECT lease_owner, delivered_at FROM ledger_outbox WHERE id = ?`, e.ID).Scan(&owner, &delivered)
	if errors.Is(err, sql.ErrNoRows) {
		return rowError("finish", "event", e.ID, ledger.ErrNotFound)
	}
	if err != nil {
		return b.interpretError(op, err)
	}
	return rowError("finish", "event", e.ID, sqlval.LeaseLost(e.LeaseOwner, owner, delivered.Valid))
}

// ListEvents returns the events f selects, oldest first.
func (b *Backend) ListEvents(ctx context.Context, q driver.Querier, f ledger.EventFilter) ([]*ledger.Event, error) {
	w := sqlval.EventWhere(dialect, f)
	const op = "list events in"
	rows, err := q.QueryContext(ctx, `SELECT `+sqlval.Events.Columns()+` FROM ledger_outbox`+w.String()+sqlval.EventOrder+w.Limit(f.Limit), w.Args...)
	if err != nil {
		return nil, b.interpretError(op, err)
	}
	out, err := sqlval.ScanAll(rows, sqlval.Events.Scan)
	return out, b.interpretError(op, err)
}

// DeleteEvents deletes up to limit events delivered before
// deliveredBefore, or created before createdBefore.
func (b *Backend) DeleteEvents(ctx context.Context, q driver.Querier, deliveredBefore, createdBefore time.Time, limit int) (int, error) {
	n, err := sqlval.Affected(q.ExecContext(ctx, deleteEventsSQL, sqlval.CeilMicro(deliveredBefore), sqlval.CeilMicro(createdBefore), limit))
	return n, b.interpretError("prune the outbox of", err)
}
