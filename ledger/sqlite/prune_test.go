package sqlite

import (
	"context"
	"database/sql"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/mcp-changeset/changeset-go/ledger"
)

// fillLedger writes n changes of about 3 KB each through the ledger's
// own transactions (a history entry for each transition), the i-th
// created at from plus i minutes and then expired; every tenth change is
// left pending.
func fillLedger(t *testing.T, l *ledger.Ledger, n int, from time.Time) {
	t.Helper()
	ctx := context.Background()
	blob := strings.Repeat("a realistic payload word ", 40) // 1 KB
	for start := 0; start < n; start += 200 {
		err := l.WithTx(ctx, func(tx *ledger.Tx) error {
			for i := start; i < min(start+200, n); i++ {
				at := from.Add(time.Duration(i) * time.Minute)
				doc := json.RawMessage(fmt.Sprintf(`{"n":%d,"text":%q}`, i, blob))
				c := &ledger.Change{ID: fmt.Sprintf("chg_%06d", i), Action: "set", Status: ledger.Pending, ScopeHash: "s",
					Payload: doc, Before: doc, After: doc, Summary: fmt.Sprintf("change %d", i), ConfirmHash: "c",
					CreatedAt: at, UpdatedAt: at, ExpiresAt: at.Add(time.Minute)}
				if err := tx.InsertChange(c); err != nil {
					return err
				}
				if i%10 == 9 {
					continue
				}
				c.Status, c.ConfirmHash, c.UpdatedAt = ledger.Expired, "", at.Add(time.Minute)
				if err := tx.UpdateChange(c, ledger.Pending); err != nil {
					return err
				}
			}
			return nil
		})
		if err != nil {
			t.Fatal(err)
		}
	}
}

// fileSize is the size of the file at path with its write-ahead log.
func fileSize(t *testing.T, path string) int64 {
	t.Helper()
	fi, err := os.Stat(path)
	if err != nil {
		t.Fatal(err)
	}
	size := fi.Size()
	if wi, err := os.Stat(path + "-wal"); err == nil {
		size += wi.Size()
	}
	return size
}

// compactedSize is the size the ledger at path would take rewritten
// whole: the floor that no way of returning space can go below.
func compactedSize(t *testing.T, path string) int64 {
	t.Helper()
	copyPath := filepath.Join(t.TempDir(), "compacted.db")
	db := rawDB(t, path)
	defer db.Close()
	exec(t, db, "VACUUM INTO '"+copyPath+"'")
	return fileSize(t, copyPath)
}

// pragmaInt reads an integer PRAGMA of the ledger's file.
func pragmaInt(t *testing.T, l *ledger.Ledger, name string) int64 {
	t.Helper()
	var v int64
	if err := l.DB().QueryRow("PRAGMA " + name).Scan(&v); err != nil {
		t.Fatal(err)
	}
	return v
}

func TestOpen_CreatesLedgersWithIncrementalAutoVacuum(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	for _, name := range []string{"missing.db", "empty.db"} {
		path := filepath.Join(t.TempDir(), name)
		if name == "empty.db" {
			if err := os.WriteFile(path, nil, 0o600); err != nil {
				t.Fatal(err)
			}
		}
		l, err := ledger.Open(ctx, path, ledger.OpenOptions{Create: true})
		if err != nil {
			t.Fatal(err)
		}
		if v := pragmaInt(t, l, "auto_vacuum"); v != autoVacuumIncremental {
			t.Errorf("%s: PRAGMA auto_vacuum = %d, want %d (incremental)", name, v, autoVacuumIncremental)
		}
		var mode string
		if err := l.DB().QueryRow("PRAGMA journal_mode").Scan(&mode); err != nil || mode != "wal" {
			t.Errorf("%s: journal_mode = %q, %v; want wal", name, mode, err)
		}
		l.Close()
	}
}

