package sqlite

import (
	"context"
	"database/sql"
	"embed"
	"fmt"
	"strconv"
	"strings"

	"github.com/mcp-changeset/changeset-go/ledger/internal/sqlval"
)

//go:embed migrations/*.sql
var migrationFiles embed.FS

// migrations are the steps in order of their versions, which may leave a
// number out (see sqlval.LoadMigrations). To change the schema, add
// migrations/NNN_what.sql and raise SchemaVersion.
var migrations = sqlval.LoadMigrations(migrationFiles, "migrations", "ledger/sqlite", SchemaVersion)

// afterMigration holds, by version, what Go must do in the transaction
// right after a migration's SQL: check what SQL alone cannot.
var afterMigration = map[int]func(ctx context.Context, tx *sql.Tx) error{
	13: checkDeclinedRewrite,
	16: func(ctx context.Context, tx *sql.Tx) error {
		return sqlval.ChainExisting(ctx, tx, func(int) string { return "?" })
	},
}

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
	for _, m := range sqlval.Pending(migrations, id.version) {
		if _, err := tx.ExecContext(ctx, m.SQL); err != nil {
			return b.interpretError(op+" (migration "+m.Name+")", err)
		}
		if after := afterMigration[m.Version]; after != nil {
			if err := after(ctx, tx); err != nil {
				return b.interpretError(op+" (migration "+m.Name+")", err)
			}
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

// The status list of the changes table's CHECK constraint before and after
// migration 013, as SQLite keeps the table's text.
const (
	statusesBefore13 = `'apply_failed', 'undoing', 'undone', 'undo_failed'))`
	statusesAfter13  = `'apply_failed', 'undoing', 'undone', 'undo_failed', 'declined'))`
)

// checkDeclinedRewrite guards migration 013, which rewrites the text of the
// changes table's status CHECK in sqlite_schema: the new list must be
// there exactly once and the old one gone (a table whose text differs from
// the one this package wrote is left for the rollback, unchanged). It then
// raises the schema cookie, which makes every connection, this one
// included, read the schema again, with the new constraint.
func checkDeclinedRewrite(ctx context.Context, tx *sql.Tx) error {
	var text string
	if err := tx.QueryRowContext(ctx, `SELECT sql FROM sqlite_schema WHERE type = 'table' AND name = 'changes'`).Scan(&text); err != nil {
		return err
	}
	if strings.Count(text, statusesAfter13) != 1 || strings.Contains(text, statusesBefore13) {
		return fmt.Errorf("the changes table's definition is not the one this program wrote, so its status constraint was not extended to 'declined'; nothing was changed (restore the ledger from a backup, or report this)")
	}
	var cookie int64
	if err := tx.QueryRowContext(ctx, `PRAGMA schema_version`).Scan(&cookie); err != nil {
		return err
	}
	// A pragma takes no parameter; cookie is an integer read just now.
	_, err := tx.ExecContext(ctx, `PRAGMA schema_version = `+strconv.FormatInt(cookie+1, 10))
	return err
}
