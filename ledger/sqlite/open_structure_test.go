package sqlite

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/mcp-changeset/changeset-go/ledger"
)

// openStructural opens the ledger at path with the structural check that
// CheckAuto makes of a large file.
func openStructural(path string) (*Backend, error) {
	return open(context.Background(), path, ledger.OpenOptions{}, 0)
}

func TestOpen_StructuralCheckRefusesDamageAboveTheLeaves(t *testing.T) {
	t.Parallel()
	pristinePath, _ := damageLedger(t, t.TempDir())
	pristine := readFile(t, pristinePath)
	trees, pageSize := treePages(t, pristinePath)
	changes, index := trees["changes"], trees["changes_created"]
	ls := leaves(changes)
	cases := map[string]int64{
		"the root of the changes table":         changes[0].no,
		"an interior page of the changes table": interiors(changes)[2],
		"the first leaf of the changes table":   ls[0],
		"the last leaf of the changes table":    ls[len(ls)-1],
		"the root of an index":                  index[0].no,
		"the last leaf of an index":             leaves(index)[len(leaves(index))-1],
		"the schema page":                       1,
	}
	if b, err := openStructural(pristinePath); err != nil {
		t.Fatalf("the structural check refused a sound ledger: %v", err)
	} else {
		b.Close()
	}
	for name, p := range cases {
		t.Run(name, func(t *testing.T) {
			t.Parallel()
			for seed := range uint64(10) {
				path := filepath.Join(t.TempDir(), "ledger.db")
				if err := os.WriteFile(path, pristine, 0o600); err != nil {
					t.Fatal(err)
				}
				from := (p - 1) * pageSize
				if p == 1 {
					from = headerSize
				}
				if seed%2 == 1 {
					// Keep the page's type byte: the rest of its
					// header and its cells must give it away.
					from++
				}
				scribble(t, path, from, p*pageSize, seed)
				before := fileDigest(t, path)
				b, err := openStructural(path)
				if err == nil {
					b.Close()
					t.Fatalf("seed %d: the structural check opened a file with page %d damaged", seed, p)
				}
				if !errors.Is(err, ledger.ErrCorrupt) {
					t.Fatalf("seed %d: %v, want ErrCorrupt", seed, err)
				}
				if fileDigest(t, path) != before {
					t.Fatal("the refused open changed the file")
				}
			}
		})
	}
}

func TestOpen_StructuralCheckSeesTheFreelist(t *testing.T) {
	t.Parallel()
	path, _ := damageLedger(t, t.TempDir())
	db := rawDB(t, path)
	exec(t, db, "DELETE FROM changes WHERE rowid > 500", "PRAGMA wal_checkpoint(TRUNCATE)")
	db.Close()
	b, err := openStructural(path)
	if err != nil {
		t.Fatalf("the structural check refused a ledger with free pages: %v", err)
	}
	b.Close()
	head := readFile(t, path)[:headerSize]
	trunk := int64(head[32])<<24 | int64(head[33])<<16 | int64(head[34])<<8 | int64(head[35])
	if trunk == 0 {
		t.Fatal("the deletes left no freelist")
	}
	// The trunk page's count of the leaves it lists, made too large.
	scribble(t, path, (trunk-1)*4096+4, (trunk-1)*4096+8, 7)
	before := fileDigest(t, path)
	_, err = openStructural(path)
	if !errors.Is(err, ledger.ErrCorrupt) || !strings.Contains(err.Error(), "freelist") {
		t.Errorf("open with a damaged freelist trunk = %v, want ErrCorrupt naming the freelist", err)
	}
	if fileDigest(t, path) != before {
		t.Fatal("the refused open changed the file")
	}
}

func TestStructuralCheck_ReadsFewPages(t *testing.T) {
	t.Parallel()
	path, _ := damageLedger(t, t.TempDir())
	s, count := structuralWalk(t, path)
	// 2000 changes of 1.5 KB: 1000 leaves of rows, 4 pages above them,
	// 9 b-trees of two or three levels.
	if s.pagesRead*20 > count {
		t.Errorf("the structural check read %d of %d pages, want under 5%%", s.pagesRead, count)
	}
	t.Logf("the structural check read %d of %d pages", s.pagesRead, count)
}

// structuralWalk runs the structural check on the ledger at path and
// returns the walk and the file's page count.
func structuralWalk(t testing.TB, path string) (*structure, int) {
	t.Helper()
	db, err := sql.Open(driverName, "file:"+escapePath(path)+"?mode=ro")
	if err != nil {
		t.Fatal(err)
	}
	defer db.Close()
	b := &Backend{path: path}
	s, err := b.walkStructure(context.Background(), db)
	if err != nil {
		t.Fatal(err)
	}
	return s, int(s.pageCount)
}

// TestStructuralCheck_ReadsAFewPagesBelowEachRoot builds a ledger of small
// pages, whose changes table's root points to more pages than the
// structural check reads below a root, and checks that it reads at most
// maxSpread of them: what it reads does not grow with the file.
func TestStructuralCheck_ReadsAFewPagesBelowEachRoot(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	path := filepath.Join(t.TempDir(), "ledger.db")
	raw := rawDB(t, path)
	exec(t, raw, "PRAGMA page_size = 512", "PRAGMA journal_mode = WAL")
	raw.Close()
	b, err := Open(ctx, path, ledger.OpenOptions{Create: true})
	if err != nil {
		t.Fatal(err)
	}
	tx, err := b.BeginWrite(ctx)
	if err != nil {
		t.Fatal(err)
	}
	for i := range 3000 {
		c := fullChange(fmt.Sprintf("chg_%020d", i), t0.Add(time.Duration(i)*time.Second))
		if err := b.InsertChange(ctx, tx, c); err != nil {
			t.Fatal(err)
		}
	}
	if err := tx.Commit(); err != nil {
		t.Fatal(err)
	}
	b.Close()
	db := rawDB(t, path)
	var below int
	err = db.QueryRow(`SELECT count(*) FROM dbstat WHERE name = 'changes' AND path GLOB '/[0-9a-f][0-9a-f][0-9a-f]/'`).Scan(&below)
	db.Close()
	if err != nil || below <= maxSpread {
		t.Fatalf("the changes table's root points to %d pages (%v), want more than %d for this test", below, err, maxSpread)
	}
	s, count := structuralWalk(t, path)
	if s.widest > maxSpread {
		t.Errorf("the structural check read %d pages of one level, want at most %d", s.widest, maxSpread)
	}
	t.Logf("the root points to %d pages; the check read %d of %d pages, at most %d of one level", below, s.pagesRead, count, s.widest)
}

func TestSpreadOut(t *testing.T) {
	t.Parallel()
	pages := []uint32{10, 11, 12, 13, 14, 15, 16}
	for n, want := range map[int][]uint32{2: {10, 16}, 3: {10, 13, 16}, 4: {10, 12, 14, 16}, 7: pages, 9: pages} {
		if got := spreadOut(pages, n); !slices.Equal(got, want) {
			t.Errorf("spreadOut(%v, %d) = %v, want %v", pages, n, got, want)
		}
	}
}
