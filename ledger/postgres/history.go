package postgres

import (
	"context"
	"database/sql"
	"errors"

	"github.com/mcp-changeset/changeset-go/ledger"
	"github.com/mcp-changeset/changeset-go/ledger/driver"
	"github.com/mcp-changeset/changeset-go/ledger/internal/sqlval"
)

// AppendHistory appends e to the history, in q's transaction.
func (b *Backend) AppendHistory(ctx context.Context, q driver.Querier, e ledger.HistoryEntry) error {
	_, err := q.ExecContext(ctx, b.sql.appendHistory, sqlval.HistoryArgs(e)...)
	return b.interpretError("append history of "+sqlval.HistorySubject(e)+" to", err)
}

// chainLockClass is the first key of the chain's advisory lock: "MCCH" in
// ASCII; the second is lockID(schema), as the migration's lock has.
const chainLockClass int32 = 0x4D434348

// ChainHead takes the chain's lock, a transaction-scoped advisory lock of
// the ledger's schema, so that the transactions that append to the
// history take turns until each commits, and returns the newest link. At
// READ COMMITTED the read, a statement after the lock is granted, sees
// the entries of the transaction that held it before. A durable
// transaction then commits without waiting for the disk, and waits after
// (see BeginDurableWrite), so that the lock is not held through a flush.
func (b *Backend) ChainHead(ctx context.Context, q driver.Querier) (ledger.Link, error) {
	const op = "lock the history's chain in"
	if _, err := q.ExecContext(ctx, b.chainLockSQL(q), chainLockClass, lockID(b.schema)); err != nil {
		return ledger.Link{}, b.interpretError(op, err)
	}
	link, err := sqlval.ScanLink(q.QueryRowContext(ctx, b.sql.chainHead))
	if errors.Is(err, sql.ErrNoRows) {
		return ledger.Link{}, nil
	}
	return link, b.interpretError(op, err)
}

// ListPrunedLinks returns up to limit links of pruned entries above after.
func (b *Backend) ListPrunedLinks(ctx context.Context, q driver.Querier, after int64, limit int) ([]ledger.Link, error) {
	const op = "read the links of pruned history entries in"
	rows, err := q.QueryContext(ctx, b.sql.prunedLinks, after, limit)
	if err != nil {
		return nil, b.interpretError(op, err)
	}
	out, err := sqlval.ScanAll(rows, sqlval.ScanLink)
	return out, b.interpretError(op, err)
}

// ListHistory returns the entries f selects, oldest first (by seq). It
// locks nothing.
func (b *Backend) ListHistory(ctx context.Context, q driver.Querier, f ledger.HistoryFilter) ([]ledger.HistoryEntry, error) {
	w := sqlval.HistoryWhere(dialect, f)
	query := b.sql.selectHistory + w.String() + sqlval.OldestFirst + w.Limit(f.Limit)
	const op = "read history in"
	rows, err := q.QueryContext(ctx, query, w.Args...)
	if err != nil {
		return nil, b.interpretError(op, err)
	}
	out, err := sqlval.ScanAll(rows, sqlval.ScanHistory)
	return out, b.interpretError(op, err)
}
