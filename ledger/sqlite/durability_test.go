package sqlite

import (
	"context"
	"fmt"
	"path/filepath"
	"sync"
	"testing"
	"time"

	"github.com/mcp-changeset/changeset-go/ledger"
	"github.com/mcp-changeset/changeset-go/ledger/driver"
)

// syncLevel reads PRAGMA synchronous on q: 1 is NORMAL, 2 FULL.
func syncLevel(t *testing.T, q driver.Querier) int {
	t.Helper()
	var level int
	if err := q.QueryRowContext(context.Background(), "PRAGMA synchronous").Scan(&level); err != nil {
		t.Fatal(err)
	}
	return level
}

// Under DurabilityClaims a lazy transaction commits with
// synchronous=NORMAL and every other commit with FULL, on whichever
// connection of the pool it runs: the lazy transaction's connection is set
// back to FULL before anything else can use it, a transaction (a claim)
// or a statement outside one. Under DurabilityFull every commit is FULL.
func TestDurability_LazyTxCommitsWithNormalAndLeavesEveryConnectionFull(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	for _, tc := range []struct {
		d    ledger.Durability
		lazy int // PRAGMA synchronous inside a lazy transaction
	}{{ledger.DurabilityFull, 2}, {ledger.DurabilityClaims, 1}} {
		t.Run(tc.d.String(), func(t *testing.T) {
			t.Parallel()
			b, err := Open(ctx, filepath.Join(t.TempDir(), "ledger.db"), ledger.OpenOptions{Create: true, Durability: tc.d})
			if err != nil {
				t.Fatal(err)
			}
			defer b.Close()
			l := driver.NewLedger(b)
			// One connection: the lazy transaction's is the one every
			// later statement gets.
			b.DB().SetMaxOpenConns(1)
			for i := range 3 {
				if err := l.WithLazyTx(ctx, func(tx *ledger.Tx) error {
					if got := syncLevel(t, tx.SQL()); got != tc.lazy {
						t.Errorf("lazy transaction %d: synchronous=%d, want %d", i, got, tc.lazy)
					}
					return tx.InsertChange(pendingChange(fmt.Sprint("chg_lazy_", i), time.Now()))
				}); err != nil {
					t.Fatal(err)
				}
				if got := syncLevel(t, b.DB()); got != 2 {
					t.Errorf("the pool's connection after lazy transaction %d: synchronous=%d, want 2 (FULL)", i, got)
				}
				if err := l.WithTx(ctx, func(tx *ledger.Tx) error {
					if got := syncLevel(t, tx.SQL()); got != 2 {
						t.Errorf("transaction after lazy transaction %d: synchronous=%d, want 2 (FULL)", i, got)
					}
					return nil
				}); err != nil {
					t.Fatal(err)
				}
			}
			// A rolled-back lazy transaction gives its connection back
			// set to FULL too.
			_ = l.WithLazyTx(ctx, func(tx *ledger.Tx) error { return fmt.Errorf("rolled back") })
			if got := syncLevel(t, b.DB()); got != 2 {
				t.Errorf("after a rolled-back lazy transaction: synchronous=%d, want 2 (FULL)", got)
			}
		})
	}
}

// Many goroutines mixing lazy and synced transactions on the full pool:
// every synced transaction runs with FULL whichever connection it gets.
func TestDurability_ConcurrentLazyAndSyncedTransactionsKeepTheirLevels(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	b, err := Open(ctx, filepath.Join(t.TempDir(), "ledger.db"), ledger.OpenOptions{Create: true, Durability: ledger.DurabilityClaims})
	if err != nil {
		t.Fatal(err)
	}
	defer b.Close()
	l := driver.NewLedger(b)
	var wg sync.WaitGroup
	for g := range 8 {
		wg.Go(func() {
			for i := range 20 {
				lazy := (g+i)%2 == 0
				want, with := 2, l.WithTx
				if lazy {
					want, with = 1, l.WithLazyTx
				}
				err := with(ctx, func(tx *ledger.Tx) error {
					var level int
					if err := tx.SQL().QueryRowContext(ctx, "PRAGMA synchronous").Scan(&level); err != nil {
						return err
					}
					if level != want {
						return fmt.Errorf("lazy=%v: synchronous=%d, want %d", lazy, level, want)
					}
					return nil
				})
				if err != nil {
					t.Error(err)
					return
				}
				// Reads outside a transaction, on any connection.
				var level int
				if err := b.DB().QueryRowContext(ctx, "PRAGMA synchronous").Scan(&level); err != nil || level != 2 {
					t.Errorf("outside a transaction: synchronous=%d (%v), want 2", level, err)
					return
				}
			}
		})
	}
	wg.Wait()
}
