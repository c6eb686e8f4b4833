package postgres

import (
	"context"
	"database/sql"
	"errors"
	"time"

	"github.com/mcp-changeset/changeset-go/ledger"
	"github.com/mcp-changeset/changeset-go/ledger/driver"
	"github.com/mcp-changeset/changeset-go/ledger/internal/sqlval"
)

// InsertEvent stores a new event.
func (b *Backend) InsertEvent(ctx context.Context, q driver.Querier, e *ledger.Event) error {
	_, err := q.ExecContext(ctx, `INSERT INTO `+b.table("ledger_outbox")+` (`+sqlval.Events.Columns()+`) VALUES (`+
		placeholders(1, sqlval.Events.Len())+`)`, sqlval.Events.InsertArgs(e, dialect)...)
	return b.interpretError("add event "+e.ID+" to the outbox of", err)
}

// LeaseEvents leases the due events f selects (see driver.Backend) in one
// statement. Its selection locks the rows it picks and skips rows that
// another transaction has locked (FOR UPDATE SKIP LOCKED), so two
// replicas leasing at once take different events; a row whose lease
// another replica committed is not due for it, since its lease_until lies
// ahead.
func (b *Backend) LeaseEvents(ctx context.Context, q driver.Querier, f ledger.LeaseFilter) ([]*ledger.Event, error) {
	const op = "lease events in"
	outbox := b.table("ledger_outbox")
	now := f.Now.UnixMicro()
	rows, err := q.QueryContext(ctx, `UPDATE `+outbox+` SET lease_owner = $1, lease_until = $2, attempts = attempts + 1
		WHERE id IN (SELECT id FROM `+outbox+` WHERE delivered_at IS NULL AND next_attempt_at <= $3
			AND (lease_until IS NULL OR lease_until <= $3) ORDER BY next_attempt_at, id LIMIT $4 FOR UPDATE SKIP LOCKED)
		RETURNING `+sqlval.Events.Columns(), f.Owner, f.Until.UnixMicro(), now, f.Limit)
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
	op := "finish event " + e.ID + " in"
	outbox := b.table("ledger_outbox")
	res, err := q.ExecContext(ctx, `UPDATE `+outbox+` SET next_attempt_at = coalesce($1, next_attempt_at), delivered_at = $2,
		last_error = $3, lease_owner = '', lease_until = NULL WHERE id = $4 AND lease_owner = $5 AND delivered_at IS NULL`,
		sqlval.TimeArg(e.NextAttemptAt), sqlval.TimeArg(e.DeliveredAt), e.LastError, e.ID, e.LeaseOwner)
	if err != nil {
		return b.interpretError(op, err)
	}
	if n, err := res.RowsAffected(); err != nil || n == 1 {
		return b.interpretError(op, err)
	}
	var owner string
	var delivered sql.NullInt64
	err = q.QueryRowContext(ctx, `SELECT lease_owner, delivered_at FROM `+outbox+` WHERE id = $1`, e.ID).Scan(&owner, &delivered)
	if errors.Is(err, sql.ErrNoRows) {
		return rowError("finish", "event", e.ID, ledger.ErrNotFound)
	}
	if err != nil {
		return b.interpretError(op, err)
	}
	return rowError("finish", "event", e.ID, sqlval.LeaseLost(e.LeaseOwner, owner, delivered.Valid))
}

// ListEvents returns the events f selects, oldest first. It locks
// nothing.
func (b *Backend) ListEvents(ctx context.Context, q driver.Querier, f ledger.EventFilter) ([]*ledger.Event, error) {
	w := sqlval.EventWhere(dialect, f)
	const op = "list events in"
	rows, err := q.QueryContext(ctx, `SELECT `+sqlval.Events.Columns()+` FROM `+b.table("ledger_outbox")+
		w.String()+sqlval.EventOrder+w.Limit(f.Limit), w.Args...)
	if err != nil {
		return nil, b.interpretError(op, err)
	}
	out, err := sqlval.ScanAll(rows, sqlval.Events.Scan)
	return out, b.interpretError(op, err)
}

// DeleteEvents deletes up to limit events delivered before
// deliveredBefore, or created before createdBefore.
func (b *Backend) DeleteEvents(ctx context.Context, q driver.Querier, deliveredBefore, createdBefore time.Time, limit int) (int, error) {
	outbox := b.table("ledger_outbox")
	n, err := sqlval.Affected(q.ExecContext(ctx, `DELETE FROM `+outbox+` WHERE id IN (SELECT id FROM `+outbox+`
		WHERE delivered_at IS NOT NULL AND delivered_at < $1 UNION ALL SELECT id FROM `+outbox+` WHERE created_at < $2 LIMIT $3)`,
		sqlval.CeilMicro(deliveredBefore), sqlval.CeilMicro(createdBefore), limit))
	return n, b.interpretError("prune the outbox of", err)
}
