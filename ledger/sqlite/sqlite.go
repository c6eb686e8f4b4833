// Package sqlite is the default ledger backend: a single SQLite file in WAL
// mode, reached through the pure-Go driver modernc.org/sqlite.
//
// Importing the package registers it with [driver.Register] for plain
// file paths, so that [ledger.Open] accepts them:
//
//	import _ "github.com/mcp-changeset/changeset-go/ledger/sqlite"
//
// A file is a changeset ledger only if its PRAGMA application_id is
// [ApplicationID]. Open checks that on a read-only connection before it
// writes anything, and refuses any other file (another application's
// database, a text file, an empty file it was not asked to create) without
// changing it. A ledger written by a newer version of this package (a
// PRAGMA user_version above [SchemaVersion]) is refused too; an older one is
// upgraded in place, in one transaction.
//
// A damaged file is refused too, unchanged, with an error wrapping
// [ledger.ErrCorrupt]: before the read-write connections open, Open checks
// the file's header and page count and runs an integrity check chosen by
// [ledger.OpenOptions.Check] (all of a file up to 8 MiB; a bounded
// sample of each b-tree of a larger one). Damage it did not read surfaces
// as the same error when the damaged page is first read.
//
// Every write transaction starts with BEGIN IMMEDIATE, so it holds the
// file's write lock from its first statement; readers are never blocked by
// it. Every commit waits for the disk (synchronous=FULL), except, under
// [ledger.DurabilityClaims], those of lazy transactions, and claims then
// share their syncs (see [Backend.BeginDurableWrite]). The file must be on
// a local disk: SQLite's WAL mode and locks are unsafe on network
// filesystems, which Open detects and refuses unless
// [ledger.OpenOptions.AllowNetworkFS] is set.
//
// A read-only open ([ledger.OpenOptions.ReadOnly]) never changes the main
// database file, but SQLite may create the -wal and -shm side files beside a
// WAL-mode database, since even readers need the shared-memory index.
package sqlite

import (
	"context"
	"database/sql"
	"fmt"
	"path/filepath"
	"sync"
	"sync/atomic"
	"time"

	"github.com/mcp-changeset/changeset-go/ledger"
	"github.com/mcp-changeset/changeset-go/ledger/driver"
	_ "modernc.org/sqlite" // registers the "sqlite" database/sql driver
)

// ApplicationID is the PRAGMA application_id of every changeset ledger
// ("MCCS" in ASCII). A SQLite file with any other application_id is not a
// ledger and is never changed.
const ApplicationID int32 = 0x4D434353

// SchemaVersion is the PRAGMA user_version of a ledger whose schema is
// current for this package.
const SchemaVersion = 17

// Connection pool limits. SQLite in WAL mode serves many readers at once
// while writers queue on the file's write lock (BEGIN IMMEDIATE), so the
// pool only needs to be large enough that a goroutine holding a write
// transaction can still read on another connection while others wait for
// the lock.
const (
	maxOpenConns    = 16
	maxIdleConns    = 4
	connMaxIdleTime = 5 * time.Minute
)

// driverName is the database/sql driver registered by modernc.org/sqlite.
const driverName = "sqlite"

func init() {
	driver.Register("file", func(ctx context.Context, target string, opts ledger.OpenOptions) (driver.Backend, error) {
		b, err := Open(ctx, target, opts)
		if err != nil {
			return nil, err // never a typed nil in the interface
		}
		return b, nil
	})
}

// Backend is a ledger stored in one SQLite file. It implements
// [driver.Backend] and is safe for concurrent use; the file may be shared by
// many processes on the same host.
type Backend struct {
	db       *sql.DB
	path     string
	readOnly bool
	stmts    sync.Map // query → *sql.Stmt, see prepared.go
	// unpreparedInTx counts the statements run unprepared inside a
	// transaction through the helpers of prepared.go, for a test that
	// the hot path runs none.
	unpreparedInTx atomic.Int64

	// size is the file's size with its write-ahead log when Open found
	// it; fullCheckLimit is the size up to which ledger.CheckAuto runs
	// the full quick_check (see opencheck.go).
	size           int64
	fullCheckLimit int64

	// writeTurn is this process's queue of writers (driver.WriteQueue);
	// busyTimeout bounds the wait for a turn, as for the file's lock.
	writeTurn   chan struct{}
	busyTimeout time.Duration

	// durability is ledger.OpenOptions.Durability; group shares the
	// syncs of its claims (see durability.go).
	durability ledger.Durability
	group      *groupSync
}

var (
	_ driver.Backend          = (*Backend)(nil)
	_ driver.WriteQueue       = (*Backend)(nil)
	_ driver.ErrorInterpreter = (*Backend)(nil)
	_ driver.DurableWriter    = (*Backend)(nil)
)

