package sqlite

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strconv"
	"time"

	"github.com/mcp-changeset/changeset-go/ledger"
	"github.com/mcp-changeset/changeset-go/ledger/driver"
)

var _ driver.Compactor = (*Backend)(nil)

// SQLite keeps the pages of deleted rows in the file, on its freelist,
// and reuses them for new rows; the file never shrinks by itself. A
// ledger gives them back to the disk through incremental auto-vacuum:
//
//   - a new ledger is created with PRAGMA auto_vacuum = INCREMENTAL
//     (initAutoVacuum), which SQLite can only set before the file's
//     first page is written;
//   - after Prune deletes, Reclaim runs PRAGMA incremental_vacuum in short
//     steps, each moving up to reclaimStep pages from the end of the file
//     into free pages, and a checkpoint then truncates the file;
//   - a ledger created before has auto_vacuum NONE, which only a VACUUM
//     can change: Vacuum rewrites the file once, with incremental
//     auto-vacuum from then on.
//
// docs/reliability.md ("Disk space") gives the measured costs.

// autoVacuumIncremental is PRAGMA auto_vacuum's value for INCREMENTAL.
const autoVacuumIncremental = 2

// reclaimStep is how many free pages one step of Reclaim returns to the
// disk: 16 MiB of 4 KiB pages, about 30 ms on the machine of
// docs/benchmarks.md, which a writer of another process waits at most.
const reclaimStep = 1024

// initAutoVacuum sets incremental auto-vacuum on the new, empty file
// Open is creating, before anything else writes its first page (the
// read-write pool's switch to WAL mode would), on a connection of its
// own. Another process creating the same ledger at once may hold the
// file: then that process sets it, and a busy file is no error here.
func (b *Backend) initAutoVacuum(ctx context.Context, timeout time.Duration) error {
	abs, err := filepath.Abs(b.path)
	if err != nil {
		return b.openError(err)
	}
	dsn := "file:" + escapePath(filepath.ToSlash(abs)) + "?_pragma=busy_timeout(" + strconv.FormatInt(timeoutMillis(timeout), 10) +
		")&_pragma=auto_vacuum(" + strconv.Itoa(autoVacuumIncremental) + ")&_pragma=journal_mode(WAL)"
	db, err := sql.Open(driverName, dsn)
	if err != nil {
		return b.interpretError("open", err)
	}
	defer db.Close()
	conn, err := db.Conn(ctx)
	if err != nil {
		if err := b.interpretError("open", err); !errors.Is(err, ledger.ErrBusy) {
			return err
		}
		return nil
	}
	return b.interpretError("open", conn.Close())
}

// Size returns the size of the ledger's file and its write-ahead log, in
// bytes.
func (b *Backend) Size(ctx context.Context) (int64, error) {
	fi, err := os.Stat(b.path)
	if err != nil {
		return 0, b.interpretError("size", err)
	}
	size := fi.Size()
	if wi, err := os.Stat(b.path + "-wal"); err == nil {
		size += wi.Size()
	}
	return size, nil
}

// Reclaim returns the file's free pages to the disk when the ledger has
// incremental auto-vacuum, in steps of at most reclaimStep pages, each a
// write transaction of its own taken in this process's turn; then it
// checkpoints the write-ahead log into the file, which truncates the
// file, and empties the log. A reader of another process that holds an
// old snapshot can delay the truncation to a later checkpoint.
//
// Without incremental auto-vacuum (a ledger created before this package
// set it) it only checkpoints and empties the log, and reports false:
// the free pages stay in the file, for new rows, until Vacuum.
func (b *Backend) Reclaim(ctx context.Context) (bool, error) {
	const op = "reclaim the free space of"
	var mode, free int64
	if err := b.db.QueryRowContext(ctx, "PRAGMA auto_vacuum").Scan(&mode); err != nil {
		return false, b.interpretError(op, err)
	}
	if mode != autoVacuumIncremental {
		// The free pages stay, but the log the prune wrote need not.
		return false, b.checkpoint(ctx, op)
	}
	if err := b.db.QueryRowContext(ctx, "PRAGMA freelist_count").Scan(&free); err != nil {
		return false, b.interpretError(op, err)
	}
	// Bounded: pages another writer frees meanwhile wait for the next
	// prune.
	for steps := free/reclaimStep + 1; free > 0 && steps > 0; steps-- {
		if err := b.Yield(ctx); err != nil {
			return false, err
		}
		err := b.inTurn(ctx, op, func(tx *sql.Tx) error {
			if _, err := tx.ExecContext(ctx, "PRAGMA incremental_vacuum("+strconv.Itoa(reclaimStep)+")"); err != nil {
				return err
			}
			return tx.QueryRowContext(ctx, "PRAGMA freelist_count").Scan(&free)
		})
		if err != nil {
			return false, err
		}
	}
	return true, b.checkpoint(ctx, op)
}

