package postgres

import (
	"context"
	"strconv"
	"time"

	"github.com/mcp-changeset/changeset-go/ledger"
	"github.com/mcp-changeset/changeset-go/ledger/driver"
	"github.com/mcp-changeset/changeset-go/ledger/internal/sqlval"
)

// StaleChanges returns the keys of the pending changes whose token has
// expired by now (ExpiresAt at or before it, or unset), newest first, at
// most limit of them, from just after the key after (nil: the newest).
// The index changes_status_created (status, created_at, id, including
// expires_at) answers it without the changes' rows once VACUUM has marked
// their pages all-visible. It locks nothing.
func (b *Backend) StaleChanges(ctx context.Context, q driver.Querier, now time.Time, after *ledger.ChangeKey, limit int) ([]ledger.ChangeKey, error) {
	query := `SELECT created_at, id FROM ` + b.sql.tables.Changes +
		` WHERE status = 'pending' AND (expires_at IS NULL OR expires_at <= $1)`
	args := []any{now.UnixMicro()}
	if after != nil {
		query += ` AND (created_at, id) < ($2, $3)`
		args = append(args, after.CreatedAt.UnixMicro(), after.ID)
	}
	query += sqlval.NewestFirst + ` LIMIT $` + strconv.Itoa(len(args)+1)
	args = append(args, limit)
	rows, err := q.QueryContext(ctx, query, args...)
	if err != nil {
		return nil, b.interpretError("find stale changes in", err)
	}
	keys, err := sqlval.ScanAll(rows, sqlval.ScanKey)
	return keys, b.interpretError("find stale changes in", err)
}
