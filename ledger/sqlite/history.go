package sqlite

import (
	"context"

	"github.com/mcp-changeset/changeset-go/ledger"
	"github.com/mcp-changeset/changeset-go/ledger/driver"
	"github.com/mcp-changeset/changeset-go/ledger/internal/sqlval"
)

// appendHistorySQL appends one entry of the history; seq is SQLite's.
var appendHistorySQL = `INSERT INTO ledger_history (` + sqlval.HistoryColumns + `) VALUES (` + placeholders(8) + `)`

// AppendHistory appends e to the history, in q's transaction.
func (b *Backend) AppendHistory(ctx context.Context, q driver.Querier, e ledger.HistoryEntry) error {
	_, err := b.execPrepared(ctx, q, appendHistorySQL, sqlval.HistoryArgs(e)...)
	return b.interpretError("append history of "+sqlval.HistorySubject(e)+" to", err)
}

// ListHistory returns the entries f selects, oldest first (by seq).
func (b *Backend) ListHistory(ctx context.Context, q driver.Querier, f ledger.HistoryFilter) ([]ledger.HistoryEntry, error) {
	query, args := listHistoryQuery(f)
	const op = "read history in"
	rows, err := q.QueryContext(ctx, query, args...)
	if err != nil {
		return nil, b.interpretError(op, err)
	}
	out, err := sqlval.ScanAll(rows, sqlval.ScanHistory)
	return out, b.interpretError(op, err)
}

// listHistoryQuery is the statement of ListHistory and its arguments.
func listHistoryQuery(f ledger.HistoryFilter) (string, []any) {
	w := sqlval.HistoryWhere(dialect, f)
	return `SELECT ` + sqlval.HistorySelect + ` FROM ledger_history` + w.String() + sqlval.OldestFirst + w.Limit(f.Limit), w.Args
}
