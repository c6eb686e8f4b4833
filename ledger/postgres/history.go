package postgres

import (
	"context"

	"github.com/mcp-changeset/changeset-go/ledger"
	"github.com/mcp-changeset/changeset-go/ledger/driver"
	"github.com/mcp-changeset/changeset-go/ledger/internal/sqlval"
)

// AppendHistory appends e to the history, in q's transaction.
func (b *Backend) AppendHistory(ctx context.Context, q driver.Querier, e ledger.HistoryEntry) error {
	_, err := q.ExecContext(ctx, b.sql.appendHistory, sqlval.HistoryArgs(e)...)
	return b.interpretError("append history of "+sqlval.HistorySubject(e)+" to", err)
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
