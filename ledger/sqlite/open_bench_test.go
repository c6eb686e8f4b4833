package sqlite

import (
	"context"
	"database/sql"
	"fmt"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/mcp-changeset/changeset-go/ledger"
)

// The open-check benchmarks measure what candidate checks cost on ledgers
// of 10k, 100k and 1M changes of about 1 KB each (docs/reliability.md
// reports the figures):
//
//	go test -run '^$' -bench '^BenchmarkOpenCheck$' -benchtime 1x -count 3 ./ledger/sqlite
//
// Building the 1M-change ledger takes a minute; set
// CHANGESET_BENCH_LEDGERS to a directory to keep the files between runs.
// CHANGESET_BENCH_SIZES picks the sizes ("10000,100000").

// benchLedger returns the path of a closed, checkpointed ledger holding n
// changes, building it with one INSERT loop in one transaction.
func benchLedger(b testing.TB, n int) string {
	b.Helper()
	dir := os.Getenv("CHANGESET_BENCH_LEDGERS")
	if dir == "" {
		dir = b.TempDir()
	}
	path := filepath.Join(dir, fmt.Sprintf("opencheck-%d-v%d.db", n, SchemaVersion))
	if _, err := os.Stat(path); err == nil {
		return path
	}
	ctx := context.Background()
	tmp := path + ".building"
	os.Remove(tmp)
	be, err := Open(ctx, tmp, ledger.OpenOptions{Create: true})
	if err != nil {
		b.Fatal(err)
	}
	tx, err := be.DB().BeginTx(ctx, nil)
	if err != nil {
		b.Fatal(err)
	}
	stmt, err := tx.PrepareContext(ctx, `INSERT INTO changes (id, action, status, scope_hash, resource,
		payload, payload_hash, diff, summary, state_hash, before_state, after_state, undo_hash,
		undoable, result, applied_by, created_at, updated_at, expires_at, applied_at, undo_expires_at)
		VALUES (?, 'set_setting', 'applied', ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, 1, '{"previous":"light"}', 'agent', ?, ?, ?, ?, ?)`)
	if err != nil {
		b.Fatal(err)
	}
	hash := strings.Repeat("ab", 32)
	filler := strings.Repeat("x", 200)
	t0 := time.Date(2025, 1, 1, 0, 0, 0, 0, time.UTC).UnixMicro()
	for i := range n {
		key := "key_" + strconv.Itoa(i%5000)
		payload := `{"key":"` + key + `","note":"` + filler + `","value":"dark_` + strconv.Itoa(i) + `"}`
		diff := `[{"after":"dark_` + strconv.Itoa(i) + `","before":"light","field":"` + key + `"}]`
		before, after := `{"`+key+`":"light","meta":"`+filler+`"}`, `{"`+key+`":"dark","meta":"`+filler+`"}`
		at := t0 + int64(i)*1_000_000
		_, err := stmt.ExecContext(ctx, fmt.Sprintf("chg_%020d", i), hash, "setting:"+key,
			payload, hash, diff, "Set "+key+" to dark_"+strconv.Itoa(i), hash, before, after, hash,
			at, at+2_000_000, at+900_000_000, at+1_000_000, at+86_400_000_000)
		if err != nil {
			b.Fatal(err)
		}
	}
	if err := tx.Commit(); err != nil {
		b.Fatal(err)
	}
	if _, err := be.DB().ExecContext(ctx, "PRAGMA wal_checkpoint(TRUNCATE)"); err != nil {
		b.Fatal(err)
	}
	if err := be.Close(); err != nil {
		b.Fatal(err)
	}
	if err := os.Rename(tmp, path); err != nil {
		b.Fatal(err)
	}
	return path
}

// benchSizes are the ledger sizes to measure.
func benchSizes(b *testing.B) []int {
	s := os.Getenv("CHANGESET_BENCH_SIZES")
	if s == "" {
		return []int{10_000, 100_000, 1_000_000}
	}
	var out []int
	for _, f := range strings.Split(s, ",") {
		n, err := strconv.Atoi(strings.TrimSpace(f))
		if err != nil {
			b.Fatalf("CHANGESET_BENCH_SIZES: %v", err)
		}
		out = append(out, n)
	}
	return out
}

func BenchmarkOpenCheck(b *testing.B) {
	ctx := context.Background()
	for _, n := range benchSizes(b) {
		path := benchLedger(b, n)
		fi, err := os.Stat(path)
		if err != nil {
			b.Fatal(err)
		}
		mb := float64(fi.Size()) / (1 << 20)
		rawQuery := func(b *testing.B, queries ...string) {
			db, err := sql.Open(driverName, "file:"+escapePath(path)+"?mode=ro")
			if err != nil {
				b.Fatal(err)
			}
			defer db.Close()
			db.SetMaxOpenConns(1)
			for _, q := range queries {
				rows, err := db.QueryContext(ctx, q)
				if err != nil {
					b.Fatalf("%s: %v", q, err)
				}
				for rows.Next() {
					var v any
					if err := rows.Scan(&v); err != nil {
						b.Fatal(err)
					}
					if s, ok := v.(string); ok && s != "ok" {
						b.Fatalf("%s: %s", q, s)
					}
				}
				if err := rows.Err(); err != nil {
					b.Fatal(err)
				}
				rows.Close()
			}
		}
		candidates := []struct {
			name string
			run  func(b *testing.B)
		}{
			{"open_nocheck", func(b *testing.B) { rawQuery(b, "SELECT count(*) FROM sqlite_schema") }},
			{"open_check_none", openWith(ctx, path, ledger.CheckNone, fullCheckMaxBytes)},
			{"open_check_auto", openWith(ctx, path, ledger.CheckAuto, fullCheckMaxBytes)},
			{"open_check_full", openWith(ctx, path, ledger.CheckFull, fullCheckMaxBytes)},
			{"open_check_structure", openWith(ctx, path, ledger.CheckAuto, 0)},
			{"quick_check", func(b *testing.B) { rawQuery(b, "PRAGMA quick_check") }},
			{"integrity_check", func(b *testing.B) { rawQuery(b, "PRAGMA integrity_check") }},
			{"quick_check_changes", func(b *testing.B) { rawQuery(b, "PRAGMA quick_check(changes)") }},
			{"quick_check_small_tables", func(b *testing.B) {
				rawQuery(b, "PRAGMA quick_check(sqlite_schema)", "PRAGMA quick_check(runs)", "PRAGMA quick_check(meta)")
			}},
		}
		s, count := structuralWalk(b, path)
		b.Logf("changes=%d: %.0f MB, %d pages; the structural check reads %d (%.2f%%)",
			n, mb, count, s.pagesRead, 100*float64(s.pagesRead)/float64(count))
		for _, c := range candidates {
			b.Run(fmt.Sprintf("changes=%d/%s", n, c.name), func(b *testing.B) {
				for b.Loop() {
					c.run(b)
				}
				b.ReportMetric(mb, "MB")
				b.ReportMetric(float64(b.Elapsed().Nanoseconds())/1e6/float64(b.N)/mb, "ms/MB")
			})
		}
	}
}

// openWith returns a benchmark body that opens the ledger at path
// read-only with the given check and full-check limit.
func openWith(ctx context.Context, path string, check ledger.IntegrityCheck, limit int64) func(b *testing.B) {
	return func(b *testing.B) {
		l, err := open(ctx, path, ledger.OpenOptions{ReadOnly: true, Check: check}, limit)
		if err != nil {
			b.Fatal(err)
		}
		l.Close()
	}
}