// TestPrune_ReturnsTheSpaceOfWhatItDeletes prunes two thirds of a ledger
// and holds the file to the goal of docs/reliability.md: at least 90% of
// the space the deleted rows took goes back to the disk, the write-ahead
// log included.
func TestPrune_ReturnsTheSpaceOfWhatItDeletes(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	path := filepath.Join(t.TempDir(), "ledger.db")
	t0 := time.Now().Add(-90 * 24 * time.Hour)
	l, err := ledger.Open(ctx, path, ledger.OpenOptions{Create: true})
	if err != nil {
		t.Fatal(err)
	}
	defer l.Close()
	const n = 3000
	fillLedger(t, l, n, t0)
	if _, err := l.DB().Exec("PRAGMA wal_checkpoint(TRUNCATE)"); err != nil {
		t.Fatal(err)
	}
	before := fileSize(t, path)
	cutoff := time.Since(t0.Add(2 * n / 3 * time.Minute))
	res, err := l.Prune(ctx, ledger.PruneOptions{OlderThan: cutoff, BatchSize: 500})
	if err != nil {
		t.Fatal(err)
	}
	if len(res.Changes) < n/2 {
		t.Fatalf("Prune deleted %d changes, want about %d", len(res.Changes), 2*n/3*9/10)
	}
	after := fileSize(t, path)
	floor := compactedSize(t, path)
	returned, deleted := before-after, before-floor
	t.Logf("%d changes deleted: %d → %d bytes on disk; rewritten whole it would take %d: %.1f%% of the space returned",
		len(res.Changes), before, after, floor, 100*float64(returned)/float64(deleted))
	if float64(returned) < 0.9*float64(deleted) {
		t.Errorf("Prune returned %d of the %d bytes the deleted rows took, want at least 90%%", returned, deleted)
	}
	if !res.Space.Returned || res.Space.Before < before || res.Space.After != after {
		t.Errorf("Prune reported %+v; the file went from %d to %d", res.Space, before, after)
	}
	if free := pragmaInt(t, l, "freelist_count"); free != 0 {
		t.Errorf("%d pages left on the freelist", free)
	}
}

