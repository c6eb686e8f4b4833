package main

import (
	"crypto/sha256"
	"database/sql"
	"math/rand/v2"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// ledgerPages returns the leaf and interior page numbers of the b-tree
// name in the SQLite file at path, and its page size.
func ledgerPages(t *testing.T, path, name string) (leaves, interior []int64, pageSize int64) {
	t.Helper()
	db, err := sql.Open("sqlite", "file:"+path+"?mode=ro")
	if err != nil {
		t.Fatal(err)
	}
	defer db.Close()
	rows, err := db.Query(`SELECT pageno, pagetype FROM dbstat WHERE name = ? ORDER BY path`, name)
	if err != nil {
		t.Fatal(err)
	}
	defer rows.Close()
	for rows.Next() {
		var no int64
		var typ string
		if err := rows.Scan(&no, &typ); err != nil {
			t.Fatal(err)
		}
		switch typ {
		case "leaf":
			leaves = append(leaves, no)
		case "internal":
			interior = append(interior, no)
		}
	}
	if err := db.QueryRow("PRAGMA page_size").Scan(&pageSize); err != nil {
		t.Fatal(err)
	}
	return leaves, interior, pageSize
}

// overwrite replaces bytes [from, to) of the file at path with random
// bytes.
func overwrite(t *testing.T, path string, from, to int64, seed uint64) {
	t.Helper()
	data := readFile(t, path)
	rng := rand.New(rand.NewPCG(seed, 1))
	for i := from; i < to; i++ {
		data[i] = byte(rng.IntN(256))
	}
	if err := writeFile(path, data); err != nil {
		t.Fatal(err)
	}
}

func TestDamagedLedger_RefusedByEveryCommandCheckReportsItFileUnchanged(t *testing.T) {
	t.Parallel()
	f := populate(t)
	pristine := readFile(t, f.path)
	changeLeaves, _, pageSize := ledgerPages(t, f.path, "changes")
	indexLeaves, indexInterior, _ := ledgerPages(t, f.path, "changes_created")
	if len(changeLeaves) < 2 {
		t.Fatalf("the fixture's changes table has %d leaves, want several", len(changeLeaves))
	}
	indexPage := append(indexInterior, indexLeaves...)[0]
	page := func(p int64) [2]int64 { return [2]int64{(p - 1) * pageSize, p * pageSize} }
	for _, tc := range []struct {
		name  string
		span  [2]int64
		check []string // what check prints on stdout
	}{
		{"a page of the changes table's rows", page(changeLeaves[len(changeLeaves)/2]), []string{"integrity: ", "page"}},
		{"an index page", page(indexPage), []string{"integrity: ", "changes_created"}},
		{"the schema page", [2]int64{100, pageSize}, []string{"integrity: ledger: open ", "SQLite cannot read the file's schema"}},
		{"the header", [2]int64{16, 100}, []string{"integrity: ledger: open ", "the file's SQLite header is damaged"}},
		{"the header and its magic string", [2]int64{0, 100}, []string{"integrity: ledger: open ", "its first bytes were overwritten"}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			path := filepath.Join(t.TempDir(), "ledger.db")
			if err := os.WriteFile(path, pristine, 0o600); err != nil {
				t.Fatal(err)
			}
			overwrite(t, path, tc.span[0], tc.span[1], uint64(tc.span[0]))
			before := sha256.Sum256(readFile(t, path))

			for _, args := range everyCommand(f.ids["applied"]) {
				if args[0] == "check" {
					continue
				}
				r := runL(t, path, args...)
				wantErr(t, r, "ledger is corrupt or unreadable", "restore the ledger from a backup", "mcp-changeset check")
				if r.stdout != "" || strings.Count(strings.TrimSpace(r.stderr), "\n") != 0 {
					t.Errorf("%v: want one line on stderr and nothing on stdout:\n%s", args, r)
				}
			}

			r := runL(t, path, "check", "--full", "--stale-after", "1000d")
			if r.code != exitError {
				t.Fatalf("check of a damaged ledger: %s", r)
			}
			for _, w := range tc.check {
				if !strings.Contains(r.stdout, w) {
					t.Errorf("check's report lacks %q:\n%s", w, r)
				}
			}
			for _, l := range strings.Split(strings.TrimSpace(r.stdout), "\n") {
				if !strings.HasPrefix(l, "integrity: ") && !strings.HasPrefix(l, "invariants: ") && !strings.HasPrefix(l, "stale: not checked: ") {
					t.Errorf("a finding without its label: %q", l)
				}
			}
			if !strings.Contains(r.stderr, "found in ") || !strings.Contains(r.stderr, "restore it from a backup") {
				t.Errorf("check's summary: %s", r.stderr)
			}
			r = runL(t, path, "check", "--full", "--json")
			if r.code != exitError {
				t.Fatalf("check --json of a damaged ledger: %s", r)
			}
			doc := decode(t, r)
			if doc["ok"] != false || len(doc["problems"].([]any)) == 0 {
				t.Errorf("check --json = %v", doc)
			}

			if sha256.Sum256(readFile(t, path)) != before {
				t.Fatal("a command changed the damaged file")
			}
			if fi, err := os.Stat(path + "-wal"); err == nil && fi.Size() != 0 {
				t.Errorf("a command left %d bytes of write-ahead log", fi.Size())
			}
		})
	}
}
