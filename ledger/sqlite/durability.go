package sqlite

import (
	"context"
	"database/sql"
	sqldriver "database/sql/driver"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"sync"
	"sync/atomic"

	"github.com/mcp-changeset/changeset-go/ledger"
)

// Durability in WAL mode. A commit appends its pages to the write-ahead
// log. With synchronous=FULL the commit then syncs the log (one fdatasync)
// before it returns; with synchronous=NORMAL it returns at once, its
// pages in the operating system's page cache, where a crash of the
// process cannot lose them, and they reach the disk with the next sync of
// the log: the next FULL commit of any connection or process, which syncs
// the whole file and so every frame before its own, the next sync of the
// group below, or the next checkpoint, which syncs the log before it
// copies it. Frames are appended in commit order and checksummed in a
// chain, so a machine that stops before a sync loses a tail of unsynced
// commits, never one in the middle.
//
// Every connection of the pool runs with synchronous=FULL (the DSN sets
// it; verifyPragmas checks it), and under ledger.DurabilityFull every
// transaction commits so. Under ledger.DurabilityClaims each write
// transaction takes a connection of its own from the pool, sets
// synchronous=NORMAL on it, and sets FULL again when the transaction has
// ended, before the connection goes back to the pool: a statement outside
// a transaction, an application's own write through DB() included, always
// commits with FULL. SQLite refuses to change the setting inside a
// transaction, which is why a transaction is lazy from its start
// (ledger.Ledger.WithLazyTx) and not from its first claim.
//
// A lazy transaction's commit returns at once. Any other (a claim) then
// waits for a sync of the log that started after it committed: one
// fdatasync serves every claim of the process committed before it began
// (group commit). The claim's write lock is given back before that sync,
// so the next writer commits while the disk works, and under load one
// sync carries many claims. The sync is of the log file at the ledger's
// path: a commit's frames stay in that file until a checkpoint, which
// syncs them into the database first, has copied them (resetting,
// truncating or deleting the log only after that), so a sync of the file
// found there covers every frame not yet made durable otherwise.

const (
	syncNormalSQL = "PRAGMA synchronous=NORMAL"
	syncFullSQL   = "PRAGMA synchronous=FULL"
)

// BeginDurableWrite is [Backend.BeginWrite] for the ledger's durability
// (driver.DurableWriter). Under ledger.DurabilityClaims the transaction
// commits with synchronous=NORMAL, on a connection that end sets back to
// FULL, and end makes a transaction that is not lazy durable with a sync
// of the log shared with the process's other claims (see above).
// Otherwise it is BeginWrite.
func (b *Backend) BeginDurableWrite(ctx context.Context, lazy bool) (*sql.Tx, func(committed bool) error, error) {
	if b.durability != ledger.DurabilityClaims || b.readOnly {
		tx, err := b.BeginWrite(ctx)
		return tx, nil, err
	}
	const op = "begin transaction on"
	conn, err := b.db.Conn(ctx)
	if err != nil {
		return nil, nil, b.interpretError(op, err)
	}
	end := func(committed bool) error {
		b.giveBack(conn)
		if lazy || !committed {
			return nil
		}
		if err := b.group.sync(); err != nil {
			return &ledger.Error{Op: "sync the commit to", Location: b.path, Err: err}
		}
		return nil
	}
	if _, err := conn.ExecContext(ctx, syncNormalSQL); err != nil {
		_ = end(false)
		return nil, nil, b.interpretError(op, err)
	}
	tx, err := conn.BeginTx(ctx, nil)
	if err != nil {
		_ = end(false)
		return nil, nil, b.interpretError(op, err)
	}
	return tx, end, nil
}

// giveBack sets conn back to synchronous=FULL and returns it to the pool,
// or, when that fails, closes the connection instead, so that no
// connection of the pool is ever left with NORMAL.
func (b *Backend) giveBack(conn *sql.Conn) {
	if _, err := conn.ExecContext(context.Background(), syncFullSQL); err != nil {
		// ErrBadConn from Raw makes database/sql discard the connection.
		_ = conn.Raw(func(any) error { return sqldriver.ErrBadConn })
	}
	_ = conn.Close()
}

// groupSync makes the claims of one process durable, sharing syncs of the
// ledger's write-ahead log: a claim that committed asks for a sync that
// starts after its commit, and the one sync at a time serves every claim
// that asked before it started.
type groupSync struct {
	path string // of the database; the log is path + "-wal"
	// syncLog syncs the log: syncFile, or what a test puts there.
	syncLog func() error

	asked  atomic.Uint64 // syncs asked for, each after a commit
	mu     sync.Mutex    // one sync at a time; guards the fields below
	synced uint64        // every request up to this one is served
	// dirSynced is the log file whose directory entry was synced: a new
	// log file is durable only once its directory is too.
	dirSynced os.FileInfo
}

// newGroupSync returns the group of the database at path.
func newGroupSync(path string) *groupSync {
	g := &groupSync{path: path}
	g.syncLog = g.syncFile
	return g
}

// sync returns once every commit of this process made before it was
// called is on the disk.
func (g *groupSync) sync() error {
	ticket := g.asked.Add(1)
	g.mu.Lock()
	defer g.mu.Unlock()
	if g.synced >= ticket {
		return nil // a sync that started after this commit has ended
	}
	upTo := g.asked.Load() // every commit that asked so far is in the log
	if err := g.syncLog(); err != nil {
		return err
	}
	g.synced = upTo
	return nil
}

// syncFile syncs the write-ahead log as it is now, and its directory the
// first time it sees that file. It runs under g.mu.
func (g *groupSync) syncFile() error {
	f, err := openLog(g.path + "-wal")
	if errors.Is(err, fs.ErrNotExist) {
		// The last connection closed, which checkpointed the log into the
		// database with syncs, then deleted it: nothing left to sync.
		return nil
	}
	if err != nil {
		return fmt.Errorf("open the write-ahead log to sync it: %w", err)
	}
	defer f.Close()
	if err := datasync(f); err != nil {
		return fmt.Errorf("sync the write-ahead log: %w", err)
	}
	fi, err := f.Stat()
	if err != nil {
		return err
	}
	if !syncDirs || (g.dirSynced != nil && os.SameFile(fi, g.dirSynced)) {
		return nil
	}
	dir, err := os.Open(filepath.Dir(g.path))
	if err != nil {
		return fmt.Errorf("open the ledger's directory to sync it: %w", err)
	}
	defer dir.Close()
	if err := dir.Sync(); err != nil {
		return fmt.Errorf("sync the ledger's directory: %w", err)
	}
	g.dirSynced = fi
	return nil
}
