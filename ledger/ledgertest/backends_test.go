package ledgertest_test

import (
	"context"
	"os"
	"path/filepath"
	"sync"
	"testing"
	"time"

	"github.com/mcp-changeset/changeset-go/internal/pgtest"
	"github.com/mcp-changeset/changeset-go/ledger"
	"github.com/mcp-changeset/changeset-go/ledger/ledgertest"
	_ "github.com/mcp-changeset/changeset-go/ledger/postgres"
	_ "github.com/mcp-changeset/changeset-go/ledger/sqlite"
)

// This file is the only place where backends meet the conformance suite:
// each backend gets a harness, and Exercise and Benchmark do the rest.

func TestMain(m *testing.M) {
	code := m.Run()
	pgtest.Stop()
	os.Exit(code)
}

func TestSQLite(t *testing.T) { ledgertest.Exercise(t, sqliteHarness(ledger.DurabilityFull)) }

func TestPostgres(t *testing.T) { ledgertest.Exercise(t, postgresHarness(ledger.DurabilityFull)) }

// The suite again on ledgers opened with DurabilityClaims, whose lazy
// transactions commit without waiting for the disk: every promise holds
// the same. The whole suite on SQLite, where it is cheap and a lazy
// transaction changes a setting of its connection; the lazy transactions'
// part on PostgreSQL, where a ledger costs a database.

func TestSQLiteClaims(t *testing.T) {
	ledgertest.Exercise(t, sqliteHarness(ledger.DurabilityClaims))
}

func TestPostgresClaims(t *testing.T) {
	ledgertest.ExerciseDurability(t, postgresHarness(ledger.DurabilityClaims))
}

func BenchmarkCycle(b *testing.B) {
	b.Run("sqlite", func(b *testing.B) { ledgertest.Benchmark(b, sqliteHarness(ledger.DurabilityFull)) })
	b.Run("postgres", func(b *testing.B) { ledgertest.Benchmark(b, postgresHarness(ledger.DurabilityFull)) })
}

func BenchmarkHistory(b *testing.B) {
	b.Run("sqlite", func(b *testing.B) { ledgertest.BenchmarkHistory(b, sqliteHarness(ledger.DurabilityFull)) })
	b.Run("postgres", func(b *testing.B) { ledgertest.BenchmarkHistory(b, postgresHarness(ledger.DurabilityFull)) })
}

// sqliteHarness opens ledgers with durability d in new files; a second
// handle opens the same file again.
func sqliteHarness(d ledger.Durability) ledgertest.Harness {
	return ledgertest.Harness{
		Open: func(t testing.TB, clock func() time.Time) *ledger.Ledger {
			return openTarget(t, filepath.Join(t.TempDir(), "ledger.db"), true, clock, d)
		},
		OpenSecond: func(t testing.TB, l *ledger.Ledger, clock func() time.Time) *ledger.Ledger {
			return openTarget(t, l.Location(), false, clock, d)
		},
	}
}

// postgresHarness opens ledgers with durability d in new databases of a
// throwaway cluster (see internal/pgtest); a second handle opens the same
// URL again.
func postgresHarness(d ledger.Durability) ledgertest.Harness {
	return ledgertest.Harness{
		Open: func(t testing.TB, clock func() time.Time) *ledger.Ledger {
			dsn := pgtest.DSN(t)
			l := openTarget(t, dsn, true, clock, d)
			targets.Store(l, dsn) // Location hides credentials: keep the URL
			t.Cleanup(func() { targets.Delete(l) })
			return l
		},
		OpenSecond: func(t testing.TB, l *ledger.Ledger, clock func() time.Time) *ledger.Ledger {
			dsn, ok := targets.Load(l)
			if !ok {
				t.Fatal("OpenSecond of a ledger the harness did not open")
			}
			return openTarget(t, dsn.(string), false, clock, d)
		},
	}
}

// targets maps each PostgreSQL ledger the harness opened to its URL.
var targets sync.Map

// openTarget opens the ledger at target through ledger.Open, as
// applications do, with clock as its clock and durability d, and closes it
// when t ends.
func openTarget(t testing.TB, target string, create bool, clock func() time.Time, d ledger.Durability) *ledger.Ledger {
	t.Helper()
	l, err := ledger.Open(context.Background(), target, ledger.OpenOptions{Create: create, Clock: clock, Durability: d})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		if err := l.Close(); err != nil {
			t.Error(err)
		}
	})
	return l
}