// Open opens the ledger in the SQLite file at path.
//
// A missing file is created only when opts.Create is set (and opts.ReadOnly
// is not); otherwise Open fails with an error wrapping [ledger.ErrNotExist]
// and creates nothing. Open never creates directories: the parent directory
// of a new ledger must exist. A new file is readable by its owner only (mode
// 0600, which SQLite's -wal and -shm files copy).
//
// An existing file is used only if it is a changeset ledger; an empty file,
// or a SQLite database with no schema at all, is initialised only when
// opts.Create is set, and only if the open-time integrity check
// (opts.Check) finds no damage. Errors are *ledger.Error values wrapping
// [ledger.ErrForeign], [ledger.ErrNewerSchema], [ledger.ErrCorrupt],
// [ledger.ErrNetworkFS], [ledger.ErrBusy] or [ledger.ErrReadOnly] as the
// cause may be.
func Open(ctx context.Context, path string, opts ledger.OpenOptions) (*Backend, error) {
	return open(ctx, path, opts, fullCheckMaxBytes)
}

// open is Open with the size up to which ledger.CheckAuto reads the whole
// file, which tests lower to exercise the structural check on small files.
func open(ctx context.Context, path string, opts ledger.OpenOptions, fullCheckLimit int64) (*Backend, error) {
	b := &Backend{path: path, readOnly: opts.ReadOnly, fullCheckLimit: fullCheckLimit, writeTurn: make(chan struct{}, 1), durability: opts.Durability,
		group: newGroupSync(absPath(path))}
	timeout := opts.BusyTimeout
	if timeout <= 0 {
		timeout = ledger.DefaultBusyTimeout
	}
	b.busyTimeout = timeout
	fresh, err := b.preflight(opts)
	if err != nil {
		return nil, err
	}
	if fresh {
		if err := b.initAutoVacuum(ctx, timeout); err != nil {
			return nil, err
		}
	}
	if !fresh {
		// Decide on a read-only connection, before anything can write
		// to the file, whether it is ours and undamaged.
		if err := b.inspect(ctx, timeout, opts.Create, opts.Check); err != nil {
			return nil, err
		}
		// migrate decides again on the read-write pool. Only a file
		// swapped in between the two would have its journal mode set
		// by the pool's DSN before being refused.
	}
	dsn, err := buildDSN(path, opts.ReadOnly, timeout)
	if err != nil {
		return nil, b.openError(err)
	}
	db, err := sql.Open(driverName, dsn)
	if err != nil {
		return nil, b.interpretError("open", err)
	}
	db.SetMaxOpenConns(maxOpenConns)
	db.SetMaxIdleConns(maxIdleConns)
	db.SetConnMaxIdleTime(connMaxIdleTime)
	b.db = db
	if err := b.verifyPragmas(ctx, timeout); err != nil {
		db.Close()
		return nil, err
	}
	if err := b.migrate(ctx, opts.Create); err != nil {
		db.Close()
		return nil, err
	}
	b.prepareHot(ctx)
	return b, nil
}

// DB returns the database handle, for applications that keep their own
// tables beside the ledger's.
func (b *Backend) DB() *sql.DB { return b.db }

// Location returns the path the ledger was opened with.
func (b *Backend) Location() string { return b.path }

// Close closes the database. The last connection to close checkpoints the
// write-ahead log into the main file.
func (b *Backend) Close() error {
	b.closeStatements()
	return b.interpretError("close", b.db.Close())
}

// TakeWriteTurn waits for this process's turn to write (see
// driver.WriteQueue): SQLite takes one writer at a time, and its lock is
// polled by sleeping waiters, so a writer of a busy process could otherwise
// wait past the busy timeout while others keep taking the lock.
func (b *Backend) TakeWriteTurn(ctx context.Context) (func(), error) {
	timer := time.NewTimer(b.busyTimeout)
	defer timer.Stop()
	select {
	case b.writeTurn <- struct{}{}:
		return func() { <-b.writeTurn }, nil
	case <-ctx.Done():
		return nil, b.interpretError("begin transaction on", ctx.Err())
	case <-timer.C:
		return nil, &ledger.Error{Op: "begin transaction on", Location: b.path, Err: fmt.Errorf("%w: this process's other writers held the ledger for %v", ledger.ErrBusy, b.busyTimeout)}
	}
}

// BeginWrite starts a transaction with BEGIN IMMEDIATE, so that it holds the
// file's write lock from the start. It waits for another writer for at most
// the busy timeout and then fails with an error wrapping [ledger.ErrBusy].
func (b *Backend) BeginWrite(ctx context.Context) (*sql.Tx, error) {
	const op = "begin transaction on"
	if b.readOnly {
		return nil, &ledger.Error{Op: op, Location: b.path, Err: errOpenedReadOnly}
	}
	tx, err := b.db.BeginTx(ctx, nil)
	if err != nil {
		return nil, b.interpretError(op, err)
	}
	return tx, nil
}

// BeginSnapshot starts a read-only transaction: a plain BEGIN, whatever
// the pool's _txlock, which takes no write lock, and whose first read
// fixes the state it sees (SQLite's WAL snapshot) until it ends. A long
// one keeps the write-ahead log from being checkpointed past it.
func (b *Backend) BeginSnapshot(ctx context.Context) (*sql.Tx, error) {
	tx, err := b.db.BeginTx(ctx, &sql.TxOptions{ReadOnly: true})
	return tx, b.interpretError("begin a read transaction on", err)
}

// absPath is path made absolute, so that a change of the working directory
// cannot point the group's syncs at another file; path itself when that
// fails (Open then fails on it too).
func absPath(path string) string {
	if abs, err := filepath.Abs(path); err == nil {
		return abs
	}
	return path
}
