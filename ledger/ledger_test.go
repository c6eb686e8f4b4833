package ledger_test

import (
	"context"
	"errors"
	"fmt"
	"path/filepath"
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
