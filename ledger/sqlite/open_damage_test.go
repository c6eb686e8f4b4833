package sqlite

import (
	"context"
	"crypto/sha256"
	"database/sql"
	"encoding/hex"
	"errors"
	"fmt"
	"math/rand/v2"
	"os"
	"path/filepath"
	"reflect"
	"strings"
	"testing"
	"time"

	"github.com/mcp-changeset/changeset-go/ledger"
)

// damageRows is how many changes damageLedger writes: enough, at about
// 1.5 KB each, for the changes table to be three levels deep and every
// index two.
const damageRows = 2000

// damageLedger builds a closed, checkpointed ledger of damageRows changes
// in dir and returns its path and the changes it holds.
func damageLedger(t *testing.T, dir string) (string, []*ledger.Change) {
	t.Helper()
	ctx := context.Background()
	path := filepath.Join(dir, "ledger.db")
	b, err := Open(ctx, path, ledger.OpenOptions{Create: true})
	if err != nil {
		t.Fatal(err)
	}
	tx, err := b.BeginWrite(ctx)
	if err != nil {
		t.Fatal(err)
	}
	var changes []*ledger.Change
	for i := range damageRows {
		c := fullChange(fmt.Sprintf("chg_%020d", i), t0.Add(time.Duration(i)*time.Second))
		c.Summary = fmt.Sprintf("change %d ", i) + strings.Repeat("s", 1200)
		if err := b.InsertChange(ctx, tx, c); err != nil {
			t.Fatal(err)
		}
		changes = append(changes, c)
	}
	if err := tx.Commit(); err != nil {
		t.Fatal(err)
	}
	// Read the rows back as the backend stores them, to compare with.
	for i, c := range changes {
		if changes[i], err = b.GetChange(ctx, b.DB(), c.ID); err != nil {
			t.Fatal(err)
		}
	}
	if _, err := b.DB().Exec("PRAGMA wal_checkpoint(TRUNCATE)"); err != nil {
		t.Fatal(err)
	}
	if err := b.Close(); err != nil {
		t.Fatal(err)
	}
	return path, changes
}

// page is one page of a b-tree, as SQLite's dbstat table describes it.
type page struct {
	no       int64
	interior bool
}

// treePages returns the pages of every b-tree of the ledger at path by
// name, in tree order (root first, then depth first), and the page size.
func treePages(t *testing.T, path string) (map[string][]page, int64) {
	t.Helper()
	db, err := sql.Open(driverName, "file:"+escapePath(path)+"?mode=ro")
	if err != nil {
		t.Fatal(err)
	}
	defer db.Close()
	rows, err := db.Query(`SELECT name, pageno, pagetype FROM dbstat WHERE pagetype IN ('internal', 'leaf') ORDER BY name, path`)
	if err != nil {
		t.Fatal(err)
	}
	defer rows.Close()
	out := map[string][]page{}
	for rows.Next() {
		var name, typ string
		var no int64
		if err := rows.Scan(&name, &no, &typ); err != nil {
			t.Fatal(err)
		}
		out[name] = append(out[name], page{no: no, interior: typ == "internal"})
	}
	var size int64
	if err := db.QueryRow("PRAGMA page_size").Scan(&size); err != nil {
		t.Fatal(err)
	}
	return out, size
}

// leaves and interiors return the leaf and interior pages of one tree.
func leaves(ps []page) []int64    { return pick(ps, false) }
func interiors(ps []page) []int64 { return pick(ps, true) }

func pick(ps []page, interior bool) []int64 {
	var out []int64
	for _, p := range ps {
		if p.interior == interior {
			out = append(out, p.no)
		}
	}
	return out
}

// scribble overwrites bytes [from, to) of the file at path with random
// bytes from seed.
func scribble(t *testing.T, path string, from, to int64, seed uint64) {
	t.Helper()
	rng := rand.New(rand.NewPCG(seed, 0x5eed))
	junk := make([]byte, to-from)
	for i := range junk {
		junk[i] = byte(rng.IntN(256))
	}
	f, err := os.OpenFile(path, os.O_RDWR, 0)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := f.WriteAt(junk, from); err != nil {
		t.Fatal(err)
	}
	if err := f.Close(); err != nil {
		t.Fatal(err)
	}
}

// fileDigest is the SHA-256 of the file at path.
func fileDigest(t *testing.T, path string) string {
	t.Helper()
	sum := sha256.Sum256(readFile(t, path))
	return hex.EncodeToString(sum[:])
}

