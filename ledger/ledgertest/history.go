package ledgertest

import (
	"context"
	"errors"
	"fmt"
	"reflect"
	"testing"
	"time"

	"github.com/mcp-changeset/changeset-go/ledger"
	"github.com/mcp-changeset/changeset-go/ledger/driver"
)

func exerciseHistory(t *testing.T, h Harness) {
	runAll(t, h, []test{
		{"ChangeLifeInOrder", testHistoryChangeLife},
		{"RunLifeInOrder", testHistoryRunLife},
		{"RollbackLeavesNeither", testHistoryRollback},
		{"FailedAppendUndoesTheTransition", testHistoryAppendFails},
		{"ExpiryAndReconcile", testHistoryExpiryReconcile},
		{"Filters", testHistoryFilters},
		{"PruneDeletesTheRowsOfWhatItDeletes", testHistoryPrune},
		{"SeqIsNeverReused", testHistorySeqNeverReused},
		{"FailureKind", testHistoryFailureKind}, // failurekind.go
	})
}

// entry is what a test expects of a history entry (everything but Seq).
type entry struct {
	at                           time.Time
	change, run, from, to, by, n string
}

// history reads the entries f selects and fails the test unless they are
// want, in that order, with Seq strictly increasing.
func history(t *testing.T, l *ledger.Ledger, f ledger.HistoryFilter, want ...entry) []ledger.HistoryEntry {
	t.Helper()
	got, err := l.History(context.Background(), f)
	if err != nil {
		t.Fatalf("History(%+v): %v", f, err)
	}
	var g []entry
	for i, e := range got {
		if i > 0 && e.Seq <= got[i-1].Seq {
			t.Errorf("History(%+v): seq %d after %d", f, e.Seq, got[i-1].Seq)
		}
		g = append(g, entry{e.At, e.ChangeID, e.RunID, e.From, e.To, e.By, e.Note})
	}
	if !reflect.DeepEqual(g, want) {
		t.Errorf("History(%+v):\n got %+v\nwant %+v", f, g, want)
	}
	return got
}

func testHistoryChangeLife(t *testing.T, h Harness) {
	ctx := context.Background()
	l, clk := open(t, h)
	insertRuns(t, l, "run_1")
	c := pendingChange("chg_1", t0)
	c.RunID, c.PreviewedBy = "run_1", "agent:alice"
	if err := l.WithTx(ctx, func(tx *ledger.Tx) error { return tx.InsertChange(c) }); err != nil {
		t.Fatal(err)
	}
	moves := []struct {
		from, to ledger.Status
		edit     func(*ledger.Change)
	}{
		{ledger.Pending, ledger.Applying, func(c *ledger.Change) { c.AppliedBy = "agent:bob" }},
		{ledger.Applying, ledger.Applied, func(c *ledger.Change) { c.AppliedAt = c.UpdatedAt }},
		{ledger.Applied, ledger.Undoing, func(c *ledger.Change) { c.UndoneBy = "person:carol" }},
		{ledger.Undoing, ledger.Undone, nil},
	}
	for i, m := range moves {
		clk.Set(sec(i + 1))
		if err := step(ctx, l, "chg_1", m.from, m.to, m.edit); err != nil {
			t.Fatal(err)
		}
	}
	// A finished row rewritten in its status (annotated) appends nothing.
	clk.Set(sec(9))
	if err := step(ctx, l, "chg_1", ledger.Undone, ledger.Undone, func(c *ledger.Change) { c.Note = "seen" }); err != nil {
		t.Fatal(err)
	}
	history(t, l, ledger.HistoryFilter{ChangeID: "chg_1"},
		entry{t0, "chg_1", "run_1", "", "pending", "agent:alice", ""},
		entry{sec(1), "chg_1", "run_1", "pending", "applying", "agent:bob", ""},
		entry{sec(2), "chg_1", "run_1", "applying", "applied", "agent:bob", ""},
		entry{sec(3), "chg_1", "run_1", "applied", "undoing", "person:carol", ""},
		entry{sec(4), "chg_1", "run_1", "undoing", "undone", "person:carol", ""},
	)
	// A failure says its kind.
	insertChanges(t, l, pendingChange("chg_2", t0))
	clk.Set(sec(5))
	if err := step(ctx, l, "chg_2", ledger.Pending, ledger.ApplyFailed, func(c *ledger.Change) {
		c.AppliedBy, c.Failure, c.NothingWritten = "agent:bob", ledger.FailureStateChanged, true
	}); err != nil {
		t.Fatal(err)
	}
	history(t, l, ledger.HistoryFilter{ChangeID: "chg_2"},
		entry{sec(5), "chg_2", "", "pending", "apply_failed", "agent:bob", "state_changed"})
}