// TestPrune_AnOlderLedgerReturnsTheSpaceOnceVacuumed builds a ledger with
// auto_vacuum NONE, as every ledger was before: Prune keeps the space and
// says so; Vacuum returns it and switches the file to incremental
// auto-vacuum, so that the next Prune returns its space by itself.
func TestPrune_AnOlderLedgerReturnsTheSpaceOnceVacuumed(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	path := filepath.Join(t.TempDir(), "ledger.db")
	raw := rawDB(t, path)
	exec(t, raw, "PRAGMA journal_mode = WAL") // writes the header: auto_vacuum NONE for good
	raw.Close()
	l, err := ledger.Open(ctx, path, ledger.OpenOptions{Create: true})
	if err != nil {
		t.Fatal(err)
	}
	defer l.Close()
	if v := pragmaInt(t, l, "auto_vacuum"); v != 0 {
		t.Fatalf("PRAGMA auto_vacuum = %d, want 0 (none) for this test", v)
	}
	t0 := time.Now().Add(-90 * 24 * time.Hour)
	fillLedger(t, l, 1500, t0)
	exec(t, l.DB(), "PRAGMA wal_checkpoint(TRUNCATE)")
	before := fileSize(t, path)
	first, err := l.Prune(ctx, ledger.PruneOptions{OlderThan: time.Since(t0.Add(500 * time.Minute))})
	if err != nil || len(first.Changes) == 0 {
		t.Fatalf("Prune = %d changes, %v", len(first.Changes), err)
	}
	// The file keeps its pages (it grows by the few that the links of the
	// pruned history entries take), and the log is emptied.
	if first.Space.Returned || first.Space.After < before || first.Space.After > before+before/50 {
		t.Errorf("Prune of a ledger without auto-vacuum reported %+v, the file %d bytes before: want the space kept, the log emptied", first.Space, before)
	}
	if free := pragmaInt(t, l, "freelist_count"); free == 0 {
		t.Fatal("the prune freed no page")
	}
	vac, err := l.Vacuum(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if !vac.Returned || vac.After >= vac.Before || vac.After != fileSize(t, path) {
		t.Errorf("Vacuum = %+v, the file now %d bytes: want it smaller", vac, fileSize(t, path))
	}
	if v := pragmaInt(t, l, "auto_vacuum"); v != autoVacuumIncremental {
		t.Errorf("PRAGMA auto_vacuum = %d after Vacuum, want %d", v, autoVacuumIncremental)
	}
	second, err := l.Prune(ctx, ledger.PruneOptions{})
	if err != nil || len(second.Changes) == 0 {
		t.Fatalf("Prune = %d changes, %v", len(second.Changes), err)
	}
	if !second.Space.Returned || second.Space.After >= second.Space.Before {
		t.Errorf("Prune after Vacuum reported %+v: want the space returned", second.Space)
	}
}

// TestVacuum_RefusesAReadOnlyLedger: a read-only open never rewrites the
// file.
func TestVacuum_RefusesAReadOnlyLedger(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	path, _ := damageLedger(t, t.TempDir())
	before := fileDigest(t, path)
	l, err := ledger.Open(ctx, path, ledger.OpenOptions{ReadOnly: true})
	if err != nil {
		t.Fatal(err)
	}
	defer l.Close()
	if _, err := l.Vacuum(ctx); !errors.Is(err, ledger.ErrReadOnly) || !strings.Contains(err.Error(), "opened read-only") {
		t.Errorf("Vacuum of a read-only ledger = %v, want a read-only error", err)
	}
	if fileDigest(t, path) != before {
		t.Error("Vacuum of a read-only ledger changed the file")
	}
}

// TestPruneQueries_ReadTheirIndexes asks SQLite how it would run the
// statements of PrunableChanges: the selection reads the partial index
// changes_finished and nothing else (never the whole table, never a row
// for its creation time), with the default statuses or
// with applied, with Keep or without; finding Keep's boundary walks
// changes_created from the newest.
func TestPruneQueries_ReadTheirIndexes(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	b, err := Open(ctx, filepath.Join(t.TempDir(), "plan.db"), ledger.OpenOptions{Create: true})
	if err != nil {
		t.Fatal(err)
	}
	defer b.Close()
	finished := []ledger.Status{ledger.Expired, ledger.ApplyFailed, ledger.Undone, ledger.UndoFailed}
	for _, f := range []ledger.PruneFilter{
		{Statuses: finished, UpdatedBefore: time.Now(), Now: time.Now()},
		{Statuses: append(finished, ledger.Applied), UpdatedBefore: time.Now(), Now: time.Now(), Keep: 10},
	} {
		for _, kept := range []bool{false, true} {
			query, args := pickQuery(f, kept)
			if kept {
				args = append(args, int64(1), "chg_1")
			}
			plan := explain(t, b.DB(), query, args)
			if !strings.Contains(plan, "USING COVERING INDEX changes_finished (updated_at<?)") || strings.Contains(plan, "SCAN changes") {
				t.Errorf("%d statuses, kept %t: the selection does not read a range of changes_finished alone:\n%s\n%s", len(f.Statuses), kept, query, plan)
			}
		}
		query, args := keepQuery(f)
		if plan := explain(t, b.DB(), query, args); !strings.Contains(plan, "SCAN changes USING INDEX changes_created") {
			t.Errorf("Keep's boundary does not walk changes_created:\n%s", plan)
		}
	}
}

// explain is SQLite's EXPLAIN QUERY PLAN of query, a line per step.
func explain(t *testing.T, db *sql.DB, query string, args []any) string {
	t.Helper()
	rows, err := db.Query("EXPLAIN QUERY PLAN "+query, args...)
	if err != nil {
		t.Fatalf("explain %s: %v", query, err)
	}
	defer rows.Close()
	var lines []string
	for rows.Next() {
		var id, parent, unused int
		var detail string
		if err := rows.Scan(&id, &parent, &unused, &detail); err != nil {
			t.Fatal(err)
		}
		lines = append(lines, detail)
	}
	if err := rows.Err(); err != nil {
		t.Fatal(err)
	}
	return strings.Join(lines, "\n")
}