// refusedCorrupt opens the ledger at path through ledger.Open with
// each set of options and requires a *ledger.Error wrapping ErrCorrupt
// that says what to do, with the file byte for byte as it was and no
// write-ahead log content left beside it. It returns the error of the
// first open.
func refusedCorrupt(t *testing.T, path string) error {
	t.Helper()
	before := fileDigest(t, path)
	var first error
	for _, opts := range []ledger.OpenOptions{{}, {ReadOnly: true}, {Create: true}, {Check: ledger.CheckFull}} {
		l, err := ledger.Open(context.Background(), path, opts)
		if err == nil {
			l.Close()
			t.Fatalf("ledger.Open(%+v) of a damaged file succeeded", opts)
		}
		var le *ledger.Error
		if !errors.Is(err, ledger.ErrCorrupt) || !errors.As(err, &le) || le.Location != path {
			t.Fatalf("ledger.Open(%+v) = %v, want a *ledger.Error wrapping ErrCorrupt for %s", opts, err, path)
		}
		for _, w := range []string{"ledger is corrupt", "restore the ledger from a backup", "mcp-changeset check", "left unchanged"} {
			if !strings.Contains(err.Error(), w) {
				t.Errorf("the error does not say %q: %v", w, err)
			}
		}
		if first == nil {
			first = err
		}
	}
	if l, err := ledger.Open(context.Background(), path, ledger.OpenOptions{}); err == nil || !errors.Is(err, ledger.ErrCorrupt) {
		if l != nil {
			l.Close()
		}
		t.Fatalf("ledger.Open of a damaged file = %v, want ErrCorrupt", err)
	}
	if after := fileDigest(t, path); after != before {
		t.Fatal("a refused open changed the damaged file")
	}
	if fi, err := os.Stat(path + "-wal"); err == nil && fi.Size() != 0 {
		t.Errorf("a refused open left %d bytes of write-ahead log", fi.Size())
	}
	return first
}

func TestOpen_RefusesADamagedPageUnchanged(t *testing.T) {
	t.Parallel()
	pristinePath, _ := damageLedger(t, t.TempDir())
	pristine := readFile(t, pristinePath)
	trees, pageSize := treePages(t, pristinePath)
	changes, index := trees["changes"], trees["changes_created"]
	if len(interiors(changes)) < 3 || len(interiors(index)) < 1 {
		t.Fatalf("the ledger's trees are too shallow: changes %d interior pages, index %d", len(interiors(changes)), len(interiors(index)))
	}
	mid := func(ps []int64) int64 { return ps[len(ps)/2] }
	at := func(p int64) (int64, int64) { return (p - 1) * pageSize, p * pageSize }
	cases := []struct {
		name     string
		from, to int64
		says     string
	}{
		{"a leaf of the changes table", 0, 0, "open-time integrity check"},
		{"a leaf of an index", 0, 0, "open-time integrity check"},
		{"the schema page", headerSize, pageSize, "schema"},
		{"the header after its magic string", 16, headerSize, "header"},
		{"the whole header", 0, headerSize, "first bytes were overwritten"},
	}
	cases[0].from, cases[0].to = at(mid(leaves(changes)))
	cases[1].from, cases[1].to = at(mid(leaves(index)))
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			for seed := range uint64(5) {
				path := filepath.Join(t.TempDir(), "ledger.db")
				if err := os.WriteFile(path, pristine, 0o600); err != nil {
					t.Fatal(err)
				}
				scribble(t, path, tc.from, tc.to, seed)
				err := refusedCorrupt(t, path)
				if !strings.Contains(err.Error(), tc.says) {
					t.Errorf("seed %d: the error does not say %q: %v", seed, tc.says, err)
				}
			}
		})
	}
}

func TestOpen_RefusesATruncatedFile(t *testing.T) {
	t.Parallel()
	path, _ := damageLedger(t, t.TempDir())
	data := readFile(t, path)
	if err := os.WriteFile(path, data[:len(data)-3*4096], 0o600); err != nil {
		t.Fatal(err)
	}
	err := refusedCorrupt(t, path)
	if !strings.Contains(err.Error(), "the file is truncated: its header counts") {
		t.Errorf("the error does not say the file is truncated: %v", err)
	}
}

func TestOpen_DamageTheStructuralCheckMissesSurfacesAtFirstRead(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	path, want := damageLedger(t, t.TempDir())
	trees, pageSize := treePages(t, path)
	ls := leaves(trees["changes"])
	leaf := ls[len(ls)/2]
	scribble(t, path, (leaf-1)*pageSize, leaf*pageSize, 3)
	before := fileDigest(t, path)

	// The full check of CheckAuto on a file this small sees it.
	refusedCorrupt(t, path)

	// The structural check of a large file does not read that leaf.
	b, err := openStructural(path)
	if err != nil {
		t.Fatalf("the structural check refused a damaged middle leaf (it does not read it): %v", err)
	}
	defer b.Close()
	_, err = b.ListChanges(ctx, b.DB(), ledger.ChangeFilter{})
	mustCorrupt(t, "ListChanges", err)
	// Every row reads as it was written, or fails with ErrCorrupt: never
	// as something else.
	lost := 0
	for _, w := range want {
		got, err := b.GetChange(ctx, b.DB(), w.ID)
		if err != nil {
			mustCorrupt(t, "GetChange "+w.ID, err)
			lost++
			continue
		}
		if !reflect.DeepEqual(got, w) {
			t.Fatalf("GetChange %s read a different change from a damaged ledger:\n got %+v\nwant %+v", w.ID, got, w)
		}
	}
	if lost == 0 || lost > 10 {
		t.Errorf("%d of %d changes are unreadable, want the few on the damaged leaf", lost, len(want))
	}
	problems, err := b.Check(ctx)
	if err != nil || len(problems) == 0 || !strings.HasPrefix(problems[0], "integrity: ") {
		t.Errorf("Check = %q, %v; want the damage reported", problems, err)
	}
	if err := b.Close(); err != nil {
		t.Fatal(err)
	}
	if fileDigest(t, path) != before {
		t.Error("reading the damaged ledger changed it")
	}
}