func testHistoryRunLife(t *testing.T, h Harness) {
	ctx := context.Background()
	l, clk := open(t, h)
	r := &ledger.Run{ID: "run_1", Status: ledger.RunOpen, CreatedAt: t0, UpdatedAt: t0}
	if err := l.WithTx(ctx, func(tx *ledger.Tx) error { return tx.InsertRun(r) }); err != nil {
		t.Fatal(err)
	}
	moves := []struct {
		from, to ledger.RunStatus
		by       string
	}{
		{ledger.RunOpen, ledger.RunOpen, ""}, // a dry run's token: nothing appended
		{ledger.RunOpen, ledger.RunUndoing, "person:ann"},
		{ledger.RunUndoing, ledger.RunOpen, ""},
		{ledger.RunOpen, ledger.RunUndoing, "agent:bob"},
		{ledger.RunUndoing, ledger.RunUndone, "agent:bob"},
	}
	for i, m := range moves {
		clk.Set(sec(i + 1))
		err := l.WithTx(ctx, func(tx *ledger.Tx) error {
			r, err := tx.Run("run_1")
			if err != nil {
				return err
			}
			r.Status, r.UpdatedAt, r.UndoneBy = m.to, l.Now(), m.by
			return tx.UpdateRun(r, m.from)
		})
		if err != nil {
			t.Fatal(err)
		}
	}
	history(t, l, ledger.HistoryFilter{RunID: "run_1"},
		entry{t0, "", "run_1", "", "open", "", ""},
		entry{sec(2), "", "run_1", "open", "undoing", "person:ann", ""},
		entry{sec(3), "", "run_1", "undoing", "open", "", ""},
		entry{sec(4), "", "run_1", "open", "undoing", "agent:bob", ""},
		entry{sec(5), "", "run_1", "undoing", "undone", "agent:bob", ""},
	)
}

func testHistoryRollback(t *testing.T, h Harness) {
	ctx := context.Background()
	l, _ := open(t, h)
	insertChanges(t, l, pendingChange("chg_1", t0))
	boom := errors.New("boom")
	err := l.WithTx(ctx, func(tx *ledger.Tx) error {
		if err := tx.InsertChange(pendingChange("chg_2", t0)); err != nil {
			return err
		}
		if err := tx.InsertRun(&ledger.Run{ID: "run_1", Status: ledger.RunOpen, CreatedAt: t0, UpdatedAt: t0}); err != nil {
			return err
		}
		c, err := tx.Change("chg_1")
		if err != nil {
			return err
		}
		c.Status, c.AppliedBy = ledger.Applying, "agent:bob"
		if err := tx.UpdateChange(c, ledger.Pending); err != nil {
			return err
		}
		// The entries are numbered, chained and written by the commit.
		if got, err := driver.BackendOf(l).ListHistory(ctx, tx.SQL(), ledger.HistoryFilter{}); err != nil || len(got) != 0 {
			return fmt.Errorf("inside the transaction, the history holds %d entries (%v), want none before the commit", len(got), err)
		}
		return boom
	})
	if !errors.Is(err, boom) {
		t.Fatal(err)
	}
	if got := mustGet(t, l, "chg_1"); got.Status != ledger.Pending {
		t.Errorf("after the rollback chg_1 is %s", got.Status)
	}
	history(t, l, ledger.HistoryFilter{})
}

// failingHistory is the backend under test, except that appending to the
// history fails: the transition it belongs to must not survive.
type failingHistory struct{ driver.Backend }

var errAppend = errors.New("append refused")

func (failingHistory) AppendHistory(context.Context, driver.Querier, ledger.HistoryEntry) error {
	return errAppend
}

