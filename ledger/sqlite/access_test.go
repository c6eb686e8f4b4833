package sqlite

import (
	"bytes"
	"context"
	"database/sql"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/mcp-changeset/changeset-go/ledger"
	"github.com/mcp-changeset/changeset-go/ledger/driver"
)

func TestReadOnlyLeavesMainFileUnchanged(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	path := filepath.Join(t.TempDir(), "ledger.db")
	createLedger(t, path)
	before := readFile(t, path)
	b, err := Open(ctx, path, ledger.OpenOptions{ReadOnly: true})
	if err != nil {
		t.Fatal(err)
	}
	if cs, err := b.ListChanges(ctx, b.DB(), ledger.ChangeFilter{}); err != nil || len(cs) != 50 {
		t.Errorf("ListChanges = %d, %v", len(cs), err)
	}
	if _, err := b.GetChange(ctx, b.DB(), "chg_007"); err != nil {
		t.Error(err)
	}
	if _, _, err := b.GetMeta(ctx, b.DB(), "k"); err != nil {
		t.Error(err)
	}
	if problems, err := b.Check(ctx); err != nil || len(problems) != 0 {
		t.Errorf("Check = %q, %v", problems, err)
	}
	if _, err := b.BeginWrite(ctx); !errors.Is(err, ledger.ErrReadOnly) {
		t.Errorf("BeginWrite on a read-only ledger: %v", err)
	}
	err = b.InsertChange(ctx, b.DB(), pendingChange("chg_new", t0))
	if !errors.Is(err, ledger.ErrReadOnly) {
		t.Errorf("InsertChange on a read-only ledger: %v, want ErrReadOnly", err)
	}
	if err := b.Close(); err != nil {
		t.Fatal(err)
	}
	if after := readFile(t, path); !bytes.Equal(before, after) {
		t.Error("a read-only open changed the main file")
	}
}

func TestReadOnlySeesUncheckpointedWrites(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	path := filepath.Join(t.TempDir(), "ledger.db")
	w, err := Open(ctx, path, ledger.OpenOptions{Create: true})
	if err != nil {
		t.Fatal(err)
	}
	defer w.Close()
	if err := w.InsertChange(ctx, w.DB(), pendingChange("chg_1", t0)); err != nil {
		t.Fatal(err)
	}
	r, err := Open(ctx, path, ledger.OpenOptions{ReadOnly: true})
	if err != nil {
		t.Fatal(err)
	}
	defer r.Close()
	if _, err := r.GetChange(ctx, r.DB(), "chg_1"); err != nil {
		t.Error(err)
	}
}

func TestPragmasAndIdentity(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	path := filepath.Join(t.TempDir(), "ledger.db")
	b, err := Open(ctx, path, ledger.OpenOptions{Create: true, BusyTimeout: 1234 * time.Millisecond})
	if err != nil {
		t.Fatal(err)
	}
	defer b.Close()
	// Check several connections of the pool at once.
	var conns []*sql.Conn
	for range 3 {
		c, err := b.DB().Conn(ctx)
		if err != nil {
			t.Fatal(err)
		}
		conns = append(conns, c)
	}
	for _, c := range conns {
		for pragma, want := range map[string]string{
			"journal_mode": "wal", "synchronous": "2", "busy_timeout": "1234", "foreign_keys": "1",
			"application_id": fmt.Sprint(ApplicationID), "user_version": fmt.Sprint(SchemaVersion),
		} {
			var got string
			if err := c.QueryRowContext(ctx, "PRAGMA "+pragma).Scan(&got); err != nil || got != want {
				t.Errorf("PRAGMA %s = %q, %v; want %q", pragma, got, err, want)
			}
		}
		c.Close()
	}
	if b.Location() != path {
		t.Errorf("Location() = %q", b.Location())
	}
}

