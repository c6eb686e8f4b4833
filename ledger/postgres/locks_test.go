package postgres_test

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/mcp-changeset/changeset-go/internal/pgtest"
	"github.com/mcp-changeset/changeset-go/ledger"
	"github.com/mcp-changeset/changeset-go/ledger/driver"
	"github.com/mcp-changeset/changeset-go/ledger/postgres"
)

var t0 = time.Date(2025, 3, 4, 5, 6, 7, 123456000, time.UTC)

// newLedger opens a new ledger and stores pending changes with the given
// IDs.
func newLedger(t *testing.T, opts ledger.OpenOptions, ids ...string) (*postgres.Backend, string) {
	t.Helper()
	dsn := pgtest.DSN(t)
	opts.Create = true
	b := open(t, dsn, opts)
	for _, id := range ids {
		c := &ledger.Change{ID: id, Action: "a", Status: ledger.Pending, CreatedAt: t0, UpdatedAt: t0}
		if err := b.InsertChange(context.Background(), b.DB(), c); err != nil {
			t.Fatal(err)
		}
	}
	return b, dsn
}

func TestGetChangeInATransactionLocksTheRow(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	b, _ := newLedger(t, ledger.OpenOptions{}, "chg_1")
	tx1, err := b.BeginWrite(ctx)
	if err != nil {
		t.Fatal(err)
	}
	defer tx1.Rollback()
	c, err := b.GetChange(ctx, tx1, "chg_1")
	if err != nil {
		t.Fatal(err)
	}
	type read struct {
		c   *ledger.Change
		err error
	}
	second := make(chan read, 1)
	go func() {
		tx2, err := b.BeginWrite(ctx)
		if err != nil {
			second <- read{nil, err}
			return
		}
		defer tx2.Rollback()
		c, err := b.GetChange(ctx, tx2, "chg_1")
		second <- read{c, err}
	}()
	select {
	case r := <-second:
		t.Fatalf("a second transaction read the locked row at once: %v, %v", r.c, r.err)
	case <-time.After(300 * time.Millisecond):
	}
	// A plain read outside any transaction does not wait.
	if got, err := b.GetChange(ctx, b.DB(), "chg_1"); err != nil || got.Status != ledger.Pending {
		t.Errorf("plain read of a locked row: %v, %v", got, err)
	}
	c.Status = ledger.Applying
	if err := b.UpdateChange(ctx, tx1, c, ledger.Pending); err != nil {
		t.Fatal(err)
	}
	if err := tx1.Commit(); err != nil {
		t.Fatal(err)
	}
	r := <-second
	if r.err != nil || r.c.Status != ledger.Applying {
		t.Errorf("after the first commit the second read %v, %v; want the committed applying row", r.c, r.err)
	}
}

func TestClaimsOfDifferentChangesDoNotWait(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	b, _ := newLedger(t, ledger.OpenOptions{BusyTimeout: 10 * time.Second}, "chg_1", "chg_2")
	tx1, err := b.BeginWrite(ctx)
	if err != nil {
		t.Fatal(err)
	}
	defer tx1.Rollback()
	if _, err := b.GetChange(ctx, tx1, "chg_1"); err != nil {
		t.Fatal(err)
	}
	start := time.Now()
	err = driver.NewLedger(b).WithTx(ctx, func(tx *ledger.Tx) error {
		c, err := tx.Change("chg_2")
		if err != nil {
			return err
		}
		c.Status = ledger.Applying
		return tx.UpdateChange(c, ledger.Pending)
	})
	if err != nil {
		t.Fatal(err)
	}
	if d := time.Since(start); d > 2*time.Second {
		t.Errorf("claiming chg_2 took %v while chg_1 was locked: row locks, not table locks, are expected", d)
	}
}

func TestALockHeldTooLongIsBusy(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	b, dsn := newLedger(t, ledger.OpenOptions{}, "chg_1")
	holder, err := b.BeginWrite(ctx)
	if err != nil {
		t.Fatal(err)
	}
	defer holder.Rollback()
	if _, err := b.GetChange(ctx, holder, "chg_1"); err != nil {
		t.Fatal(err)
	}
	impatient := open(t, dsn, ledger.OpenOptions{BusyTimeout: 100 * time.Millisecond})
	start := time.Now()
	err = driver.NewLedger(impatient).WithTx(ctx, func(tx *ledger.Tx) error {
		_, err := tx.Change("chg_1")
		return err
	})
	if !errors.Is(err, ledger.ErrBusy) || !strings.Contains(err.Error(), "lock_timeout") {
		t.Errorf("claim of a locked row = %v, want ErrBusy naming lock_timeout", err)
	}
	if d := time.Since(start); d > 3*time.Second {
		t.Errorf("gave up after %v with a 100ms busy timeout", d)
	}
}

// deadlock runs two transactions that lock two changes in opposite orders
// through run, and returns their errors.
func deadlock(run func(first, second string) error) []error {
	errs := make(chan error, 2)
	for _, order := range [][2]string{{"chg_a", "chg_b"}, {"chg_b", "chg_a"}} {
		go func() { errs <- run(order[0], order[1]) }()
	}
	return []error{<-errs, <-errs}
}

