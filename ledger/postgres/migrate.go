package postgres

import (
	"context"
	"database/sql"
	"embed"
	"fmt"
	"hash/crc32"
	"strings"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/mcp-changeset/changeset-go/ledger"
	"github.com/mcp-changeset/changeset-go/ledger/driver"
	"github.com/mcp-changeset/changeset-go/ledger/internal/sqlval"
)

//go:embed migrations/*.sql
var migrationFiles embed.FS

// migrations are the steps in order of their versions, which may leave a
// number out (see sqlval.LoadMigrations). To change the schema, add
// migrations/NNN_what.sql and raise SchemaVersion.
var migrations = sqlval.LoadMigrations(migrationFiles, "migrations", "ledger/postgres", SchemaVersion)

// ownTables are the tables of a ledger, besides changeset_migrations. A
// schema that has any of them but no changeset_migrations holds another
// application's tables.
var ownTables = []string{"changes", "runs", "meta", "change_deps", "ledger_history", "ledger_approvals", "ledger_decisions", "ledger_outbox",
	"ledger_history_pruned", "ledger_chain_head"}

// identity is what a schema says about itself.
type identity struct {
	schemaExists bool
	tracked      bool // it has a changeset_migrations table
	version      int  // the highest version recorded there
	versions     int  // how many versions are recorded (fewer than version when a number was left out)
	clashes      int  // relations named like the ledger's tables
	others       int  // any other relations
}

// readIdentity reads the identity of schema. Everything but the versions
// comes from one statement, so from one snapshot; the versions are read
// only once the migrations table is known to exist.
func readIdentity(ctx context.Context, q driver.Querier, schema string) (identity, error) {
	var id identity
	err := q.QueryRowContext(ctx, `SELECT
		EXISTS (SELECT 1 FROM pg_namespace WHERE nspname = $1),
		EXISTS (SELECT 1 FROM pg_class c JOIN pg_namespace n ON n.oid = c.relnamespace
			WHERE n.nspname = $1 AND c.relname = 'changeset_migrations'),
		(SELECT count(*) FROM pg_class c JOIN pg_namespace n ON n.oid = c.relnamespace
			WHERE n.nspname = $1 AND c.relkind IN ('r', 'p', 'v', 'm', 'f') AND c.relname::text = ANY($2::text[])),
		(SELECT count(*) FROM pg_class c JOIN pg_namespace n ON n.oid = c.relnamespace
			WHERE n.nspname = $1 AND c.relkind IN ('r', 'p', 'v', 'm', 'f')
			AND c.relname <> 'changeset_migrations' AND NOT c.relname::text = ANY($2::text[]))`,
		schema, ownTables).Scan(&id.schemaExists, &id.tracked, &id.clashes, &id.others)
	if err != nil || !id.tracked {
		return id, err
	}
	err = q.QueryRowContext(ctx, `SELECT coalesce(max(version), 0), count(*) FROM `+
		pgx.Identifier{schema, "changeset_migrations"}.Sanitize()).Scan(&id.version, &id.versions)
	return id, err
}

// verdict decides what Open may do with a schema of identity id: use it as
// it is, write to it (initialise it, upgrade an older ledger), or refuse.
func (b *Backend) verdict(id identity, create bool) (write bool, err error) {
	schema := "schema " + b.schema
	switch {
	case id.tracked:
		switch {
		case id.version > SchemaVersion:
			return false, b.openError(fmt.Errorf("%w (%s is at schema version %d; this program supports up to %d)", ledger.ErrNewerSchema, schema, id.version, SchemaVersion))
		case id.version < 1 || id.versions > id.version:
			return false, b.openError(fmt.Errorf("%w: the changeset_migrations table of %s records %d versions up to %d", ledger.ErrCorrupt, schema, id.versions, id.version))
		case id.version < SchemaVersion:
			if b.readOnly {
				return false, b.openError(fmt.Errorf("%w: schema version %d must be upgraded to %d, which a read-only open cannot do (open it once read-write)", ledger.ErrReadOnly, id.version, SchemaVersion))
			}
			return true, nil
		}
		return false, nil
	case id.clashes > 0:
		return false, b.openError(fmt.Errorf("%w: %s has tables named like a ledger's (%s) but no changeset_migrations table; they belong to something else and were left unchanged (name another schema with changeset_schema)", ledger.ErrForeign, schema, strings.Join(ownTables, ", ")))
	case !create || b.readOnly:
		if id.others > 0 {
			return false, b.openError(fmt.Errorf("%w: %s holds %d tables of another application and no changeset ledger (open with create to add one beside them)", ledger.ErrForeign, schema, id.others))
		}
		how := "open with create to initialise it"
		if b.readOnly {
			how = "a read-only open never creates one"
		}
		return false, b.openError(fmt.Errorf("%w: no changeset ledger in %s (%s)", ledger.ErrNotExist, schema, how))
	}
	return true, nil
}

