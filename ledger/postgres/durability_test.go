package postgres_test

import (
	"context"
	"testing"

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
