package sqlite

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"sync"
	"sync/atomic"
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

// countSyncs makes b's group count its syncs of the log.
func countSyncs(b *Backend) *atomic.Int64 {
	var n atomic.Int64
	real := b.group.syncLog
	b.group.syncLog = func() error {
		n.Add(1)
		return real()
	}
	return &n
}

// Under DurabilityClaims every write transaction commits with
// synchronous=NORMAL, on whichever connection of the pool it runs, and
// that connection is set back to FULL before anything else can use it (a
// statement outside a transaction); a claim then waits for a sync of the
// log, a lazy transaction does not. Under DurabilityFull every commit is
// FULL and the group never syncs.
func TestDurability_LazyTxCommitsWithNormalAndLeavesEveryConnectionFull(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	for _, tc := range []struct {
		d        ledger.Durability
		inTx     int   // PRAGMA synchronous inside a transaction
		perClaim int64 // the group's syncs per claim
	}{{ledger.DurabilityFull, 2, 0}, {ledger.DurabilityClaims, 1, 1}} {
		t.Run(tc.d.String(), func(t *testing.T) {
			t.Parallel()
			b, err := Open(ctx, filepath.Join(t.TempDir(), "ledger.db"), ledger.OpenOptions{Create: true, Durability: tc.d})
			if err != nil {
				t.Fatal(err)
			}
			defer b.Close()
			syncs := countSyncs(b)
			l := driver.NewLedger(b)
			// One connection: the transactions' is the one every later
			// statement gets.
			b.DB().SetMaxOpenConns(1)
			for i := range 3 {
				if err := l.WithLazyTx(ctx, func(tx *ledger.Tx) error {
					if got := syncLevel(t, tx.SQL()); got != tc.inTx {
						t.Errorf("lazy transaction %d: synchronous=%d, want %d", i, got, tc.inTx)
					}
					return tx.InsertChange(pendingChange(fmt.Sprint("chg_lazy_", i), time.Now()))
				}); err != nil {
					t.Fatal(err)
				}
				if got := syncLevel(t, b.DB()); got != 2 {
					t.Errorf("the pool's connection after lazy transaction %d: synchronous=%d, want 2 (FULL)", i, got)
				}
				if n := syncs.Load(); n != int64(i)*tc.perClaim {
					t.Errorf("after lazy transaction %d: %d syncs of the group, want %d", i, n, int64(i)*tc.perClaim)
				}
				if err := l.WithTx(ctx, func(tx *ledger.Tx) error {
					if got := syncLevel(t, tx.SQL()); got != tc.inTx {
						t.Errorf("transaction after lazy transaction %d: synchronous=%d, want %d", i, got, tc.inTx)
					}
					return tx.InsertChange(pendingChange(fmt.Sprint("chg_claim_", i), time.Now()))
				}); err != nil {
					t.Fatal(err)
				}
				if got := syncLevel(t, b.DB()); got != 2 {
					t.Errorf("the pool's connection after transaction %d: synchronous=%d, want 2 (FULL)", i, got)
				}
				if n := syncs.Load(); n != int64(i+1)*tc.perClaim {
					t.Errorf("after transaction %d: %d syncs of the group, want %d", i, n, int64(i+1)*tc.perClaim)
				}
			}
			// A rolled-back transaction gives its connection back set to
			// FULL too, and syncs nothing.
			before := syncs.Load()
			_ = l.WithLazyTx(ctx, func(tx *ledger.Tx) error { return fmt.Errorf("rolled back") })
			_ = l.WithTx(ctx, func(tx *ledger.Tx) error { return fmt.Errorf("rolled back") })
			if got := syncLevel(t, b.DB()); got != 2 {
				t.Errorf("after rolled-back transactions: synchronous=%d, want 2 (FULL)", got)
			}
			if n := syncs.Load(); n != before {
				t.Errorf("rolled-back transactions synced the log %d times", n-before)
			}
		})
	}
}

