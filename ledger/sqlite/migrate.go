package sqlite

import (
	"context"
	"embed"
	"strconv"

	"github.com/mcp-changeset/changeset-go/ledger/internal/sqlval"
)

//go:embed migrations/*.sql
var migrationFiles embed.FS

// migrations are the steps in order; migrations[i] has version i+1. To
// change the schema, add migrations/NNN_what.sql and raise SchemaVersion.
var migrations = sqlval.LoadMigrations(migrationFiles, "migrations", "ledger/sqlite", SchemaVersion)

// migrate initialises an empty database or upgrades an older ledger, in
// one write transaction that records the new schema version with the
// tables. It first reads the identity without the write lock, so that
// opening a current ledger never waits for another process's writer; then
// it decides again under the lock, since another process may have created
// or upgraded the ledger meanwhile. A read-only backend only checks.
func (b *Backend) migrate(ctx context.Context, create bool) error {
	const op = "initialise"
	id, err := readIdentity(ctx, b.db)
	if err != nil {
		return b.interpretError("open", err)
	}
	if write, err := b.verdict(id, create); err != nil || !write {
		return err
	}
	tx, err := b.db.BeginTx(ctx, nil)
	if err != nil {
		return b.interpretError(op, err)
	}
	defer tx.Rollback()
	if id, err = readIdentity(ctx, tx); err != nil {
		return b.interpretError(op, err)
	}
	write, err := b.verdict(id, create)
	if err != nil || !write {
		return err
	}
	for _, m := range migrations[id.version:] {
		if _, err := tx.ExecContext(ctx, m.SQL); err != nil {
			return b.interpretError(op+" (migration "+m.Name+")", err)
		}
	}
	// Pragmas take no parameters; both values are constants of this
	// package. They are transactional: they commit with the tables.
	pragmas := []string{
		"PRAGMA application_id = " + strconv.FormatInt(int64(ApplicationID), 10),
		"PRAGMA user_version = " + strconv.Itoa(SchemaVersion),
	}
	for _, p := range pragmas {
		if _, err := tx.ExecContext(ctx, p); err != nil {
			return b.interpretError(op, err)
		}
	}
	return b.interpretError(op, tx.Commit())
}