func testHistoryAppendFails(t *testing.T, h Harness) {
	ctx := context.Background()
	l, _ := open(t, h)
	insertChanges(t, l, pendingChange("chg_1", t0))
	insertRuns(t, l, "run_1")
	bad := driver.NewLedger(failingHistory{driver.BackendOf(l)})
	if err := step(ctx, bad, "chg_1", ledger.Pending, ledger.Applying, nil); !errors.Is(err, errAppend) {
		t.Errorf("a transition whose history append failed: %v, want the append's error", err)
	}
	if got := mustGet(t, l, "chg_1"); got.Status != ledger.Pending {
		t.Errorf("the transition survived its failed history append: %s", got.Status)
	}
	err := bad.WithTx(ctx, func(tx *ledger.Tx) error { return tx.InsertChange(pendingChange("chg_2", t0)) })
	if !errors.Is(err, errAppend) {
		t.Errorf("an insert whose history append failed: %v", err)
	}
	if _, err := l.Change(ctx, "chg_2"); !errors.Is(err, ledger.ErrNotFound) {
		t.Errorf("the insert survived its failed history append: %v", err)
	}
	err = bad.WithTx(ctx, func(tx *ledger.Tx) error {
		r, err := tx.Run("run_1")
		if err != nil {
			return err
		}
		r.Status = ledger.RunUndoing
		return tx.UpdateRun(r, ledger.RunOpen)
	})
	if !errors.Is(err, errAppend) {
		t.Errorf("a run's transition whose history append failed: %v", err)
	}
	if r, err := l.Run(ctx, "run_1"); err != nil || r.Status != ledger.RunOpen {
		t.Errorf("the run's transition survived its failed history append: %v %v", r, err)
	}
}

func testHistoryExpiryReconcile(t *testing.T, h Harness) {
	ctx := context.Background()
	l, clk := open(t, h)
	c := pendingChange("chg_old", t0)
	c.PreviewedBy = "agent:alice"
	if err := l.WithTx(ctx, func(tx *ledger.Tx) error { return tx.InsertChange(c) }); err != nil {
		t.Fatal(err)
	}
	insertChanges(t, l, pendingChange("chg_busy", t0))
	if err := step(ctx, l, "chg_busy", ledger.Pending, ledger.Applying, func(c *ledger.Change) { c.AppliedBy = "agent:bob" }); err != nil {
		t.Fatal(err)
	}
	clk.Set(sec(120))
	if _, err := l.ExpireStale(ctx); err != nil {
		t.Fatal(err)
	}
	clk.Set(sec(121))
	if _, err := l.Reconcile(ctx, "chg_busy", "file checked: not written", "operator:dan"); err != nil {
		t.Fatal(err)
	}
	history(t, l, ledger.HistoryFilter{ChangeID: "chg_old"},
		entry{t0, "chg_old", "", "", "pending", "agent:alice", ""},
		entry{sec(120), "chg_old", "", "pending", "expired", "", ""})
	history(t, l, ledger.HistoryFilter{ChangeID: "chg_busy"},
		entry{t0, "chg_busy", "", "pending", "applying", "agent:bob", ""},
		entry{sec(121), "chg_busy", "", "applying", "apply_failed", "operator:dan", "reconciled: file checked: not written"})

	insertRuns(t, l, "run_1")
	err := l.WithTx(ctx, func(tx *ledger.Tx) error {
		r, err := tx.Run("run_1")
		if err != nil {
			return err
		}
		r.Status, r.UndoneBy, r.UpdatedAt = ledger.RunUndoing, "agent:bob", l.Now()
		return tx.UpdateRun(r, ledger.RunOpen)
	})
	if err != nil {
		t.Fatal(err)
	}
	clk.Set(sec(122))
	if _, err := l.ReconcileRun(ctx, "run_1", "undone by hand", "operator:dan"); err != nil {
		t.Fatal(err)
	}
	history(t, l, ledger.HistoryFilter{RunID: "run_1"},
		entry{sec(121), "", "run_1", "open", "undoing", "agent:bob", ""},
		entry{sec(122), "", "run_1", "undoing", "partially_undone", "operator:dan", "reconciled: undone by hand"})
}

