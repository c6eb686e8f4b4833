package ledger_test

import (
	"context"
	"fmt"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/mcp-changeset/changeset-go/ledger"
	"github.com/mcp-changeset/changeset-go/ledger/driver"
)

// limits records the Limit of every list a backend is asked for.
type limits struct {
	driver.Backend
	mu   sync.Mutex
	seen []listCall
}

type listCall struct {
	what  string
	limit int
}

func (b *limits) note(what string, limit int) {
	b.mu.Lock()
	defer b.mu.Unlock()
	b.seen = append(b.seen, listCall{what, limit})
}

func (b *limits) ListChanges(ctx context.Context, q driver.Querier, f ledger.ChangeFilter) ([]*ledger.Change, error) {
	b.note("changes", f.Limit)
	return b.Backend.ListChanges(ctx, q, f)
}

func (b *limits) ListRuns(ctx context.Context, q driver.Querier, f ledger.RunFilter) ([]*ledger.Run, error) {
	b.note("runs", f.Limit)
	return b.Backend.ListRuns(ctx, q, f)
}

func (b *limits) ListHistory(ctx context.Context, q driver.Querier, f ledger.HistoryFilter) ([]ledger.HistoryEntry, error) {
	b.note("history", f.Limit)
	return b.Backend.ListHistory(ctx, q, f)
}

// TestScans_NeverReadTheWholeLedgerAtOnce runs the ledger's own scans
// (ExpireStale and StaleChanges, Prune and its dry run, Check) on a ledger
// of more rows than a page, and checks that every list they asked the
// backend for was bounded, by at most 500 rows.
func TestScans_NeverReadTheWholeLedgerAtOnce(t *testing.T) {
	ctx := context.Background()
	real, err := ledger.Open(ctx, filepath.Join(t.TempDir(), "l.db"), ledger.OpenOptions{Create: true})
	if err != nil {
		t.Fatal(err)
	}
	defer real.Close()
	b := &limits{Backend: driver.BackendOf(real)}
	l := driver.NewLedger(b)
	t0 := time.Now().Add(-48 * time.Hour)
	err = l.WithTx(ctx, func(tx *ledger.Tx) error {
		if err := tx.InsertRun(&ledger.Run{ID: "run_1", Status: ledger.RunOpen, CreatedAt: t0, UpdatedAt: t0}); err != nil {
			return err
		}
		for i := range 1200 {
			at := t0.Add(time.Duration(i) * time.Millisecond)
			c := &ledger.Change{ID: fmt.Sprintf("chg_%04d", i), Action: "a", Status: ledger.Pending, ScopeHash: "s",
				ConfirmHash: "c", CreatedAt: at, UpdatedAt: at, ExpiresAt: at.Add(time.Minute)}
			if i%2 == 0 {
				c.RunID = "run_1"
			}
			if err := tx.InsertChange(c); err != nil {
				return err
			}
		}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	// Prune lists no rows at all: the backend picks what it deletes by
	// ID (PrunableChanges, PrunableRuns).
	scans := []struct {
		name string
		run  func() (int, error)
	}{
		{"StaleChanges", func() (int, error) { ids, err := l.StaleChanges(ctx); return len(ids), err }},
		{"ExpireStale", func() (int, error) { ids, err := l.ExpireStale(ctx); return len(ids), err }},
		{"Check", func() (int, error) { p, err := l.Check(ctx); return len(p), err }},
		{"Prune dry run", func() (int, error) {
			r, err := l.Prune(ctx, ledger.PruneOptions{DryRun: true})
			return len(r.Changes) + len(r.Runs), err
		}},
		{"Prune", func() (int, error) {
			r, err := l.Prune(ctx, ledger.PruneOptions{})
			return len(r.Changes) + len(r.Runs), err
		}},
	}
	want := map[string]int{"StaleChanges": 1200, "ExpireStale": 1200, "Check": 0, "Prune dry run": 1201, "Prune": 1201}
	for _, s := range scans {
		b.seen = nil
		n, err := s.run()
		if err != nil || n != want[s.name] {
			t.Fatalf("%s = %d, %v; want %d", s.name, n, err, want[s.name])
		}
		prune := strings.HasPrefix(s.name, "Prune")
		if len(b.seen) == 0 && !prune {
			t.Errorf("%s listed nothing", s.name)
		}
		if len(b.seen) > 0 && prune {
			t.Errorf("%s listed rows (%+v): it should pick them by ID", s.name, b.seen)
		}
		for _, call := range b.seen {
			if call.limit <= 0 || call.limit > 500 {
				t.Errorf("%s asked for a list of %s with limit %d: unbounded or larger than a page", s.name, call.what, call.limit)
			}
		}
	}
}