// migrate initialises a schema or upgrades an older ledger, in one
// transaction that records each version applied beside the tables. It
// first reads the identity without any lock, so that opening a current
// ledger never waits for anyone; then it takes a transaction-scoped
// advisory lock of its own (per database and schema) and decides again,
// since another replica may have created or upgraded the ledger meanwhile.
// A read-only backend only checks.
func (b *Backend) migrate(ctx context.Context, create bool, timeout time.Duration) error {
	const op = "initialise"
	id, err := readIdentity(ctx, b.db, b.schema)
	if err != nil {
		return b.interpretError("open", err)
	}
	if write, err := b.verdict(id, create); err != nil || !write {
		return err
	}
	tx, err := b.db.BeginTx(ctx, &sql.TxOptions{Isolation: sql.LevelReadCommitted})
	if err != nil {
		return b.interpretError(op, err)
	}
	defer tx.Rollback()
	if _, err := tx.ExecContext(ctx, `SELECT pg_advisory_xact_lock($1, $2)`, lockClass, lockID(b.schema)); err != nil {
		return b.interpretError(op+" (waiting for another process's migration, at most "+timeout.String()+")", err)
	}
	if id, err = readIdentity(ctx, tx, b.schema); err != nil {
		return b.interpretError(op, err)
	}
	write, err := b.verdict(id, create)
	if err != nil || !write {
		return err
	}
	quoted := pgx.Identifier{b.schema}.Sanitize()
	setup := []string{
		`SET LOCAL search_path TO ` + quoted,
		`CREATE TABLE IF NOT EXISTS changeset_migrations (
			version    integer     NOT NULL PRIMARY KEY CHECK (version > 0),
			name       text        NOT NULL,
			applied_at timestamptz NOT NULL DEFAULT now()
		)`,
	}
	if !id.schemaExists {
		// Only when missing: CREATE SCHEMA IF NOT EXISTS would still
		// need the CREATE privilege on the database.
		setup = append([]string{`CREATE SCHEMA ` + quoted}, setup...)
	}
	for _, s := range setup {
		if _, err := tx.ExecContext(ctx, s); err != nil {
			return b.interpretError(op, err)
		}
	}
	for _, m := range sqlval.Pending(migrations, id.version) {
		if _, err := tx.ExecContext(ctx, m.SQL); err != nil {
			return b.interpretError(op+" (migration "+m.Name+")", err)
		}
		if m.Version == chainMigration {
			if err := sqlval.ChainExisting(ctx, tx, dollar); err != nil {
				return b.interpretError(op+" (migration "+m.Name+")", err)
			}
			if _, err := tx.ExecContext(ctx, `INSERT INTO ledger_chain_head (seq, hash)
				SELECT coalesce(max(seq), 0), coalesce((SELECT hash FROM ledger_history ORDER BY seq DESC LIMIT 1), $1)
				FROM ledger_history`, make([]byte, 32)); err != nil {
				return b.interpretError(op+" (migration "+m.Name+")", err)
			}
		}
		if _, err := tx.ExecContext(ctx, `INSERT INTO changeset_migrations (version, name) VALUES ($1, $2)`, m.Version, m.Name); err != nil {
			return b.interpretError(op+" (migration "+m.Name+")", err)
		}
	}
	return b.interpretError(op, tx.Commit())
}

// chainMigration is the migration after whose SQL Go chains the history
// already there (sqlval.ChainExisting), in the same transaction.
const chainMigration = 13

// lockClass is the first key of the migration's advisory lock: "MCCS" in
// ASCII, the SQLite ledger's application_id.
const lockClass int32 = 0x4D434353

// lockID is the second key of the migration's advisory lock: a hash of the
// schema's name, so that ledgers in different schemas migrate
// independently.
func lockID(schema string) int32 { return int32(crc32.ChecksumIEEE([]byte(schema))) }
