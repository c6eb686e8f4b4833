package sqlite

import (
	"context"
	"time"

	"github.com/mcp-changeset/changeset-go/ledger"
	"github.com/mcp-changeset/changeset-go/ledger/driver"
	"github.com/mcp-changeset/changeset-go/ledger/internal/sqlval"
)

// staleSQL finds stale previews in the partial index changes_open_created
// (status, created_at, id, expires_at) alone: the literal status is what
// lets SQLite use the partial index, and every column it reads is in it.
const staleSQL = `SELECT created_at, id FROM changes INDEXED BY changes_open_created
	WHERE status = 'pending' AND (expires_at IS NULL OR expires_at <= ?)`

// StaleChanges returns the keys of the pending changes whose token has
// expired by now (ExpiresAt at or before it, or unset), newest first, at
// most limit of them, from just after the key after (nil: the newest).
// It reads the index changes_open_created, never the changes' rows.
func (b *Backend) StaleChanges(ctx context.Context, q driver.Querier, now time.Time, after *ledger.ChangeKey, limit int) ([]ledger.ChangeKey, error) {
	query, args := staleSQL, []any{now.UnixMicro()}
	if after != nil {
		query += ` AND (created_at, id) < (?, ?)`
		args = append(args, after.CreatedAt.UnixMicro(), after.ID)
	}
	query += sqlval.NewestFirst + ` LIMIT ?`
	args = append(args, limit)
	rows, err := q.QueryContext(ctx, query, args...)
	if err != nil {
		return nil, b.interpretError("find stale changes in", err)
	}
	keys, err := sqlval.ScanAll(rows, sqlval.ScanKey)
	return keys, b.interpretError("find stale changes in", err)
}
