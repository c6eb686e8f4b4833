// Package postgres is the ledger backend for deployments that outgrow one
// host: several server replicas, on several machines, sharing one
// PostgreSQL database. It reaches PostgreSQL through pgx
// (github.com/jackc/pgx/v5) behind database/sql, so that [Backend.DB] is a
// *sql.DB and transactional operations get a *sql.Tx, as with SQLite.
//
// Importing the package registers it with [driver.Register] for
// postgres:// and postgresql:// URLs, so that [ledger.Open] accepts them:
//
//	import _ "github.com/mcp-changeset/changeset-go/ledger/postgres"
//
//	l, err := ledger.Open(ctx, "postgres://app@db.internal/app?changeset_schema=notes", ledger.OpenOptions{Create: true})
//
// The URL is pgx's (libpq's keywords as query parameters, PG* environment
// variables and ~/.pgpass apply), plus two parameters of this package:
// changeset_schema names the schema that holds the ledger's tables
// ([DefaultSchema] when absent), so that several servers can share one
// database; changeset_max_conns sizes the connection pool
// ([DefaultMaxConns] when absent). A schema named explicitly also becomes
// the head of each connection's search_path (unless the URL sets one), so
// that the application's own tables, created through DB, land beside the
// ledger's.
//
// A schema holds a changeset ledger only if it has the table
// changeset_migrations, which records each schema version applied. Open
// applies missing migrations in one transaction under an advisory lock, so
// that replicas starting together do not race; it refuses a schema whose
// version is newer than [SchemaVersion] ([ledger.ErrNewerSchema]) and one
// that holds tables of another application ([ledger.ErrForeign]).
//
// Write transactions run at READ COMMITTED. Every transition is a
// compare-and-set UPDATE, and a change or run read inside a write
// transaction is locked (SELECT … FOR UPDATE) until the transaction ends,
// so that two claims of one change are serialised on its row while claims
// of other changes proceed: row locks, never table locks. How long a
// statement waits for a lock is the ledger's busy timeout, set as the
// connection's lock_timeout; a lock held longer fails with
// [ledger.ErrBusy].
package postgres

import (
	"context"
	"database/sql"
	"fmt"
	"strings"
	"sync"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/stdlib"
	"github.com/mcp-changeset/changeset-go/ledger"
	"github.com/mcp-changeset/changeset-go/ledger/driver"
	"github.com/mcp-changeset/changeset-go/ledger/internal/sqlval"
)

// SchemaVersion is the highest version recorded in changeset_migrations of
// a ledger whose schema is current for this package.
const SchemaVersion = 13

func init() {
	open := func(ctx context.Context, target string, opts ledger.OpenOptions) (driver.Backend, error) {
		b, err := Open(ctx, target, opts)
		if err != nil {
			return nil, err // never a typed nil in the interface
		}
		return b, nil
	}
	driver.Register("postgres", open)
	driver.Register("postgresql", open)
}

// Backend is a ledger stored in a schema of a PostgreSQL database. It
// implements [driver.Backend] and is safe for concurrent use; the database
// may be shared by any number of processes on any number of hosts.
type Backend struct {
	db       *sql.DB
	location string
	schema   string
	readOnly bool
	sql      statements
	// durability is ledger.OpenOptions.Durability (see durability.go).
	durability ledger.Durability
	// commits holds, for each durable write transaction in progress, how
	// its commit reaches the disk (see durability.go).
	commits sync.Map // *sql.Tx → *commitSync
	// snapshots holds the read-only transactions of BeginSnapshot, in
	// which a read locks nothing.
	snapshots sync.Map // *sql.Tx → struct{}
}

var (
	_ driver.Backend          = (*Backend)(nil)
	_ driver.ErrorInterpreter = (*Backend)(nil)
	_ driver.DurableWriter    = (*Backend)(nil)
)

// Open opens the ledger that target, a postgres:// URL, names.
//
// A schema without a ledger is initialised only when opts.Create is set
// (and opts.ReadOnly is not); otherwise Open fails with an error wrapping
// [ledger.ErrNotExist]. The schema itself is created if it is missing,
// which needs the CREATE privilege on the database. opts.BusyTimeout
// becomes the connections' lock_timeout unless the URL sets one;
// opts.ReadOnly makes every transaction read-only
// (default_transaction_read_only).
//
// Open refuses a role that lacks a privilege the ledger needs
// ([ErrMissingPrivilege], naming each one and the GRANT that gives it).
//
// Errors are *ledger.Error values; their messages never contain the
// password. They wrap [ledger.ErrNotExist], [ledger.ErrForeign],
// [ledger.ErrNewerSchema], [ledger.ErrCorrupt], [ledger.ErrBusy],
// [ledger.ErrReadOnly] or ErrMissingPrivilege as the cause may be.
func Open(ctx context.Context, target string, opts ledger.OpenOptions) (*Backend, error) {
	if opts.BusyTimeout <= 0 {
		opts.BusyTimeout = ledger.DefaultBusyTimeout
	}
	t, err := parseTarget(target, opts)
	if err != nil {
		return nil, &ledger.Error{Op: "open", Location: "PostgreSQL ledger", Err: err}
	}
	b := &Backend{location: t.location, schema: t.schema, readOnly: opts.ReadOnly, sql: newStatements(t.schema), durability: opts.Durability}
	db := stdlib.OpenDB(*t.conn)
	db.SetMaxOpenConns(t.maxConns)
	db.SetMaxIdleConns(min(maxIdleConns, t.maxConns))
	db.SetConnMaxIdleTime(connMaxIdleTime)
	db.SetConnMaxLifetime(connMaxLifetime)
	b.db = db
	if err := b.checkServer(ctx); err != nil {
		db.Close()
		return nil, err
	}
	if err := b.checkPrivileges(ctx); err != nil {
		db.Close()
		return nil, err
	}
	if err := b.migrate(ctx, opts.Create, opts.BusyTimeout); err != nil {
		db.Close()
		return nil, err
	}
	return b, nil
}

