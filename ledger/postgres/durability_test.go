package postgres_test

import (
	"context"
	"fmt"
	"testing"
	"time"

	"github.com/mcp-changeset/changeset-go/internal/pgtest"
	"github.com/mcp-changeset/changeset-go/ledger"
	"github.com/mcp-changeset/changeset-go/ledger/driver"
)

// Under DurabilityClaims a lazy transaction commits with
// synchronous_commit off, for itself only (SET LOCAL): the transactions
// after it on the same connection, and statements outside one, keep the
// server's setting. Under DurabilityFull nothing changes it.
func TestDurability_LazyTxTurnsSynchronousCommitOffForItselfOnly(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	dsn := pgtest.DSN(t)
	for _, tc := range []struct {
		d    ledger.Durability
		lazy string // synchronous_commit inside a lazy transaction
	}{{ledger.DurabilityFull, "on"}, {ledger.DurabilityClaims, "off"}} {
		b := open(t, dsn, ledger.OpenOptions{Create: true, Durability: tc.d})
		b.DB().SetMaxOpenConns(1) // every statement on the lazy transaction's connection
		l := driver.NewLedger(b)
		show := func(q driver.Querier) string {
			var v string
			if err := q.QueryRowContext(ctx, "SHOW synchronous_commit").Scan(&v); err != nil {
				t.Fatal(err)
			}
			return v
		}
		if err := l.WithLazyTx(ctx, func(tx *ledger.Tx) error {
			if got := show(tx.SQL()); got != tc.lazy {
				t.Errorf("%s: lazy transaction: synchronous_commit=%s, want %s", tc.d, got, tc.lazy)
			}
			return nil
		}); err != nil {
			t.Fatal(err)
		}
		if got := show(b.DB()); got != "on" {
			t.Errorf("%s: after the lazy transaction: synchronous_commit=%s, want on", tc.d, got)
		}
		if err := l.WithTx(ctx, func(tx *ledger.Tx) error {
			if got := show(tx.SQL()); got != "on" {
				t.Errorf("%s: a claim's transaction: synchronous_commit=%s, want on", tc.d, got)
			}
			return nil
		}); err != nil {
			t.Fatal(err)
		}
	}
}

// A durable transaction that appends to the history commits without
// waiting for the disk, so as not to hold the chain's lock through a
// flush, and then waits: when the ledger's Commit returns, the server has
// flushed its WAL past everything the transaction wrote. (Without the
// wait, the WAL writer flushes an asynchronous commit up to 600 ms later:
// twenty transitions in a row would not all find it flushed.)
func TestDurability_AChainedCommitIsOnTheDiskWhenCommitReturns(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	dsn := pgtest.DSN(t)
	for _, d := range []ledger.Durability{ledger.DurabilityFull, ledger.DurabilityClaims} {
		b := open(t, dsn, ledger.OpenOptions{Create: true, Durability: d})
		l := driver.NewLedger(b)
		for i := range 20 {
			var wrote string
			err := l.WithTx(ctx, func(tx *ledger.Tx) error {
				c := &ledger.Change{ID: fmt.Sprintf("chg_%s_%d", d, i), Action: "a", Status: ledger.Pending, ScopeHash: "s",
					Payload: []byte(`{}`), ConfirmHash: "c", CreatedAt: time.Now(), UpdatedAt: time.Now(), ExpiresAt: time.Now().Add(time.Minute)}
				if err := tx.InsertChange(c); err != nil {
					return err
				}
				return tx.SQL().QueryRowContext(ctx, "SELECT pg_current_wal_insert_lsn()::text").Scan(&wrote)
			})
			if err != nil {
				t.Fatal(err)
			}
			var flushed bool
			if err := b.DB().QueryRowContext(ctx, "SELECT pg_current_wal_flush_lsn() >= $1::pg_lsn", wrote).Scan(&flushed); err != nil {
				t.Fatal(err)
			}
			if !flushed {
				t.Fatalf("%s: transition %d: the WAL is not flushed past %s when Commit returned", d, i, wrote)
			}
		}
	}
}