// Many goroutines mixing lazy transactions and claims on the full pool:
// none leaves a connection with NORMAL behind, and the claims of the
// process share their syncs.
func TestDurability_ConcurrentClaimsShareSyncsAndLeaveEveryConnectionFull(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	b, err := Open(ctx, filepath.Join(t.TempDir(), "ledger.db"), ledger.OpenOptions{Create: true, Durability: ledger.DurabilityClaims})
	if err != nil {
		t.Fatal(err)
	}
	defer b.Close()
	syncs := countSyncs(b)
	l := driver.NewLedger(b)
	const goroutines, each = 8, 20
	var claims atomic.Int64
	var wg sync.WaitGroup
	for g := range goroutines {
		wg.Go(func() {
			for i := range each {
				with := l.WithTx
				if (g+i)%2 == 0 {
					with = l.WithLazyTx
				} else {
					claims.Add(1)
				}
				err := with(ctx, func(tx *ledger.Tx) error {
					return tx.InsertChange(pendingChange(fmt.Sprintf("chg_%d_%d", g, i), time.Now()))
				})
				if err != nil {
					t.Error(err)
					return
				}
				var level int
				if err := b.DB().QueryRowContext(ctx, "PRAGMA synchronous").Scan(&level); err != nil || level != 2 {
					t.Errorf("outside a transaction: synchronous=%d (%v), want 2", level, err)
					return
				}
			}
		})
	}
	wg.Wait()
	if n := syncs.Load(); n < 1 || n > claims.Load() {
		t.Errorf("%d claims made %d syncs of the log, want between 1 and %d", claims.Load(), n, claims.Load())
	}
	t.Logf("%d claims, %d syncs", claims.Load(), syncs.Load())
}

// A claim returns only once a sync that started after its commit has
// ended: under contention one sync serves many claims, and a failed sync
// fails the claims that waited for it, each trying its own.
func TestGroupSync_EveryCallerWaitsForASyncStartedAfterIt(t *testing.T) {
	t.Parallel()
	g := newGroupSync(filepath.Join(t.TempDir(), "ledger.db"))
	var mu sync.Mutex
	var started []uint64 // g.asked when each sync started
	g.syncLog = func() error {
		mu.Lock()
		started = append(started, g.asked.Load())
		mu.Unlock()
		time.Sleep(2 * time.Millisecond) // a disk
		return nil
	}
	const callers = 64
	var wg sync.WaitGroup
	for range callers {
		wg.Go(func() {
			// The ticket the caller will take is at least asked+1 now.
			floor := g.asked.Load() + 1
			if err := g.sync(); err != nil {
				t.Error(err)
			}
			mu.Lock()
			defer mu.Unlock()
			for _, s := range started {
				if s >= floor {
					return // a sync that started after this caller asked
				}
			}
			t.Errorf("a caller asking after %d returned before any sync that started after it (syncs started at %v)", floor-1, started)
		})
	}
	wg.Wait()
	if len(started) >= callers {
		t.Errorf("%d callers made %d syncs: none was shared", callers, len(started))
	}

	boom := fmt.Errorf("disk gone")
	g.syncLog = func() error { return boom }
	if err := g.sync(); err != boom {
		t.Errorf("a failed sync: %v, want %v", err, boom)
	}
	g.syncLog = func() error { return nil }
	if err := g.sync(); err != nil {
		t.Errorf("the next sync after a failed one: %v", err)
	}
}

// The group's own sync of the log: the real file, its directory once per
// file, and nothing to do when there is no log (the last connection
// checkpointed and removed it).
func TestGroupSync_SyncsTheLogFileAndToleratesItsAbsence(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	g := newGroupSync(filepath.Join(dir, "ledger.db"))
	if err := g.sync(); err != nil {
		t.Fatalf("no log yet: %v", err)
	}
	if err := os.WriteFile(filepath.Join(dir, "ledger.db-wal"), []byte("frames"), 0o600); err != nil {
		t.Fatal(err)
	}
	if err := g.sync(); err != nil {
		t.Fatal(err)
	}
	if g.dirSynced == nil {
		t.Error("the directory of a new log was not synced")
	}
}
