package sqlite

import (
	"context"
	"embed"
	"fmt"
	"path"
	"sort"
	"strconv"
	"strings"
)

//go:embed migrations/*.sql
var migrationFiles embed.FS

// migration is one step of the schema: applying it to a ledger at
// user_version version-1 brings it to version.
type migration struct {
	version int
	name    string
	sql     string
}

// migrations are the steps in order; migrations[i] has version i+1. To
// change the schema, add migrations/NNN_what.sql and raise SchemaVersion.
var migrations = loadMigrations()

// loadMigrations reads the embedded migrations/NNN_*.sql files. It panics
// if they are not numbered 1, 2, ... SchemaVersion: that is a bug of this
// package, caught by its tests.
func loadMigrations() []migration {
	entries, err := migrationFiles.ReadDir("migrations")
	if err != nil {
		panic("ledger/sqlite: " + err.Error())
	}
	var ms []migration
	for _, e := range entries {
		num, _, ok := strings.Cut(e.Name(), "_")
		v, err := strconv.Atoi(num)
		if !ok || err != nil {
			panic("ledger/sqlite: migration " + e.Name() + " is not named NNN_what.sql")
		}
		text, err := migrationFiles.ReadFile(path.Join("migrations", e.Name()))
		if err != nil {
			panic("ledger/sqlite: " + err.Error())
		}
		ms = append(ms, migration{version: v, name: e.Name(), sql: string(text)})
	}
	sort.Slice(ms, func(i, j int) bool { return ms[i].version < ms[j].version })
	for i, m := range ms {
		if m.version != i+1 {
			panic(fmt.Sprintf("ledger/sqlite: migration %s should have version %d", m.name, i+1))
		}
	}
	if len(ms) != SchemaVersion {
		panic(fmt.Sprintf("ledger/sqlite: %d migrations for schema version %d", len(ms), SchemaVersion))
	}
	return ms
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
	for _, m := range migrations[id.version:] {
		if _, err := tx.ExecContext(ctx, m.sql); err != nil {
			return b.interpretError(op+" (migration "+m.name+")", err)
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