func TestSpecialCharactersInPath(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	dir := filepath.Join(t.TempDir(), "a dir ? with # odd %41 chars")
	if err := os.Mkdir(dir, 0o700); err != nil {
		t.Fatal(err)
	}
	path := filepath.Join(dir, "led?ger #1 100%25 &mode=ro=x é.db")
	b, err := Open(ctx, path, ledger.OpenOptions{Create: true})
	if err != nil {
		t.Fatal(err)
	}
	if err := b.InsertChange(ctx, b.DB(), pendingChange("chg_1", t0)); err != nil {
		t.Fatal(err)
	}
	b.Close()
	if fi, err := os.Stat(path); err != nil || fi.Mode().Perm() != 0o600 {
		t.Errorf("new ledger: %v, %v; want mode 0600", fi.Mode(), err)
	}
	entries, _ := os.ReadDir(dir)
	if len(entries) != 1 || entries[0].Name() != filepath.Base(path) {
		t.Fatalf("files in %q: %v, want only %q", dir, entries, filepath.Base(path))
	}
	b, err = Open(ctx, path, ledger.OpenOptions{})
	if err != nil {
		t.Fatal(err)
	}
	defer b.Close()
	if _, err := b.GetChange(ctx, b.DB(), "chg_1"); err != nil {
		t.Error(err)
	}
}

func TestRelativePath(t *testing.T) {
	// Not parallel: it changes the working directory.
	t.Chdir(t.TempDir())
	b, err := Open(context.Background(), "rel.db", ledger.OpenOptions{Create: true})
	if err != nil {
		t.Fatal(err)
	}
	b.Close()
	if _, err := os.Stat("rel.db"); err != nil {
		t.Error(err)
	}
}

func TestBusy(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	path := filepath.Join(t.TempDir(), "ledger.db")
	createLedger(t, path)

	// Another "process": its own pool, holding the write lock.
	dsn, err := buildDSN(path, false, time.Second)
	if err != nil {
		t.Fatal(err)
	}
	other, err := sql.Open(driverName, dsn)
	if err != nil {
		t.Fatal(err)
	}
	defer other.Close()
	holder, err := other.BeginTx(ctx, nil) // BEGIN IMMEDIATE
	if err != nil {
		t.Fatal(err)
	}
	defer holder.Rollback()

	// Opening and reading do not need the write lock.
	b, err := Open(ctx, path, ledger.OpenOptions{BusyTimeout: 100 * time.Millisecond})
	if err != nil {
		t.Fatalf("Open while another process writes: %v", err)
	}
	defer b.Close()
	if _, err := b.GetChange(ctx, b.DB(), "chg_001"); err != nil {
		t.Errorf("read while another process writes: %v", err)
	}

	start := time.Now()
	tx, err := b.BeginWrite(ctx)
	if err == nil {
		tx.Rollback()
		t.Fatal("BeginWrite succeeded while another process held the write lock")
	}
	if elapsed := time.Since(start); elapsed > 3*time.Second {
		t.Errorf("BeginWrite took %v with a 100ms busy timeout", elapsed)
	}
	if !errors.Is(err, ledger.ErrBusy) || !strings.Contains(err.Error(), "SQLITE_BUSY") {
		t.Errorf("BeginWrite = %v, want ErrBusy naming SQLITE_BUSY", err)
	}
	err = driver.NewLedger(b).WithTx(ctx, func(*ledger.Tx) error { return nil })
	if !errors.Is(err, ledger.ErrBusy) {
		t.Errorf("WithTx = %v, want ErrBusy", err)
	}

	holder.Rollback()
	tx, err = b.BeginWrite(ctx)
	if err != nil {
		t.Fatalf("BeginWrite after the lock was released: %v", err)
	}
	tx.Rollback()
}

func TestConcurrentCreate(t *testing.T) {
	t.Parallel()
	path := filepath.Join(t.TempDir(), "ledger.db")
	var wg sync.WaitGroup
	errs := make(chan error, 8)
	for range 8 {
		wg.Go(func() {
			b, err := Open(context.Background(), path, ledger.OpenOptions{Create: true})
			if err == nil {
				err = b.Close()
			}
			errs <- err
		})
	}
	wg.Wait()
	close(errs)
	for err := range errs {
		if err != nil {
			t.Error(err)
		}
	}
}

func TestRegisteredForFilePaths(t *testing.T) {
	t.Parallel()
	path := filepath.Join(t.TempDir(), "ledger.db")
	l, err := ledger.Open(context.Background(), path, ledger.OpenOptions{Create: true})
	if err != nil {
		t.Fatal(err)
	}
	defer l.Close()
	if _, ok := driver.BackendOf(l).(*Backend); !ok {
		t.Errorf("backend is %T", driver.BackendOf(l))
	}
	if _, err := ledger.Open(context.Background(), filepath.Join(t.TempDir(), "missing.db"), ledger.OpenOptions{}); !errors.Is(err, ledger.ErrNotExist) {
		t.Errorf("ledger.Open of a missing file: %v", err)
	}
}
