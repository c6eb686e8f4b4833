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
// transaction's commit is durable when the ledger's Commit returns.
//
// Unlike SQLite's, PostgreSQL's page cache is the server's: a crash of the
// server process (not only of the machine) can lose lazy commits. A crash
// of the client loses nothing. docs/reliability.md says what that risks.
//
// The history's chain. A transaction that appends to the history holds
// the lock of the chain's head row (AppendChained) until it ends, and a synchronous commit
// ends only once its WAL record is flushed: holding the lock through the
// flush would make the committers of every client take turns at the
// disk, one flush each, where the server otherwise shares one flush among
// all the commits waiting at once (measured: 16 clients fell from 216 to
// about 35 cycles a second). So a durable transaction that takes the
// chain's lock commits asynchronously (set_config('synchronous_commit',
// 'off', true) in the append's statement, which releases the lock as
// soon as the commit is in the WAL), and its end then waits for the
// flush: a synchronous commit of
// its own (syncBarrierSQL, which waits until the WAL is flushed up to its
// commit record, and so up to the transaction's commit before it), shared
// with every other commit waiting then. Another
// transaction may see the commit before it is on the disk; anything it
// then commits comes after it in the WAL, so it is never durable without
// it, and the Commit that made it returns only once it is durable.
func (b *Backend) BeginDurableWrite(ctx context.Context, lazy bool) (*sql.Tx, func(bool) error, error) {
	tx, err := b.BeginWrite(ctx)
	if err != nil {
		return tx, nil, err
	}
	if lazy && b.durability == ledger.DurabilityClaims {
		if _, err := tx.ExecContext(ctx, "SET LOCAL synchronous_commit TO off"); err != nil {
			_ = tx.Rollback()
			return nil, nil, b.interpretError("begin transaction on", err)
		}
		return tx, nil, nil
	}
	c := &commitSync{ctx: context.WithoutCancel(ctx)}
	b.commits.Store(tx, c)
	return tx, func(committed bool) error {
		b.commits.Delete(tx)
		if !committed || !c.async {
			return nil
		}
		_, err := b.db.ExecContext(c.ctx, syncBarrierSQL)
		return b.interpretError("wait for the commit to reach the disk on", err)
	}, nil
}

// syncBarrierSQL is a transaction of its own that waits until the WAL is
// flushed up to its commit: PostgreSQL flushes at commit only a
// transaction that wrote to the WAL besides its commit record, and a
// transactional logical message (an empty one, under a prefix of this
// library's, which nothing decodes unless someone subscribes to it) is
// the smallest such write any role may make, at any wal_level (minimal
// included: checked on PostgreSQL 15), without a table.
const syncBarrierSQL = `SELECT pg_logical_emit_message(true, 'changeset-go/sync', '')`

// commitSync is how a durable write transaction's commit reaches the
// disk: async when ChainHead turned synchronous_commit off for it, so that
// its end must wait for the flush.
type commitSync struct {
	ctx   context.Context // the transaction's, without its cancellation
	async bool
}

// asyncCommit reports whether q is a durable write transaction of this
// backend, and marks it to commit without waiting for the disk and to wait
// at its end: the chain's append then turns synchronous_commit off for
// it.
func (b *Backend) asyncCommit(q any) bool {
	tx, ok := q.(*sql.Tx)
	if !ok {
		return false
	}
	v, ok := b.commits.Load(tx)
	if ok {
		v.(*commitSync).async = true
	}
	return ok
}