func TestDeadlockIsRetryNotConflict(t *testing.T) {
	// PostgreSQL aborts one of two deadlocked transactions: the backend
	// must report it as ErrRetry (wrapped with ErrBusy), never ErrConflict
	// (another process won).
	t.Parallel()
	ctx := context.Background()
	b, _ := newLedger(t, ledger.OpenOptions{BusyTimeout: 20 * time.Second}, "chg_a", "chg_b")
	var locked sync.WaitGroup
	locked.Add(2)
	got := deadlock(func(first, second string) error {
		tx, err := b.BeginWrite(ctx)
		if err != nil {
			locked.Done()
			return err
		}
		defer tx.Rollback()
		_, err = b.GetChange(ctx, tx, first)
		locked.Done()
		if err != nil {
			return err
		}
		locked.Wait()
		_, err = b.GetChange(ctx, tx, second)
		return err
	})
	failed := slices.IndexFunc(got, func(err error) bool { return err != nil })
	if failed < 0 || got[1-failed] != nil {
		t.Fatalf("results %v: want exactly one transaction aborted", got)
	}
	if err := got[failed]; !errors.Is(err, ledger.ErrRetry) || !errors.Is(err, ledger.ErrBusy) || errors.Is(err, ledger.ErrConflict) || !strings.Contains(err.Error(), "40P01") {
		t.Errorf("the aborted transaction reported %v, want ErrRetry and ErrBusy with SQLSTATE 40P01", err)
	}
}

func TestDeadlockVictimIsRetriedByWithTx(t *testing.T) {
	// Through Ledger.WithTx the aborted transaction runs again and both
	// succeed: no deadlock reaches a caller.
	t.Parallel()
	ctx := context.Background()
	b, _ := newLedger(t, ledger.OpenOptions{BusyTimeout: 20 * time.Second}, "chg_a", "chg_b")
	l := driver.NewLedger(b)
	var locked sync.WaitGroup
	locked.Add(2)
	var once [2]sync.Once
	got := deadlock(func(first, second string) error {
		i := 0
		if first == "chg_b" {
			i = 1
		}
		return l.WithTx(ctx, func(tx *ledger.Tx) error {
			if _, err := tx.Change(first); err != nil {
				return err
			}
			once[i].Do(locked.Done)
			locked.Wait()
			_, err := tx.Change(second)
			return err
		})
	})
	if got[0] != nil || got[1] != nil {
		t.Fatalf("results %v: want both to succeed after the retry", got)
	}
}

func TestCheckFindsBrokenConstraintsAndRows(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	b, dsn := newLedger(t, ledger.OpenOptions{}, "chg_1")
	db := rawDB(t, dsn)
	mustExec(t, db, `ALTER TABLE changes DROP CONSTRAINT changes_status_valid`)
	mustExec(t, db, `UPDATE changes SET status = 'bogus'`)
	mustExec(t, db, `ALTER TABLE changes DROP CONSTRAINT changes_applied_has_time`)
	mustExec(t, db, `ALTER TABLE changes ADD CONSTRAINT changes_applied_has_time CHECK (status <> 'applied' OR applied_at IS NOT NULL) NOT VALID`)
	// A connection in replica mode skips foreign keys (superusers only).
	conn, err := db.Conn(ctx)
	if err != nil {
		t.Fatal(err)
	}
	orphans := false
	if _, err := conn.ExecContext(ctx, `SET session_replication_role = replica`); err == nil {
		_, err := conn.ExecContext(ctx, `INSERT INTO changes (id, action, status, run_id, created_at, updated_at)
			VALUES ('chg_orphan', 'a', 'pending', 'run_missing', 0, 0)`)
		orphans = err == nil
	}
	conn.Close()
	problems, err := b.Check(ctx)
	if err != nil {
		t.Fatal(err)
	}
	text := strings.Join(problems, "\n")
	t.Logf("orphans inserted: %v; Check found:\n%s", orphans, text)
	for _, want := range []string{"changes_status_valid of public.changes is missing", "changes_applied_has_time of public.changes is not validated", "1 changes with an unknown status"} {
		if !strings.Contains(text, want) {
			t.Errorf("Check did not report %q:\n%s", want, text)
		}
	}
	if want := "1 changes whose run does not exist"; orphans && !strings.Contains(text, want) {
		t.Errorf("Check did not report %q:\n%s", want, text)
	}
	mustExec(t, db, `DROP TABLE meta`)
	mustExec(t, db, `INSERT INTO changeset_migrations (version, name) VALUES ($1, 'x.sql')`, postgres.SchemaVersion+1)
	problems, err = b.Check(ctx)
	text = strings.Join(problems, "\n")
	if err != nil || !strings.Contains(text, "public.meta is missing") || !strings.Contains(text, fmt.Sprintf("up to %d", postgres.SchemaVersion+1)) {
		t.Errorf("Check = %q, %v", problems, err)
	}
	if _, _, err := b.GetMeta(ctx, b.DB(), "k"); !errors.Is(err, ledger.ErrCorrupt) {
		t.Errorf("GetMeta with the meta table dropped = %v, want ErrCorrupt", err)
	}
}
