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
	return b.interpretError("append history of "+e.About()+" to", err)
}

// ChainHead returns the newest link, as the head row holds it. It locks
// nothing: the ledger appends through AppendChained, which does.
func (b *Backend) ChainHead(ctx context.Context, q driver.Querier) (ledger.Link, error) {
	link, err := sqlval.ScanLink(q.QueryRowContext(ctx, b.sql.chainHead))
	if errors.Is(err, sql.ErrNoRows) {
		err = errNoChainHead
	}
	return link, b.interpretError("read the history's newest link in", err)
}

// errNoChainHead is the cause of an append to a ledger whose chain has no
// head row, which only a hand outside this library can take away.
var errNoChainHead = errors.New("the history's chain has no head (ledger_chain_head is empty): the ledger was changed outside this library; run mcp-changeset verify and restore the ledger from a backup")

// AppendChained appends e as the chain's next link in one statement (see
// appendChainedSQL), which holds the head row's lock until q's
// transaction ends. A durable transaction then commits without waiting
// for the disk, and waits after (see BeginDurableWrite), so that the lock
// is not held through a flush.
func (b *Backend) AppendChained(ctx context.Context, q driver.Querier, e ledger.HistoryEntry) (ledger.Link, error) {
	query := b.sql.appendChained
	if b.asyncCommit(q) {
		query = b.sql.appendChainedAsync
	}
	args := append([]any{[]byte(ledger.HistoryHashPrefix), ledger.HistoryFields(e)}, sqlval.HistoryArgs(e)[1:10]...)
	link, err := sqlval.ScanLink(q.QueryRowContext(ctx, query, args...))
	if errors.Is(err, sql.ErrNoRows) {
		err = errNoChainHead
	}
	return link, b.interpretError("append history of "+e.About()+" to", err)
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