func testHistoryFilters(t *testing.T, h Harness) {
	ctx := context.Background()
	l, clk := open(t, h)
	if err := l.WithTx(ctx, func(tx *ledger.Tx) error {
		return tx.InsertRun(&ledger.Run{ID: "run_1", Status: ledger.RunOpen, CreatedAt: t0, UpdatedAt: t0})
	}); err != nil {
		t.Fatal(err)
	}
	for i, by := range []string{"agent:alice", "agent:bob", "agent:alice"} {
		c := pendingChange(fmt.Sprintf("chg_%d", i), sec(i*10))
		c.PreviewedBy = by
		if i < 2 {
			c.RunID = "run_1"
		}
		if err := l.WithTx(ctx, func(tx *ledger.Tx) error { return tx.InsertChange(c) }); err != nil {
			t.Fatal(err)
		}
	}
	clk.Set(sec(25))
	if err := step(ctx, l, "chg_0", ledger.Pending, ledger.Applying, func(c *ledger.Change) { c.AppliedBy = "agent:bob" }); err != nil {
		t.Fatal(err)
	}
	all := history(t, l, ledger.HistoryFilter{},
		entry{t0, "", "run_1", "", "open", "", ""},
		entry{t0, "chg_0", "run_1", "", "pending", "agent:alice", ""},
		entry{sec(10), "chg_1", "run_1", "", "pending", "agent:bob", ""},
		entry{sec(20), "chg_2", "", "", "pending", "agent:alice", ""},
		entry{sec(25), "chg_0", "run_1", "pending", "applying", "agent:bob", ""},
	)
	history(t, l, ledger.HistoryFilter{RunID: "run_1", By: "agent:bob"},
		entry{sec(10), "chg_1", "run_1", "", "pending", "agent:bob", ""},
		entry{sec(25), "chg_0", "run_1", "pending", "applying", "agent:bob", ""})
	// Since is inclusive, to the microsecond: an instant with nanoseconds
	// after an entry's excludes it.
	history(t, l, ledger.HistoryFilter{Since: sec(20)},
		entry{sec(20), "chg_2", "", "", "pending", "agent:alice", ""},
		entry{sec(25), "chg_0", "run_1", "pending", "applying", "agent:bob", ""})
	history(t, l, ledger.HistoryFilter{Since: sec(20).Add(time.Nanosecond)},
		entry{sec(25), "chg_0", "run_1", "pending", "applying", "agent:bob", ""})
	history(t, l, ledger.HistoryFilter{ChangeID: "chg_0", Since: sec(1)},
		entry{sec(25), "chg_0", "run_1", "pending", "applying", "agent:bob", ""})
	history(t, l, ledger.HistoryFilter{By: "agent:alice", Limit: 1},
		entry{t0, "chg_0", "run_1", "", "pending", "agent:alice", ""})
	history(t, l, ledger.HistoryFilter{By: "agent:alice", After: all[1].Seq},
		entry{sec(20), "chg_2", "", "", "pending", "agent:alice", ""})
	history(t, l, ledger.HistoryFilter{By: "agent:nobody"})
	history(t, l, ledger.HistoryFilter{ChangeID: "chg_none"})

	// ChangeFilter.By: previewed, applied or undone by.
	for by, want := range map[string][]string{
		"agent:alice": {"chg_2", "chg_0"}, "agent:bob": {"chg_1", "chg_0"}, "agent:al": {},
	} {
		if got := changeIDs(t, l, ledger.ChangeFilter{By: by}); !reflect.DeepEqual(got, want) {
			t.Errorf("Changes(By: %s) = %v, want %v", by, got, want)
		}
	}
	if got := changeIDs(t, l, ledger.ChangeFilter{By: "agent:bob", Statuses: []ledger.Status{ledger.Pending}}); !reflect.DeepEqual(got, []string{"chg_1"}) {
		t.Errorf("Changes(By and Statuses) = %v", got)
	}
	if n, err := driver.BackendOf(l).CountChanges(ctx, l.DB(), ledger.ChangeFilter{By: "agent:alice"}); err != nil || n != 2 {
		t.Errorf("CountChanges(By) = %d, %v", n, err)
	}

	// A clock that stepped back: a later entry carries an earlier time.
	// Since selects by time whatever the order, and lists in seq order.
	clk.Set(sec(15))
	if err := step(ctx, l, "chg_1", ledger.Pending, ledger.Applying, func(c *ledger.Change) { c.AppliedBy = "agent:bob" }); err != nil {
		t.Fatal(err)
	}
	history(t, l, ledger.HistoryFilter{Since: sec(20)},
		entry{sec(20), "chg_2", "", "", "pending", "agent:alice", ""},
		entry{sec(25), "chg_0", "run_1", "pending", "applying", "agent:bob", ""})
	history(t, l, ledger.HistoryFilter{Since: sec(12)},
		entry{sec(20), "chg_2", "", "", "pending", "agent:alice", ""},
		entry{sec(25), "chg_0", "run_1", "pending", "applying", "agent:bob", ""},
		entry{sec(15), "chg_1", "run_1", "pending", "applying", "agent:bob", ""})
	history(t, l, ledger.HistoryFilter{Since: sec(12), By: "agent:bob", Limit: 1},
		entry{sec(25), "chg_0", "run_1", "pending", "applying", "agent:bob", ""})
}

