package sqlite

import (
	"bytes"
	"context"
	"database/sql"
	"errors"
	"fmt"
	"math/rand/v2"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/mcp-changeset/changeset-go/ledger"
)

// rawDB opens path with the driver directly, outside this package's checks.
func rawDB(t *testing.T, path string) *sql.DB {
	t.Helper()
	db, err := sql.Open(driverName, "file:"+escapePath(path))
	if err != nil {
		t.Fatal(err)
	}
	return db
}

func exec(t *testing.T, db *sql.DB, stmts ...string) {
	t.Helper()
	for _, s := range stmts {
		if _, err := db.Exec(s); err != nil {
			t.Fatalf("%s: %v", s, err)
		}
	}
}

func readFile(t *testing.T, path string) []byte {
	t.Helper()
	b, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	return b
}

// createLedger makes a ledger with a few rows at path and closes it.
func createLedger(t *testing.T, path string) {
	t.Helper()
	ctx := context.Background()
	b, err := Open(ctx, path, ledger.OpenOptions{Create: true})
	if err != nil {
		t.Fatal(err)
	}
	for i := range 50 {
		c := fullChange(fmt.Sprintf("chg_%03d", i), t0.Add(time.Duration(i)*time.Second))
		c.Summary = strings.Repeat("s", 500)
		if err := b.InsertChange(ctx, b.DB(), c); err != nil {
			t.Fatal(err)
		}
	}
	if err := b.Close(); err != nil {
		t.Fatal(err)
	}
}

// refused checks that opening path fails with want and leaves the file
// as it was.
func refused(t *testing.T, path string, opts ledger.OpenOptions, want error) error {
	t.Helper()
	before, statErr := os.ReadFile(path)
	b, err := Open(context.Background(), path, opts)
	if err == nil {
		b.Close()
		t.Fatalf("Open(%+v) succeeded, want %v", opts, want)
	}
	if !errors.Is(err, want) {
		t.Fatalf("Open(%+v) = %v, want %v", opts, err, want)
	}
	var le *ledger.Error
	if !errors.As(err, &le) || le.Location != path {
		t.Errorf("error %#v is not a *ledger.Error for %s", err, path)
	}
	after, afterErr := os.ReadFile(path)
	if (statErr == nil) != (afterErr == nil) || !bytes.Equal(before, after) {
		t.Errorf("Open(%+v) changed or created %s", opts, path)
	}
	return err
}

func TestMissingFileNotCreated(t *testing.T) {
	t.Parallel()
	path := filepath.Join(t.TempDir(), "missing.db")
	refused(t, path, ledger.OpenOptions{}, ledger.ErrNotExist)
	refused(t, path, ledger.OpenOptions{ReadOnly: true, Create: true}, ledger.ErrNotExist)
	if entries, _ := os.ReadDir(filepath.Dir(path)); len(entries) != 0 {
		t.Errorf("files left behind: %v", entries)
	}
	noDir := filepath.Join(t.TempDir(), "no", "such", "dir", "ledger.db")
	_, err := Open(context.Background(), noDir, ledger.OpenOptions{Create: true})
	if err == nil || !strings.Contains(err.Error(), "does not exist") || errors.Is(err, ledger.ErrNotExist) {
		t.Errorf("Open in a missing directory: %v", err)
	}
	if _, err := os.Stat(filepath.Dir(noDir)); err == nil {
		t.Error("Open created the missing directory")
	}
}

func TestForeignSQLiteRefusedUnchanged(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	// Same table names as a ledger, but no application_id.
	lookalike := filepath.Join(dir, "lookalike.db")
	db := rawDB(t, lookalike)
	exec(t, db, "CREATE TABLE changes (id TEXT PRIMARY KEY, status TEXT)", "CREATE TABLE runs (id TEXT)",
		"CREATE TABLE meta (key TEXT, value BLOB)", "PRAGMA user_version = 1")
	db.Close()
	for _, opts := range []ledger.OpenOptions{{}, {Create: true}, {ReadOnly: true}} {
		err := refused(t, lookalike, opts, ledger.ErrForeign)
		if !strings.Contains(err.Error(), "application_id") {
			t.Errorf("message %q does not say why", err)
		}
	}
	if _, err := os.Stat(lookalike + "-wal"); err == nil {
		t.Error("a -wal file was created beside a foreign rollback-journal database")
	}

	// Another application's database, in WAL mode.
	other := filepath.Join(dir, "other.db")
	db = rawDB(t, other)
	exec(t, db, "PRAGMA journal_mode = WAL", "PRAGMA application_id = 305419896", "CREATE TABLE t (x)")
	db.Close()
	err := refused(t, other, ledger.OpenOptions{Create: true}, ledger.ErrForeign)
	if !strings.Contains(err.Error(), "0x12345678") {
		t.Errorf("message %q does not name the application_id", err)
	}
}

func TestNewerSchemaRefused(t *testing.T) {
	t.Parallel()
	path := filepath.Join(t.TempDir(), "ledger.db")
	createLedger(t, path)
	db := rawDB(t, path)
	exec(t, db, fmt.Sprintf("PRAGMA user_version = %d", SchemaVersion+1))
	db.Close()
	refused(t, path, ledger.OpenOptions{}, ledger.ErrNewerSchema)
	refused(t, path, ledger.OpenOptions{ReadOnly: true}, ledger.ErrNewerSchema)
}

func TestLedgerIDWithoutVersionRefused(t *testing.T) {
	t.Parallel()
	path := filepath.Join(t.TempDir(), "ledger.db")
	db := rawDB(t, path)
	exec(t, db, fmt.Sprintf("PRAGMA application_id = %d", ApplicationID), "CREATE TABLE t (x)")
	db.Close()
	refused(t, path, ledger.OpenOptions{Create: true}, ledger.ErrCorrupt)
}

