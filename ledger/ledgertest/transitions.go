package ledgertest

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"reflect"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/mcp-changeset/changeset-go/ledger"
	"github.com/mcp-changeset/changeset-go/ledger/driver"
)

func exerciseTransitions(t *testing.T, h Harness) {
	runAll(t, h, []test{
		{"WithTxCommitsWhenFnReturnsNil", testTxCommit},
		{"WithTxRollsBackWhenFnFails", testTxRollback},
		{"ReadersSeeOnlyCommittedRowsAndNeverWait", testTxReaders},
		{"FullCycleIsOneCompareAndSetPerStep", testFullCycle},
		{"ExpireStaleMovesOnlyExpiredPending", testExpireStale},
		{"ExpireStaleAndCheckReadPageByPage", testExpireStalePages},
		{"ReconcileClosesOnlyInFlightChanges", testReconcile},
		{"TerminalTransitionRedactsMarkedFields", testRedaction},
		{"TransitionsRecordTheCallersTime", testCallersTime},
		{"EveryAllowedChangeMoveIsWrittenAndNoOther", testChangeMoves},
		{"EveryAllowedRunMoveIsWrittenAndNoOther", testRunMoves},
		{"BackwardMovesAreRefused", testNamedRefusals},
		{"ReconcileRecordsAnInterruptedFailure", testFailureKinds},
		{"CheckFindsNothingWrongInAFreshLedger", testCheckFresh},
		{"SecondHandleSharesTheRows", testSecondHandle},
	})
}

func testTxCommit(t *testing.T, h Harness) {
	ctx := context.Background()
	l, _ := open(t, h)
	err := l.WithTx(ctx, func(tx *ledger.Tx) error {
		if err := tx.InsertRun(&ledger.Run{ID: "run_1", Status: ledger.RunOpen, CreatedAt: t0, UpdatedAt: t0}); err != nil {
			return err
		}
		c := pendingChange("chg_1", t0)
		c.RunID = "run_1"
		if err := tx.InsertChange(c); err != nil {
			return err
		}
		// A transaction reads its own writes.
		got, err := tx.Change("chg_1")
		if err != nil || got.RunID != "run_1" {
			t.Errorf("read own write: %v, %v", got, err)
		}
		cs, err := tx.Changes(ledger.ChangeFilter{RunID: "run_1"})
		if err != nil || len(cs) != 1 {
			t.Errorf("list own write: %d changes, %v", len(cs), err)
		}
		return err
	})
	if err != nil {
		t.Fatal(err)
	}
	mustGet(t, l, "chg_1")
	if _, err := l.Run(ctx, "run_1"); err != nil {
		t.Error(err)
	}
}

func testTxRollback(t *testing.T, h Harness) {
	ctx := context.Background()
	l, _ := open(t, h)
	c := pendingChange("chg_kept", t0)
	insertChanges(t, l, c)
	boom := errors.New("boom")
	err := l.WithTx(ctx, func(tx *ledger.Tx) error {
		got, err := tx.Change("chg_kept")
		if err != nil {
			return err
		}
		got.Status, got.UpdatedAt = ledger.Applying, sec(1)
		if err := tx.UpdateChange(got, ledger.Pending); err != nil {
			return err
		}
		if err := tx.InsertChange(pendingChange("chg_new", t0)); err != nil {
			return err
		}
		if err := tx.InsertRun(&ledger.Run{ID: "run_new", Status: ledger.RunOpen, CreatedAt: t0, UpdatedAt: t0}); err != nil {
			return err
		}
		return boom
	})
	if err != boom {
		t.Errorf("WithTx returned %v, want fn's own error", err)
	}
	if got := mustGet(t, l, "chg_kept"); got.Status != ledger.Pending {
		t.Errorf("a rolled-back update stuck: %s", got.Status)
	}
	if _, err := l.Change(ctx, "chg_new"); !errors.Is(err, ledger.ErrNotFound) {
		t.Errorf("a rolled-back insert stuck: %v", err)
	}
	if _, err := l.Run(ctx, "run_new"); !errors.Is(err, ledger.ErrNotFound) {
		t.Errorf("a rolled-back run stuck: %v", err)
	}
	// The ledger is usable afterwards.
	if err := l.WithTx(ctx, func(tx *ledger.Tx) error { return tx.InsertChange(pendingChange("chg_after", t0)) }); err != nil {
		t.Error(err)
	}
}