// checkServer connects and refuses a database whose encoding is not UTF8:
// the ledger's text would be converted, or refused, on the way in.
func (b *Backend) checkServer(ctx context.Context) error {
	var enc string
	if err := b.db.QueryRowContext(ctx, `SELECT current_setting('server_encoding')`).Scan(&enc); err != nil {
		return b.interpretError("open", err)
	}
	if enc != "UTF8" {
		return b.openError(fmt.Errorf("the database's encoding is %s, and a ledger needs UTF8 (create the database with ENCODING 'UTF8')", enc))
	}
	return nil
}

// DB returns the database handle, for applications that keep their own
// tables beside the ledger's.
func (b *Backend) DB() *sql.DB { return b.db }

// Location returns the ledger's URL without user name, password or any
// query parameter other than host, port, dbname and changeset_schema.
func (b *Backend) Location() string { return b.location }

// Schema returns the name of the schema that holds the ledger's tables.
func (b *Backend) Schema() string { return b.schema }

// Close closes the connection pool.
func (b *Backend) Close() error { return b.interpretError("close", b.db.Close()) }

// BeginWrite starts a READ COMMITTED transaction. It takes no lock by
// itself: GetChange and GetRun inside it lock the row they read until the
// transaction ends, and every write is a compare-and-set.
func (b *Backend) BeginWrite(ctx context.Context) (*sql.Tx, error) {
	const op = "begin transaction on"
	if b.readOnly {
		return nil, &ledger.Error{Op: op, Location: b.location, Err: errOpenedReadOnly}
	}
	tx, err := b.db.BeginTx(ctx, &sql.TxOptions{Isolation: sql.LevelReadCommitted})
	if err != nil {
		return nil, b.interpretError(op, err)
	}
	return tx, nil
}

// appendChainedSQL is the statement that appends one entry to the chain:
// it moves the head row one link on (seq + 1, and the SHA-256 of the
// prefix, the old head's hash, the new seq and the entry's other fields
// as Go encodes them: ledger.HistoryHash computed in the database) and
// inserts the entry with that seq and hash. The UPDATE waits for the head
// row's lock and, once granted, works from the row's newest committed
// version (READ COMMITTED re-reads it), so concurrent appends take turns
// without a read before them. also is joined in: the async setting.
func appendChainedSQL(also string) string {
	return `WITH h AS (UPDATE {head} SET seq = seq + 1, hash = sha256($1::bytea || hash || int8send(seq + 1) || $2::bytea)
			WHERE id = 1 RETURNING seq, hash)
		INSERT INTO {history} (` + sqlval.HistoryColumns + `)
		SELECT h.seq, $3, $4, $5, $6, $7, $8, $9, $10, $11, h.hash FROM h` + also + `
		RETURNING seq, hash`
}

// BeginSnapshot starts a read-only REPEATABLE READ transaction: one
// snapshot of the ledger for as long as it lasts, without locks.
func (b *Backend) BeginSnapshot(ctx context.Context) (*sql.Tx, error) {
	tx, err := b.db.BeginTx(ctx, &sql.TxOptions{Isolation: sql.LevelRepeatableRead, ReadOnly: true})
	if err != nil {
		return nil, b.interpretError("begin a read transaction on", err)
	}
	b.snapshots.Store(tx, struct{}{})
	context.AfterFunc(ctx, func() { b.snapshots.Delete(tx) })
	return tx, nil
}

// locks reports whether a read of a row in q locks it: in a write
// transaction (FOR UPDATE), not in the database's autocommit or in a
// snapshot of BeginSnapshot.
func (b *Backend) locks(q driver.Querier) bool {
	tx, ok := q.(*sql.Tx)
	if !ok {
		return false
	}
	_, snapshot := b.snapshots.Load(tx)
	return !snapshot
}

// statements are the backend's SQL with the schema filled in. The schema
// is an identifier, which SQL cannot take as a parameter: it is validated
// by parseTarget and quoted here; every value is a parameter.
type statements struct {
	insertChange, selectChanges, countChanges, updateChange, changeStatus string
	tallyChanges                                                          string
	deleteChanges                                                         string
	tables                                                                sqlval.ChangeTables
	insertRun, selectRuns, updateRun, runStatus, lockRuns, deleteRuns     string
	getMeta, setMeta                                                      string
	appendHistory, selectHistory, chainHead, prunedLinks                  string
	appendChained, appendChainedAsync                                     string
	unlinkChanges, unlinkRuns                                             string
}

