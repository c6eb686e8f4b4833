package postgres

import (
	"context"
	"database/sql"

	"github.com/mcp-changeset/changeset-go/ledger"
)

// BeginDurableWrite is [Backend.BeginWrite] for the ledger's durability
// (driver.DurableWriter). Under ledger.DurabilityClaims a lazy
// transaction sets synchronous_commit to off for itself only (SET LOCAL):
// its commit returns before the server has flushed its WAL record, which
// the server's WAL writer flushes within three times wal_writer_delay (600
// ms by default), or the next synchronous commit does, since it flushes
// the WAL up to its own record and so every record before it. Every other
// transaction keeps the server's setting; the server already shares one
// flush among the commits that wait for it at once.
//
// Unlike SQLite's, PostgreSQL's page cache is the server's: a crash of the
// server process (not only of the machine) can lose lazy commits. A crash
// of the client loses nothing. docs/reliability.md says what that risks.
func (b *Backend) BeginDurableWrite(ctx context.Context, lazy bool) (*sql.Tx, func(bool) error, error) {
	tx, err := b.BeginWrite(ctx)
	if err != nil || !lazy || b.durability != ledger.DurabilityClaims {
		return tx, nil, err
	}
	if _, err := tx.ExecContext(ctx, "SET LOCAL synchronous_commit TO off"); err != nil {
		_ = tx.Rollback()
		return nil, nil, b.interpretError("begin transaction on", err)
	}
	return tx, nil, nil
}