func testTxReaders(t *testing.T, h Harness) {
	ctx := ctxFor(t)
	l, _ := open(t, h)
	insertChanges(t, l, pendingChange("chg_1", t0))
	err := l.WithTx(ctx, func(tx *ledger.Tx) error {
		c, err := tx.Change("chg_1") // locks the row where rows have locks
		if err != nil {
			return err
		}
		c.Status, c.UpdatedAt = ledger.Applying, sec(1)
		if err := tx.UpdateChange(c, ledger.Pending); err != nil {
			return err
		}
		if err := tx.InsertChange(pendingChange("chg_2", t0)); err != nil {
			return err
		}
		// Readers outside the transaction see the committed state at
		// once; none waits for the writer.
		start := time.Now()
		got, err := l.Change(ctx, "chg_1")
		if err != nil || got.Status != ledger.Pending {
			t.Errorf("outside read of a row being written: %v, %v; want pending", got, err)
		}
		if ids := changeIDs(t, l, ledger.ChangeFilter{}); !slices.Equal(ids, []string{"chg_1"}) {
			t.Errorf("outside list during the transaction: %v, want only chg_1", ids)
		}
		if d := time.Since(start); d > 2*time.Second {
			t.Errorf("reads took %v while a write transaction was open", d)
		}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	if got := mustGet(t, l, "chg_1"); got.Status != ledger.Applying {
		t.Errorf("after commit: %s", got.Status)
	}
	if ids := changeIDs(t, l, ledger.ChangeFilter{}); len(ids) != 2 {
		t.Errorf("after commit: %v", ids)
	}
}

// step moves change id from one status to another in a transaction of its
// own, as the claim and finish code of package changeset do.
func step(ctx context.Context, l *ledger.Ledger, id string, from, to ledger.Status, edit func(*ledger.Change)) error {
	return l.WithTx(ctx, func(tx *ledger.Tx) error {
		c, err := tx.Change(id)
		if err != nil {
			return err
		}
		if c.Status != from {
			return &ledger.Error{Op: "step " + id, Err: ledger.ErrConflict}
		}
		c.Status, c.UpdatedAt = to, l.Now()
		if edit != nil {
			edit(c)
		}
		return tx.UpdateChange(c, from)
	})
}

func testFullCycle(t *testing.T, h Harness) {
	ctx := context.Background()
	l, clk := open(t, h)
	insertChanges(t, l, pendingChange("chg_1", t0))
	steps := []struct {
		from, to ledger.Status
		edit     func(*ledger.Change)
	}{
		{ledger.Pending, ledger.Applying, func(c *ledger.Change) { c.ConfirmHash, c.AppliedBy = "", "agent" }},
		{ledger.Applying, ledger.Applied, func(c *ledger.Change) {
			c.AppliedAt, c.Result, c.UndoHash, c.Undoable = clk.Now(), []byte(`{"ok":1}`), "undo-digest", true
		}},
		{ledger.Applied, ledger.Undoing, func(c *ledger.Change) { c.UndoHash, c.UndoneBy = "", "person:ann" }},
		{ledger.Undoing, ledger.Undone, func(c *ledger.Change) { c.UndoneAt = clk.Now() }},
	}
	for i, s := range steps {
		clk.Set(sec(i + 1))
		if err := step(ctx, l, "chg_1", s.from, s.to, s.edit); err != nil {
			t.Fatalf("%s → %s: %v", s.from, s.to, err)
		}
		// The same step again finds the row moved on.
		if err := driver.BackendOf(l).UpdateChange(ctx, l.DB(), mustGet(t, l, "chg_1"), s.from); !errors.Is(err, ledger.ErrConflict) {
			t.Errorf("repeating %s → %s: %v, want ErrConflict", s.from, s.to, err)
		}
	}
	got := mustGet(t, l, "chg_1")
	if got.Status != ledger.Undone || got.AppliedBy != "agent" || got.UndoneBy != "person:ann" || got.ConfirmHash != "" ||
		got.UndoHash != "" || !got.AppliedAt.Equal(sec(2)) || !got.UndoneAt.Equal(sec(4)) || !got.UpdatedAt.Equal(sec(4)) || string(got.Result) != `{"ok":1}` {
		t.Errorf("after the cycle: %#v", got)
	}
}

func testExpireStale(t *testing.T, h Harness) {
	ctx := context.Background()
	l, clk := open(t, h)
	// Expiring a minute after creation: at sec(60), sec(61) and sec(62).
	insertChanges(t, l, pendingChange("chg_a", sec(0)), pendingChange("chg_b", sec(1)), pendingChange("chg_c", sec(2)))
	applied := pendingChange("chg_applied", sec(0))
	applied.Status, applied.AppliedAt = ledger.Applied, sec(0)
	insertChanges(t, l, applied)

	clk.Set(sec(61)) // chg_b expires exactly now: expired
	stale, err := l.StaleChanges(ctx)
	if err != nil || !sameIDs(stale, "chg_a", "chg_b") {
		t.Errorf("StaleChanges = %v, %v; want chg_a chg_b", stale, err)
	}
	if got := mustGet(t, l, "chg_a"); got.Status != ledger.Pending {
		t.Errorf("StaleChanges changed a row: %s", got.Status)
	}
	moved, err := l.ExpireStale(ctx)
	if err != nil || !sameIDs(moved, "chg_a", "chg_b") {
		t.Errorf("ExpireStale = %v, %v; want chg_a chg_b", moved, err)
	}
	for id, want := range map[string]ledger.Status{"chg_a": ledger.Expired, "chg_b": ledger.Expired, "chg_c": ledger.Pending, "chg_applied": ledger.Applied} {
		got := mustGet(t, l, id)
		if got.Status != want {
			t.Errorf("%s: %s, want %s", id, got.Status, want)
		}
		if want == ledger.Expired && (got.ConfirmHash != "" || !got.UpdatedAt.Equal(sec(61))) {
			t.Errorf("%s: expired without clearing its token digest or stamping the time: %q %v", id, got.ConfirmHash, got.UpdatedAt)
		}
	}
	if moved, err := l.ExpireStale(ctx); err != nil || len(moved) != 0 {
		t.Errorf("second ExpireStale = %v, %v; want nothing", moved, err)
	}
}

func testReconcile(t *testing.T, h Harness) {
	ctx := context.Background()
	l, clk := open(t, h)
	for _, s := range ledger.Statuses {
		c := pendingChange("chg_"+string(s), t0)
		c.Status, c.UndoHash, c.AppliedAt = s, "undo-digest", t0
		insertChanges(t, l, c)
	}
	clk.Set(sec(30))
	if _, err := l.Reconcile(ctx, "chg_applying", "", "operator:ops"); err == nil {
		t.Error("reconcile without a note accepted")
	}
	if got := mustGet(t, l, "chg_applying"); got.Status != ledger.Applying {
		t.Errorf("a refused reconcile changed the row: %s", got.Status)
	}
	for from, to := range map[ledger.Status]ledger.Status{ledger.Applying: ledger.ApplyFailed, ledger.Undoing: ledger.UndoFailed} {
		id := "chg_" + string(from)
		c, err := l.Reconcile(ctx, id, "checked the remote system", "operator:ops")
		if err != nil {
			t.Fatalf("Reconcile(%s): %v", id, err)
		}
		got := mustGet(t, l, id)
		if c.Status != to || got.Status != to || !strings.Contains(got.Note, "checked the remote system") ||
			!strings.Contains(got.Note, "operator:ops") || got.ErrorType == "" || got.ConfirmHash != "" || got.UndoHash != "" || !got.UpdatedAt.Equal(sec(30)) {
			t.Errorf("Reconcile(%s) = %#v", id, got)
		}
		if _, err := l.Reconcile(ctx, id, "again", "operator:ops"); err == nil {
			t.Errorf("reconciled %s twice", id)
		}
	}
	for _, s := range ledger.Statuses {
		if s.InFlight() {
			continue
		}
		id := "chg_" + string(s)
		if _, err := l.Reconcile(ctx, id, "note", ""); err == nil || !strings.Contains(err.Error(), string(s)) {
			t.Errorf("Reconcile of a %s change: %v; want a refusal naming the status", s, err)
		}
		if got := mustGet(t, l, id); got.Status != s {
			t.Errorf("a refused reconcile moved %s to %s", id, got.Status)
		}
	}
	if _, err := l.Reconcile(ctx, "chg_none", "note", ""); !errors.Is(err, ledger.ErrNotFound) {
		t.Errorf("Reconcile of a missing change: %v", err)
	}
}

func testCheckFresh(t *testing.T, h Harness) {
	ctx := context.Background()
	l, _ := open(t, h)
	if problems, err := driver.BackendOf(l).Check(ctx); err != nil || len(problems) != 0 {
		t.Errorf("Check of an empty ledger = %q, %v", problems, err)
	}
	insertRuns(t, l, "run_1")
	c := fullChange("chg_1", t0)
	c.RunID = "run_1"
	insertChanges(t, l, c, pendingChange("chg_2", t0))
	if problems, err := driver.BackendOf(l).Check(ctx); err != nil || len(problems) != 0 {
		t.Errorf("Check = %q, %v", problems, err)
	}
	if loc := l.Location(); loc == "" {
		t.Error("Location is empty")
	}
}

func testSecondHandle(t *testing.T, h Harness) {
	if h.OpenSecond == nil {
		t.Skip("the harness cannot open a second handle")
	}
	ctx := context.Background()
	l, _ := open(t, h)
	insertChanges(t, l, pendingChange("chg_1", t0))
	l2 := second(t, h, l)
	if got, err := l2.Change(ctx, "chg_1"); err != nil || got.Status != ledger.Pending {
		t.Fatalf("second handle: %v, %v", got, err)
	}
	if err := step(ctx, l2, "chg_1", ledger.Pending, ledger.Applying, nil); err != nil {
		t.Fatal(err)
	}
	if got := mustGet(t, l, "chg_1"); got.Status != ledger.Applying {
		t.Errorf("first handle after the second's commit: %s", got.Status)
	}
	if problems, err := driver.BackendOf(l2).Check(ctx); err != nil || len(problems) != 0 {
		t.Errorf("Check through the second handle = %q, %v", problems, err)
	}
}

// sameIDs reports whether got holds exactly want, in any order.
func sameIDs(got []string, want ...string) bool {
	g := slices.Clone(got)
	slices.Sort(g)
	slices.Sort(want)
	return slices.Equal(g, want)
}

func testRedaction(t *testing.T, h Harness) {
	ctx := context.Background()
	l, clk := open(t, h)
	c := pendingChange("chg_1", t0)
	c.Payload = json.RawMessage(`{"key":"password","value":"hunter2"}`)
	c.Diff = json.RawMessage(`[{"after":"hunter2","before":"swordfish","field":"value"}]`)
	c.RedactFields = []string{"value"}
	insertChanges(t, l, c)
	clk.Set(sec(1))
	if err := step(ctx, l, "chg_1", ledger.Pending, ledger.Applying, nil); err != nil {
		t.Fatal(err)
	}
	if got := mustGet(t, l, "chg_1"); string(got.Payload) != string(c.Payload) || !got.RedactedAt.IsZero() {
		t.Fatalf("redacted before the change was terminal: %s", got.Payload)
	}
	clk.Set(sec(2))
	if err := step(ctx, l, "chg_1", ledger.Applying, ledger.ApplyFailed, nil); err != nil {
		t.Fatal(err)
	}
	got := mustGet(t, l, "chg_1")
	if strings.Contains(string(got.Payload)+string(got.Diff), "hunter2") || strings.Contains(string(got.Diff), "swordfish") ||
		!strings.Contains(string(got.Payload), `"key":"password"`) || !strings.Contains(string(got.Payload), ledger.RedactedPrefix) ||
		!got.RedactedAt.Equal(sec(2)) {
		t.Errorf("after the terminal transition: payload %s diff %s redacted at %v", got.Payload, got.Diff, got.RedactedAt)
	}
}

// testCallersTime makes transitions whose rows carry times of their own,
// far from the ledger's clock, as a caller with a clock of its own does (a
// Guard on a ledger it was given): the history and the redaction record
// the rows' times, never the ledger's clock.
func testCallersTime(t *testing.T, h Harness) {
	ctx := context.Background()
	l, _ := open(t, h) // the ledger's clock reads t0
	created, applying, failed := sec(1000), sec(2000), sec(3000)
	c := pendingChange("chg_1", created)
	c.Payload = json.RawMessage(`{"value":"hunter2"}`)
	c.RedactFields = []string{"value"}
	if err := l.WithTx(ctx, func(tx *ledger.Tx) error { return tx.InsertChange(c) }); err != nil {
		t.Fatal(err)
	}
	at := func(ts time.Time) func(*ledger.Change) {
		return func(c *ledger.Change) { c.UpdatedAt = ts }
	}
	if err := step(ctx, l, "chg_1", ledger.Pending, ledger.Applying, at(applying)); err != nil {
		t.Fatal(err)
	}
	if err := step(ctx, l, "chg_1", ledger.Applying, ledger.ApplyFailed, at(failed)); err != nil {
		t.Fatal(err)
	}
	hist, err := l.History(ctx, ledger.HistoryFilter{ChangeID: "chg_1"})
	if err != nil {
		t.Fatal(err)
	}
	var got []time.Time
	for _, e := range hist {
		got = append(got, e.At)
	}
	if want := []time.Time{created, applying, failed}; !slices.EqualFunc(got, want, time.Time.Equal) {
		t.Errorf("history at %v, want the rows' times %v", got, want)
	}
	if r := mustGet(t, l, "chg_1").RedactedAt; !r.Equal(failed) {
		t.Errorf("redacted at %v, want %v: the time of the transition that made it terminal", r, failed)
	}
	if !l.Now().Equal(t0) {
		t.Errorf("the ledger's clock reads %v, want %v", l.Now(), t0)
	}
}

// testExpireStalePages expires more pending changes than ExpireStale reads
// at a time (500), some of each page still valid, so that the changes it
// moves leave the filter while it pages.
func testExpireStalePages(t *testing.T, h Harness) {
	ctx := context.Background()
	l, clk := open(t, h)
	const n = 1101
	err := l.WithTx(ctx, func(tx *ledger.Tx) error {
		for i := range n {
			c := pendingChange(fmt.Sprintf("chg_%04d", i), t0.Add(time.Duration(i)*time.Millisecond))
			if i%10 == 0 {
				c.ExpiresAt = t0.Add(time.Hour) // still valid at the check
			}
			if err := tx.InsertChange(c); err != nil {
				return err
			}
		}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	clk.Set(t0.Add(30 * time.Minute))
	stale, err := l.StaleChanges(ctx)
	if err != nil || len(stale) != n-111 {
		t.Fatalf("StaleChanges = %d, %v; want %d", len(stale), err, n-111)
	}
	moved, err := l.ExpireStale(ctx)
	if err != nil || !reflect.DeepEqual(moved, stale) {
		t.Fatalf("ExpireStale moved %d (%v), want the %d StaleChanges listed", len(moved), err, len(stale))
	}
	if got := changeIDs(t, l, ledger.ChangeFilter{Statuses: []ledger.Status{ledger.Pending}}); len(got) != 111 {
		t.Errorf("%d changes still pending, want 111", len(got))
	}
	if again, err := l.ExpireStale(ctx); err != nil || len(again) != 0 {
		t.Errorf("a second ExpireStale moved %d (%v)", len(again), err)
	}

	// Check reads the rows and the history (over 2,000 entries) a page at
	// a time too: a row moved behind the ledger's back on the first page
	// and on the last is found.
	if problems, err := l.Check(ctx); err != nil || len(problems) != 0 {
		t.Fatalf("Check = %q, %v", problems, err)
	}
	if _, err := l.DB().ExecContext(ctx, `UPDATE changes SET status = 'undone' WHERE id IN ('chg_0001', 'chg_1099')`); err != nil {
		t.Fatal(err)
	}
	problems, err := l.Check(ctx)
	if err != nil {
		t.Fatal(err)
	}
	for _, id := range []string{"chg_0001", "chg_1099"} {
		want := "change " + id + ": undone, but its history ends at expired"
		if !slices.ContainsFunc(problems, func(p string) bool { return strings.HasPrefix(p, want) }) {
			t.Errorf("Check does not report %s: %q", id, problems)
		}
	}
}