func TestNonDatabaseFilesRefused(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	write := func(name string, data []byte) string {
		p := filepath.Join(dir, name)
		if err := os.WriteFile(p, data, 0o600); err != nil {
			t.Fatal(err)
		}
		return p
	}
	text := write("notes.txt", []byte("just some notes\n"))
	refused(t, text, ledger.OpenOptions{}, ledger.ErrForeign)
	refused(t, text, ledger.OpenOptions{Create: true}, ledger.ErrForeign)
	random := make([]byte, 8192)
	for i := range random {
		random[i] = byte(rand.IntN(256))
	}
	refused(t, write("random.bin", random), ledger.OpenOptions{Create: true}, ledger.ErrForeign)
	refused(t, write("short", []byte("SQLite")), ledger.OpenOptions{Create: true}, ledger.ErrForeign)
	refused(t, dir, ledger.OpenOptions{Create: true}, ledger.ErrForeign)
}

func TestEmptyFile(t *testing.T) {
	t.Parallel()
	path := filepath.Join(t.TempDir(), "empty.db")
	if err := os.WriteFile(path, nil, 0o600); err != nil {
		t.Fatal(err)
	}
	refused(t, path, ledger.OpenOptions{}, ledger.ErrForeign)
	refused(t, path, ledger.OpenOptions{ReadOnly: true}, ledger.ErrForeign)
	if fi, err := os.Stat(path); err != nil || fi.Size() != 0 {
		t.Fatalf("empty file changed: %v %v", fi, err)
	}
	b, err := Open(context.Background(), path, ledger.OpenOptions{Create: true})
	if err != nil {
		t.Fatalf("Open(create) of an empty file: %v", err)
	}
	b.Close()
	if _, err := Open(context.Background(), path, ledger.OpenOptions{ReadOnly: true}); err != nil {
		t.Errorf("reopening the initialised file: %v", err)
	}
}

func TestEmptySQLiteDatabase(t *testing.T) {
	t.Parallel()
	path := filepath.Join(t.TempDir(), "blank.db")
	db := rawDB(t, path)
	exec(t, db, "PRAGMA journal_mode = WAL", "CREATE TABLE t (x)", "DROP TABLE t")
	db.Close()
	refused(t, path, ledger.OpenOptions{}, ledger.ErrForeign)
	b, err := Open(context.Background(), path, ledger.OpenOptions{Create: true})
	if err != nil {
		t.Fatalf("Open(create) of an empty SQLite database: %v", err)
	}
	b.Close()
}

func TestCorruptFile(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	dir := t.TempDir()
	pages := filepath.Join(dir, "pages.db")
	createLedger(t, pages)
	data := readFile(t, pages)
	if len(data) < 3*4096 {
		t.Fatalf("ledger too small to damage: %d bytes", len(data))
	}
	// Every page but the schema's (page 1 and any that the schema
	// overflowed into) gets random bytes.
	schema := schemaPages(t, pages)
	rng := rand.New(rand.NewPCG(1, 2))
	for i := 0; i < len(data); i++ {
		if !schema[i/4096+1] {
			data[i] = byte(rng.IntN(256))
		}
	}
	if err := os.WriteFile(pages, data, 0o600); err != nil {
		t.Fatal(err)
	}
	// The schema is intact, but the open-time check reads the rest.
	refused(t, pages, ledger.OpenOptions{}, ledger.ErrCorrupt)
	refused(t, pages, ledger.OpenOptions{ReadOnly: true}, ledger.ErrCorrupt)
	// Opened without it, as mcp-changeset check does, the damage shows
	// when rows are read, and Check reports it.
	b, err := Open(ctx, pages, ledger.OpenOptions{ReadOnly: true, Check: ledger.CheckNone})
	if err != nil {
		t.Fatalf("Open(CheckNone) of damaged pages: %v", err)
	}
	if problems, err := b.Check(ctx); err != nil || len(problems) == 0 {
		t.Errorf("Check of damaged pages = %q, %v; want problems", problems, err)
	}
	_, err = b.ListChanges(ctx, b.DB(), ledger.ChangeFilter{})
	b.Close()
	if !errors.Is(err, ledger.ErrCorrupt) {
		t.Errorf("reading damaged pages: %v, want ErrCorrupt", err)
	}

	header := filepath.Join(dir, "header.db")
	createLedger(t, header)
	data = readFile(t, header)
	for i := 16; i < 100; i++ {
		data[i] = 0xEE
	}
	if err := os.WriteFile(header, data, 0o600); err != nil {
		t.Fatal(err)
	}
	refused(t, header, ledger.OpenOptions{Create: true}, ledger.ErrCorrupt)
}

// schemaPages lists the pages of the file's schema table (1-based).
func schemaPages(t *testing.T, path string) map[int]bool {
	t.Helper()
	db, err := sql.Open("sqlite", "file:"+path+"?mode=ro")
	if err != nil {
		t.Fatal(err)
	}
	defer db.Close()
	rows, err := db.Query(`SELECT pageno FROM dbstat WHERE name = 'sqlite_schema'`)
	if err != nil {
		t.Fatal(err)
	}
	defer rows.Close()
	out := map[int]bool{1: true}
	for rows.Next() {
		var no int
		if err := rows.Scan(&no); err != nil {
			t.Fatal(err)
		}
		out[no] = true
	}
	if err := rows.Err(); err != nil {
		t.Fatal(err)
	}
	return out
}