func testHistoryPrune(t *testing.T, h Harness) {
	ctx := context.Background()
	l, clk := open(t, h)
	for _, id := range []string{"chg_gone", "chg_kept"} {
		if err := l.WithTx(ctx, func(tx *ledger.Tx) error { return tx.InsertChange(pendingChange(id, t0)) }); err != nil {
			t.Fatal(err)
		}
	}
	clk.Set(sec(120))
	if _, err := l.ExpireStale(ctx); err != nil {
		t.Fatal(err)
	}
	// chg_kept is annotated later, so it is not old enough to prune.
	clk.Set(sec(10 * 86400))
	if err := step(ctx, l, "chg_kept", ledger.Expired, ledger.Expired, nil); err != nil {
		t.Fatal(err)
	}
	if dry, err := l.Prune(ctx, ledger.PruneOptions{OlderThan: 86400 * time.Second, DryRun: true, By: "operator:dan"}); err != nil || !sameIDs(dry.Changes, "chg_gone") {
		t.Fatalf("dry Prune = %v, %v", dry, err)
	}
	before, err := l.History(ctx, ledger.HistoryFilter{})
	if err != nil || len(before) != 4 { // a dry run appends nothing
		t.Fatalf("History before the prune = %+v, %v; want the 4 transitions", before, err)
	}
	res, err := l.Prune(ctx, ledger.PruneOptions{OlderThan: 86400 * time.Second, By: "operator:dan"})
	if err != nil || !sameIDs(res.Changes, "chg_gone") {
		t.Fatalf("Prune = %v, %v", res, err)
	}
	// The prune's own entry: about the ledger, by the operator, at the
	// time of the prune.
	after := history(t, l, ledger.HistoryFilter{},
		entry{t0, "chg_kept", "", "", "pending", "", ""},
		entry{sec(120), "chg_kept", "", "pending", "expired", "", ""},
		entry{sec(10 * 86400), "", "", "", ledger.HistoryPruned, "operator:dan", "pruned 1 changes"})
	if after[2].Seq <= before[len(before)-1].Seq {
		t.Errorf("the prune's entry has seq %d, not above the last entry before it (%d)", after[2].Seq, before[len(before)-1].Seq)
	}
	if problems, err := l.Check(ctx); err != nil || len(problems) != 0 {
		t.Errorf("Check after a prune = %q, %v", problems, err)
	}
}

// testHistorySeqNeverReused prunes every row, the newest entries with
// them, and checks that the next entry is numbered above every entry
// there ever was: a reader paging by seq (log --after) must never see a
// number twice.
func testHistorySeqNeverReused(t *testing.T, h Harness) {
	ctx := context.Background()
	l, clk := open(t, h)
	insert := func(id string) {
		t.Helper()
		if err := l.WithTx(ctx, func(tx *ledger.Tx) error { return tx.InsertChange(pendingChange(id, l.Now())) }); err != nil {
			t.Fatal(err)
		}
	}
	insertRuns(t, l, "run_1")
	insert("chg_1")
	insert("chg_2")
	clk.Set(sec(120))
	if _, err := l.ExpireStale(ctx); err != nil {
		t.Fatal(err)
	}
	all, err := l.History(ctx, ledger.HistoryFilter{})
	if err != nil || len(all) == 0 {
		t.Fatalf("History = %v, %v", all, err)
	}
	highest := all[len(all)-1].Seq
	clk.Set(sec(3 * 86400))
	res, err := l.Prune(ctx, ledger.PruneOptions{OlderThan: 86400 * time.Second, By: "operator:dan"})
	if err != nil || len(res.Changes) != 2 || len(res.Runs) != 1 {
		t.Fatalf("Prune = %+v, %v", res, err)
	}
	left, err := l.History(ctx, ledger.HistoryFilter{})
	if err != nil {
		t.Fatal(err)
	}
	for _, e := range left {
		if e.ChangeID != "" || e.RunID != "" || e.To != ledger.HistoryPruned || e.By != "operator:dan" {
			t.Errorf("after pruning everything the history holds %+v", e)
		}
		if e.Seq <= highest {
			t.Errorf("a prune entry has seq %d, not above %d", e.Seq, highest)
		}
		highest = max(highest, e.Seq)
	}
	if len(left) != 2 {
		t.Errorf("%d prune entries, want 2 (one per transaction: changes, runs)", len(left))
	}
	insert("chg_3")
	next, err := l.History(ctx, ledger.HistoryFilter{ChangeID: "chg_3"})
	if err != nil || len(next) != 1 || next[0].Seq <= highest {
		t.Fatalf("the entry after the prune = %+v, %v; want a seq above %d", next, err, highest)
	}
}