// mustCorrupt fails the test unless err is a *ledger.Error wrapping
// ErrCorrupt.
func mustCorrupt(t *testing.T, what string, err error) {
	t.Helper()
	var le *ledger.Error
	if !errors.Is(err, ledger.ErrCorrupt) || !errors.As(err, &le) {
		t.Fatalf("%s on a damaged ledger = %v, want a *ledger.Error wrapping ErrCorrupt", what, err)
	}
}

func TestOpen_CheckNoneOpensADamagedPageForCheck(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	path, _ := damageLedger(t, t.TempDir())
	trees, pageSize := treePages(t, path)
	root := trees["changes"][0].no
	scribble(t, path, (root-1)*pageSize, root*pageSize, 11)
	before := fileDigest(t, path)
	l, err := ledger.Open(ctx, path, ledger.OpenOptions{ReadOnly: true, Check: ledger.CheckNone})
	if err != nil {
		t.Fatalf("CheckNone refused a file whose schema is intact: %v", err)
	}
	problems, err := l.Check(ctx)
	l.Close()
	if err != nil || len(problems) == 0 || !strings.Contains(strings.Join(problems, "\n"), fmt.Sprintf("page %d", root)) {
		t.Errorf("Check = %q, %v; want the damaged page named", problems, err)
	}
	if fileDigest(t, path) != before {
		t.Error("check changed the damaged file")
	}
	// The schema itself is what CheckNone still needs.
	scribble(t, path, headerSize, pageSize, 11)
	_, err = ledger.Open(ctx, path, ledger.OpenOptions{ReadOnly: true, Check: ledger.CheckNone})
	if !errors.Is(err, ledger.ErrCorrupt) {
		t.Errorf("CheckNone with the schema page damaged = %v, want ErrCorrupt", err)
	}
}

func TestOpen_RefusesDamageBeneathAWriteAheadLogWithoutCheckpointing(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	path, _ := damageLedger(t, t.TempDir())
	trees, pageSize := treePages(t, path)
	ls := leaves(trees["changes"])
	// A server writes a few rows and is killed before any checkpoint:
	// copy the file and its log while the writer still holds them.
	b, err := Open(ctx, path, ledger.OpenOptions{})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := b.DB().Exec("PRAGMA wal_autocheckpoint = 0"); err != nil {
		t.Fatal(err)
	}
	for i := range 5 {
		if err := b.InsertChange(ctx, b.DB(), pendingChange(fmt.Sprintf("chg_new_%d", i), t0)); err != nil {
			t.Fatal(err)
		}
	}
	crashed := filepath.Join(t.TempDir(), "ledger.db")
	main, wal := readFile(t, path), readFile(t, path+"-wal")
	b.Close()
	if len(wal) == 0 {
		t.Fatal("the writer left no write-ahead log")
	}
	write := func() {
		t.Helper()
		os.Remove(crashed + "-shm")
		if err := os.WriteFile(crashed, main, 0o600); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(crashed+"-wal", wal, 0o600); err != nil {
			t.Fatal(err)
		}
	}
	// Sound, it opens with either check, and the logged rows are there.
	for _, limit := range []int64{fullCheckMaxBytes, 0} {
		write()
		b, err := open(ctx, crashed, ledger.OpenOptions{ReadOnly: true}, limit)
		if err != nil {
			t.Fatalf("a sound ledger with a write-ahead log (limit %d): %v", limit, err)
		}
		if _, err := b.GetChange(ctx, b.DB(), "chg_new_4"); err != nil {
			t.Errorf("the logged change: %v", err)
		}
		b.Close()
	}
	// Damaged beneath the log, it is refused, and neither the file nor
	// the log is written: no checkpoint ran.
	for _, tc := range []struct {
		page  int64
		limit int64
	}{{ls[len(ls)/2], fullCheckMaxBytes}, {ls[0], 0}} {
		write()
		scribble(t, crashed, (tc.page-1)*pageSize, tc.page*pageSize, 5)
		before, walBefore := fileDigest(t, crashed), fileDigest(t, crashed+"-wal")
		for _, opts := range []ledger.OpenOptions{{}, {ReadOnly: true}} {
			_, err := open(ctx, crashed, opts, tc.limit)
			if !errors.Is(err, ledger.ErrCorrupt) {
				t.Fatalf("page %d damaged beneath a log (limit %d, %+v): %v, want ErrCorrupt", tc.page, tc.limit, opts, err)
			}
		}
		if fileDigest(t, crashed) != before || fileDigest(t, crashed+"-wal") != walBefore {
			t.Fatal("a refused open changed the file or its write-ahead log")
		}
	}
}
