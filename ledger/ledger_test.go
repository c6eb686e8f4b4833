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
	l, err := ledger.Open(filepath.Join(t.TempDir(), "l.db"), true)
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
	if _, err := l.GetRun(ctx, "run_00000000000000000001"); err != nil {
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
		_, err := ledger.Open(target, true)
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