func newStatements(schema string) statements {
	s := pgx.Identifier{schema}.Sanitize()
	r := strings.NewReplacer("{changes}", s+".changes", "{runs}", s+".runs", "{meta}", s+".meta", "{change_deps}", s+".change_deps", "{history}", s+".ledger_history", "{pruned}", s+".ledger_history_pruned", "{head}", s+".ledger_chain_head")
	return statements{
		// One statement inserts the change and its change_deps rows
		// (none when depends_on is NULL), so that neither is ever
		// stored without the other.
		insertChange: r.Replace(`WITH c AS (INSERT INTO {changes} (` + sqlval.Changes.Columns() + `) VALUES (` +
			placeholders(1, sqlval.Changes.Len()) + `) RETURNING id, depends_on)
			INSERT INTO {change_deps} (change_id, resource)
			SELECT DISTINCT c.id, d.resource FROM c, json_array_elements_text(c.depends_on::json) AS d (resource)`),
		selectChanges: r.Replace(`SELECT ` + sqlval.Changes.Columns() + ` FROM {changes}`),
		countChanges:  r.Replace(`SELECT count(*) FROM {changes}`),
		tallyChanges:  r.Replace(`SELECT ` + sqlval.TallyColumns + ` FROM {changes}`),
		tables:        sqlval.ChangeTables{Changes: r.Replace(`{changes}`), Deps: r.Replace(`{change_deps}`)},
		updateChange: r.Replace(`UPDATE {changes} SET ` + sqlval.Changes.Assignments(dollar) +
			` WHERE id = ` + dollar(sqlval.Changes.Mutable()+1) + ` AND status = ` + dollar(sqlval.Changes.Mutable()+2)),
		changeStatus:  r.Replace(`SELECT status FROM {changes} WHERE id = $1`),
		deleteChanges: r.Replace(`DELETE FROM {changes} WHERE id = ANY($1) AND status = ANY($2) RETURNING id`),
		insertRun:     r.Replace(`INSERT INTO {runs} (` + sqlval.Runs.Columns() + `) VALUES (` + placeholders(1, sqlval.Runs.Len()) + `)`),
		selectRuns:    r.Replace(`SELECT ` + sqlval.Runs.Columns() + ` FROM {runs}`),
		updateRun: r.Replace(`UPDATE {runs} SET ` + sqlval.Runs.Assignments(dollar) +
			` WHERE id = ` + dollar(sqlval.Runs.Mutable()+1) + ` AND status = ` + dollar(sqlval.Runs.Mutable()+2)),
		runStatus: r.Replace(`SELECT status FROM {runs} WHERE id = $1`),
		lockRuns:  r.Replace(`SELECT id FROM {runs} WHERE id = ANY($1) ORDER BY id FOR UPDATE`),
		deleteRuns: r.Replace(`DELETE FROM {runs} WHERE id = ANY($1)
			AND NOT EXISTS (SELECT 1 FROM {changes} WHERE {changes}.run_id = {runs}.id) RETURNING id`),
		getMeta:            r.Replace(`SELECT value FROM {meta} WHERE key = $1`),
		setMeta:            r.Replace(`INSERT INTO {meta} (key, value) VALUES ($1, $2) ON CONFLICT (key) DO NOTHING`),
		appendHistory:      r.Replace(`INSERT INTO {history} (` + sqlval.HistoryColumns + `) VALUES (` + placeholders(1, 11) + `)`),
		selectHistory:      r.Replace(`SELECT ` + sqlval.HistorySelect + ` FROM {history}`),
		chainHead:          r.Replace(`SELECT seq, hash FROM {head} WHERE id = 1`),
		appendChained:      r.Replace(appendChainedSQL("")),
		appendChainedAsync: r.Replace(appendChainedSQL(`, (SELECT set_config('synchronous_commit', 'off', true)) AS async`)),
		prunedLinks:        r.Replace(`SELECT seq, hash FROM {pruned} WHERE seq > $1 ORDER BY seq LIMIT $2`),
		// A prune deletes rows (DELETE … RETURNING, which waits for a row
		// another transaction holds and judges it by what that one left),
		// then moves their history entries' links aside, in a statement
		// whose fresh snapshot at READ COMMITTED sees every entry
		// committed before the rows were locked.
		unlinkChanges: r.Replace(`WITH gone AS (DELETE FROM {history} WHERE change_id = ANY($1) RETURNING seq, hash)
			INSERT INTO {pruned} (seq, hash) SELECT seq, coalesce(hash, '\x` + strings.Repeat("00", 32) + `'::bytea) FROM gone`),
		unlinkRuns: r.Replace(`WITH gone AS (DELETE FROM {history} WHERE run_id = ANY($1) RETURNING seq, hash)
			INSERT INTO {pruned} (seq, hash) SELECT seq, coalesce(hash, '\x` + strings.Repeat("00", 32) + `'::bytea) FROM gone`),
	}
}