// Vacuum rewrites the file with VACUUM, after PRAGMA auto_vacuum =
// INCREMENTAL on the same connection so that the rewritten file has
// incremental auto-vacuum, and checkpoints the write-ahead log, which
// then holds the whole file, into it. It holds this process's write turn
// and the file's write lock until it is done.
func (b *Backend) Vacuum(ctx context.Context) error {
	const op = "vacuum"
	if b.readOnly {
		return &ledger.Error{Op: op, Location: b.path, Err: errOpenedReadOnly}
	}
	release, err := b.TakeWriteTurn(ctx)
	if err != nil {
		return err
	}
	defer release()
	conn, err := b.db.Conn(ctx)
	if err != nil {
		return b.interpretError(op, err)
	}
	defer conn.Close()
	for _, stmt := range []string{"PRAGMA auto_vacuum = " + strconv.Itoa(autoVacuumIncremental), "VACUUM"} {
		if _, err := conn.ExecContext(ctx, stmt); err != nil {
			return b.interpretError(op, err)
		}
	}
	var mode int64
	if err := conn.QueryRowContext(ctx, "PRAGMA auto_vacuum").Scan(&mode); err != nil {
		return b.interpretError(op, err)
	}
	if mode != autoVacuumIncremental {
		return &ledger.Error{Op: op, Location: b.path, Err: fmt.Errorf("PRAGMA auto_vacuum is %d after VACUUM, not %d (incremental)", mode, autoVacuumIncremental)}
	}
	return b.checkpointOn(ctx, op, conn)
}

// yieldGap is how long Yield leaves the file's write lock free: the
// writers of other processes poll it, at most 100 ms apart once they have
// waited a while, and transactions taken back to back would keep them
// out for many in a row.
const yieldGap = 100 * time.Millisecond

// Yield lets the writers of other processes in between two of Prune's
// or Reclaim's write transactions. It first checkpoints what the last
// one wrote to the write-ahead log (PRAGMA wal_checkpoint(PASSIVE), in
// this process's write turn), so that the next writer's commit does not
// run that checkpoint itself, as SQLite's automatic checkpoint would make
// it; then it leaves the lock free for yieldGap.
func (b *Backend) Yield(ctx context.Context) error {
	const op = "checkpoint"
	if !b.readOnly {
		release, err := b.TakeWriteTurn(ctx)
		if err != nil {
			return err
		}
		_, err = b.db.ExecContext(ctx, "PRAGMA wal_checkpoint(PASSIVE)")
		release()
		if err := b.interpretError(op, err); err != nil && !errors.Is(err, ledger.ErrBusy) {
			return err
		}
	}
	t := time.NewTimer(yieldGap)
	defer t.Stop()
	select {
	case <-ctx.Done():
		return b.interpretError(op, ctx.Err())
	case <-t.C:
		return nil
	}
}

// inTurn runs fn in a write transaction of its own, in this process's
// write turn.
func (b *Backend) inTurn(ctx context.Context, op string, fn func(tx *sql.Tx) error) error {
	if b.readOnly {
		return &ledger.Error{Op: op, Location: b.path, Err: errOpenedReadOnly}
	}
	release, err := b.TakeWriteTurn(ctx)
	if err != nil {
		return err
	}
	defer release()
	tx, err := b.BeginWrite(ctx)
	if err != nil {
		return err
	}
	defer tx.Rollback()
	if err := fn(tx); err != nil {
		return b.interpretError(op, err)
	}
	return b.interpretError(op, tx.Commit())
}

// checkpoint copies the write-ahead log into the file, in this process's
// write turn, truncating the file to its pages and the log to nothing.
func (b *Backend) checkpoint(ctx context.Context, op string) error {
	release, err := b.TakeWriteTurn(ctx)
	if err != nil {
		return err
	}
	defer release()
	conn, err := b.db.Conn(ctx)
	if err != nil {
		return b.interpretError(op, err)
	}
	defer conn.Close()
	return b.checkpointOn(ctx, op, conn)
}

// checkpointOn runs PRAGMA wal_checkpoint(TRUNCATE) on conn. A checkpoint
// that readers kept from finishing is no error: the next one finishes it.
func (b *Backend) checkpointOn(ctx context.Context, op string, conn *sql.Conn) error {
	var busy, frames, done int64
	err := conn.QueryRowContext(ctx, "PRAGMA wal_checkpoint(TRUNCATE)").Scan(&busy, &frames, &done)
	if err != nil {
		if err := b.interpretError(op, err); !errors.Is(err, ledger.ErrBusy) {
			return err
		}
	}
	return nil
}
