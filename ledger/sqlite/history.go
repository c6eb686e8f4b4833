package sqlite

import (
	"context"
	"database/sql"
	"errors"

	"github.com/mcp-changeset/changeset-go/ledger"
	"github.com/mcp-changeset/changeset-go/ledger/driver"
	"github.com/mcp-changeset/changeset-go/ledger/internal/sqlval"
)

// appendHistorySQL appends one entry of the history, numbered and hashed
// by the ledger.
var appendHistorySQL = `INSERT INTO ledger_history (` + sqlval.HistoryColumns + `) VALUES (` + placeholders(11) + `)`

// chainHeadSQL reads the newest link of the chain: the newest entry or
// the newest pruned entry's link, each the last row of its table's
// primary key.
const chainHeadSQL = `SELECT seq, hash FROM (
	SELECT * FROM (SELECT seq, hash FROM ledger_history ORDER BY seq DESC LIMIT 1)
	UNION ALL
	SELECT * FROM (SELECT seq, hash FROM ledger_history_pruned ORDER BY seq DESC LIMIT 1)
) ORDER BY seq DESC LIMIT 1`

// ChainHead returns the chain's newest link. SQLite has one writer at a
// time: q's write transaction holds the chain already.
func (b *Backend) ChainHead(ctx context.Context, q driver.Querier) (ledger.Link, error) {
	link, err := sqlval.ScanLink(b.queryRowPrepared(ctx, q, chainHeadSQL))
	if errors.Is(err, sql.ErrNoRows) {
		return ledger.Link{}, nil
	}
	return link, b.interpretError("read the history's newest link in", err)
}

// ListPrunedLinks returns up to limit links of pruned entries above after.
func (b *Backend) ListPrunedLinks(ctx context.Context, q driver.Querier, after int64, limit int) ([]ledger.Link, error) {
	const op = "read the links of pruned history entries in"
	rows, err := q.QueryContext(ctx, `SELECT seq, hash FROM ledger_history_pruned WHERE seq > ? ORDER BY seq LIMIT ?`, after, limit)
	if err != nil {
		return nil, b.interpretError(op, err)
	}
	out, err := sqlval.ScanAll(rows, sqlval.ScanLink)
	return out, b.interpretError(op, err)
}

// AppendHistory appends e to the history, in q's transaction.
func (b *Backend) AppendHistory(ctx context.Context, q driver.Querier, e ledger.HistoryEntry) error {
	_, err := b.execPrepared(ctx, q, appendHistorySQL, sqlval.HistoryArgs(e)...)
	return b.interpretError("append history of "+e.About()+" to", err)
}

// ListHistory returns the entries f selects, oldest first (by seq).
func (b *Backend) ListHistory(ctx context.Context, q driver.Querier, f ledger.HistoryFilter) ([]ledger.HistoryEntry, error) {
	query, args := listHistoryQuery(f)
	const op = "read history in"
	rows, err := b.queryPrepared(ctx, q, query, args...)
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
