package sqlite

import (
	"context"
	"database/sql"
	"errors"

	"github.com/mcp-changeset/changeset-go/ledger"
	"github.com/mcp-changeset/changeset-go/ledger/driver"
)

// GetMeta reads the value stored under key; ok is false when there is none.
func (b *Backend) GetMeta(ctx context.Context, q driver.Querier, key string) (value []byte, ok bool, err error) {
	err = q.QueryRowContext(ctx, `SELECT value FROM meta WHERE key = ?`, key).Scan(&value)
	if errors.Is(err, sql.ErrNoRows) {
		return nil, false, nil
	}
	if err != nil {
		return nil, false, b.interpretError("read meta "+key+" from", err)
	}
	if value == nil {
		value = []byte{}
	}
	return value, true, nil
}

// SetMetaIfAbsent stores value under key unless the key already has a
// value, and returns the value now stored. Of several processes that race
// to set the same key, all get the value of the one that won.
func (b *Backend) SetMetaIfAbsent(ctx context.Context, q driver.Querier, key string, value []byte) ([]byte, error) {
	if value == nil {
		value = []byte{} // a nil slice would bind as NULL
	}
	_, err := q.ExecContext(ctx, `INSERT INTO meta (key, value) VALUES (?, ?) ON CONFLICT (key) DO NOTHING`, key, value)
	if err != nil {
		return nil, b.interpretError("write meta "+key+" to", err)
	}
	stored, ok, err := b.GetMeta(ctx, q, key)
	if err != nil {
		return nil, err
	}
	if !ok {
		// Meta rows are never deleted, so this cannot happen short of
		// someone editing the file by hand.
		return nil, &ledger.Error{Op: "write meta " + key + " to", Location: b.path, Err: errors.New("the value vanished after it was written")}
	}
	return stored, nil
}
