package sqlite

import (
	"context"
	"database/sql"
	sqldriver "database/sql/driver"

	"github.com/mcp-changeset/changeset-go/ledger"
)

// Durability in WAL mode. A commit appends its pages to the write-ahead
// log. With synchronous=FULL the commit then syncs the log (one fdatasync)
// before it returns; with synchronous=NORMAL it returns at once, its
// pages in the operating system's page cache, where a crash of the
// process cannot lose them, and they reach the disk with the next sync of
// the log: the next FULL commit of any connection or process, which syncs
// the whole file and so every frame before its own, or the next
// checkpoint, which syncs the log before it copies it. Frames are
// appended in commit order and checksummed in a chain, so a machine that
// stops before a sync loses a tail of unsynced commits, never one in the
// middle.
//
// Every connection of the pool runs with synchronous=FULL (the DSN sets
// it; verifyPragmas checks it). Under ledger.DurabilityClaims a lazy
// transaction takes a connection of its own from the pool, sets
// synchronous=NORMAL on it, and sets FULL again when the transaction has
// ended, before the connection goes back to the pool: a claim, an
// application's own write through DB() or a statement outside a
// transaction never commits with NORMAL. SQLite refuses to change the
// setting inside a transaction, which is why a transaction is lazy from
// its start (ledger.Ledger.WithLazyTx) and not from its first claim.

const (
	syncNormalSQL = "PRAGMA synchronous=NORMAL"
	syncFullSQL   = "PRAGMA synchronous=FULL"
)

// BeginLazyWrite is [Backend.BeginWrite] for a transaction that claims
// nothing (driver.LazyWriter). Under ledger.DurabilityClaims it commits
// with synchronous=NORMAL, on a connection that end sets back to FULL;
// otherwise it is BeginWrite.
func (b *Backend) BeginLazyWrite(ctx context.Context) (*sql.Tx, func(), error) {
	if b.durability != ledger.DurabilityClaims || b.readOnly {
		tx, err := b.BeginWrite(ctx)
		return tx, nil, err
	}
	const op = "begin transaction on"
	conn, err := b.db.Conn(ctx)
	if err != nil {
		return nil, nil, b.interpretError(op, err)
	}
	end := func() { b.giveBack(conn) }
	if _, err := conn.ExecContext(ctx, syncNormalSQL); err != nil {
		end()
		return nil, nil, b.interpretError(op, err)
	}
	tx, err := conn.BeginTx(ctx, nil)
	if err != nil {
		end()
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
