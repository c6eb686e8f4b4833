package sqlite

import (
	"context"
	"errors"
	"path/filepath"
	"sync"
	"testing"
	"time"

	"github.com/mcp-changeset/changeset-go/ledger"
	"github.com/mcp-changeset/changeset-go/ledger/driver"
)

// Writers of one process wait their turn in line: many goroutines writing
// at once, each holding the lock a little, never see ErrBusy as long as the
// line is shorter than the busy timeout, and a turn that waits longer fails
// with ErrBusy instead of hanging.
func TestWriteQueue_WritersOfOneProcessTakeTurns(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	b, err := Open(ctx, filepath.Join(t.TempDir(), "ledger.db"), ledger.OpenOptions{Create: true, BusyTimeout: 2 * time.Second})
	if err != nil {
		t.Fatal(err)
	}
	defer b.Close()
	l := driver.NewLedger(b)
	var wg sync.WaitGroup
	errs := make(chan error, 64)
	for range 8 {
		wg.Go(func() {
			for range 8 {
				errs <- l.WithTx(ctx, func(tx *ledger.Tx) error {
					time.Sleep(5 * time.Millisecond) // hold the lock a little
					_, err := tx.SQL().ExecContext(ctx, "SELECT 1")
					return err
				})
			}
		})
	}
	wg.Wait()
	close(errs)
	for err := range errs {
		if err != nil {
			t.Fatalf("a writer of this process: %v", err)
		}
	}

	// A turn that waits past the busy timeout fails with ErrBusy.
	short, err := Open(ctx, filepath.Join(t.TempDir(), "short.db"), ledger.OpenOptions{Create: true, BusyTimeout: 50 * time.Millisecond})
	if err != nil {
		t.Fatal(err)
	}
	defer short.Close()
	ls := driver.NewLedger(short)
	held, err := ls.Begin(ctx)
	if err != nil {
		t.Fatal(err)
	}
	start := time.Now()
	err = ls.WithTx(ctx, func(*ledger.Tx) error { return nil })
	if !errors.Is(err, ledger.ErrBusy) || time.Since(start) > time.Second {
		t.Fatalf("a second writer while the first holds its turn: %v after %v, want ErrBusy after about 50ms", err, time.Since(start))
	}
	held.Rollback()
	if err := ls.WithTx(ctx, func(*ledger.Tx) error { return nil }); err != nil {
		t.Fatalf("after the turn ended: %v", err)
	}
}
