package ledger_test

import (
	"context"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/mcp-changeset/changeset-go/ledger"
	_ "github.com/mcp-changeset/changeset-go/ledger/sqlite"
)

func TestWithTx_RetriesWhatTheDatabaseAbortedAndNothingElse(t *testing.T) {
	l, err := ledger.Open(context.Background(), filepath.Join(t.TempDir(), "l.db"), ledger.OpenOptions{Create: true})
	if err != nil {
		t.Fatal(err)
	}
	defer l.Close()
	ctx := context.Background()
	aborted := fmt.Errorf("%w (%w): deadlock", ledger.ErrRetry, ledger.ErrBusy)

	calls := 0
	err = l.WithTx(ctx, func(tx *ledger.Tx) error {
		calls++
		if calls < 3 {
			return aborted
		}
		return tx.InsertRun(&ledger.Run{ID: "run_00000000000000000001", Status: ledger.RunOpen, CreatedAt: l.Now(), UpdatedAt: l.Now()})
	})
	if err != nil || calls != 3 {
		t.Fatalf("WithTx = %v after %d calls, want success after 3", err, calls)
	}
	if _, err := l.Run(ctx, "run_00000000000000000001"); err != nil {
		t.Fatalf("the retried transaction did not commit: %v", err)
	}

	calls = 0
	err = l.WithTx(ctx, func(*ledger.Tx) error { calls++; return aborted })
	if !errors.Is(err, ledger.ErrBusy) || calls != 4 {
		t.Fatalf("endless aborts: %v after %d calls, want ErrBusy after 4", err, calls)
	}

	calls = 0
	other := errors.New("refused")
	if err := l.WithTx(ctx, func(*ledger.Tx) error { calls++; return other }); err != other || calls != 1 {
		t.Fatalf("an ordinary error was retried: %v after %d calls", err, calls)
	}
}

func TestOpen_RefusesMistypedDatabaseAddressesWithoutCreatingAFile(t *testing.T) {
	dir := t.TempDir()
	t.Chdir(dir)
	for _, target := range []string{
		"postgres:/db",
		"postgresql:db",
		"host=db user=app password=hunter2 dbname=app",
		"dbname=app",
	} {
		_, err := ledger.Open(context.Background(), target, ledger.OpenOptions{Create: true})
		if err == nil {
			t.Errorf("%q accepted", target)
			continue
		}
		if strings.Contains(err.Error(), "hunter2") {
			t.Errorf("%q: the error repeats the password: %v", target, err)
		}
	}
	if entries, _ := os.ReadDir(dir); len(entries) != 0 {
		t.Fatalf("mistyped targets created %v", entries)
	}
}

func TestMeta_KeepsTheFirstValueStored(t *testing.T) {
	ctx := context.Background()
	l, err := ledger.Open(ctx, filepath.Join(t.TempDir(), "l.db"), ledger.OpenOptions{Create: true})
	if err != nil {
		t.Fatal(err)
	}
	defer l.Close()
	if v, ok, err := l.Meta(ctx, "app.key"); ok || v != nil || err != nil {
		t.Fatalf("Meta of an unset key = %q, %v, %v; want nothing", v, ok, err)
	}
	if v, err := l.SetMetaIfAbsent(ctx, "app.key", []byte("first")); err != nil || string(v) != "first" {
		t.Fatalf("first SetMetaIfAbsent = %q, %v", v, err)
	}
	if v, err := l.SetMetaIfAbsent(ctx, "app.key", []byte("second")); err != nil || string(v) != "first" {
		t.Fatalf("second SetMetaIfAbsent = %q, %v; want the first value back", v, err)
	}
	if v, ok, err := l.Meta(ctx, "app.key"); !ok || string(v) != "first" || err != nil {
		t.Fatalf("Meta = %q, %v, %v; want the first value", v, ok, err)
	}
}

// TestReads_RefuseFiltersOverTheBounds checks that every read taking a
// ChangeFilter, on the Ledger and in a Tx, refuses a search longer than
// MaxFilterText and more than MaxDependsOnAny resources, and that the
// counts agree with the lists within the bounds.
func TestReads_RefuseFiltersOverTheBounds(t *testing.T) {
	ctx := context.Background()
	l, err := ledger.Open(ctx, filepath.Join(t.TempDir(), "l.db"), ledger.OpenOptions{Create: true})
	if err != nil {
		t.Fatal(err)
	}
	defer l.Close()
	now := l.Now()
	err = l.WithTx(ctx, func(tx *ledger.Tx) error {
		for _, id := range []string{"chg_1", "chg_2"} {
			c := &ledger.Change{ID: id, Action: "set", Status: ledger.Pending, ConfirmHash: "c", Summary: "set " + id, CreatedAt: now, UpdatedAt: now, ExpiresAt: now}
			if err := tx.InsertChange(c); err != nil {
				return err
			}
		}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	ok := ledger.ChangeFilter{Text: "chg_1"}
	if cs, err := l.Changes(ctx, ok); err != nil || len(cs) != 1 {
		t.Errorf("Changes(%+v) = %d, %v; want 1", ok, len(cs), err)
	}
	if n, err := l.CountChanges(ctx, ok); err != nil || n != 1 {
		t.Errorf("CountChanges(%+v) = %d, %v; want 1", ok, n, err)
	}
	err = l.WithTx(ctx, func(tx *ledger.Tx) error {
		tally, err := tx.TallyChanges(ok)
		if err != nil || len(tally) != 1 || tally[0].N != 1 || tally[0].Action != "set" || tally[0].Status != ledger.Pending {
			t.Errorf("Tx.TallyChanges(%+v) = %+v, %v; want one pending set", ok, tally, err)
		}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	for name, f := range map[string]ledger.ChangeFilter{
		"text":      {Text: strings.Repeat("a", ledger.MaxFilterText+1)},
		"resources": {DependsOnAny: make([]string, ledger.MaxDependsOnAny+1)},
	} {
		reads := map[string]func() error{
			"Ledger.Changes":      func() error { _, err := l.Changes(ctx, f); return err },
			"Ledger.CountChanges": func() error { _, err := l.CountChanges(ctx, f); return err },
			"Ledger.TallyChanges": func() error { _, err := l.TallyChanges(ctx, f); return err },
			"Tx.Changes": func() error {
				return l.WithTx(ctx, func(tx *ledger.Tx) error { _, err := tx.Changes(f); return err })
			},
			"Tx.CountChanges": func() error {
				return l.WithTx(ctx, func(tx *ledger.Tx) error { _, err := tx.CountChanges(f); return err })
			},
			"Tx.TallyChanges": func() error {
				return l.WithTx(ctx, func(tx *ledger.Tx) error { _, err := tx.TallyChanges(f); return err })
			},
		}
		for read, fn := range reads {
			if err := fn(); err == nil || !strings.Contains(err.Error(), "at most") {
				t.Errorf("%s over the %s bound: %v; want a refusal saying the bound", read, name, err)
			}
		}
	}
}
