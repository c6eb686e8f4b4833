package ledgertest

import (
	"context"
	"fmt"
	"reflect"
	"slices"
	"testing"
	"time"

	"github.com/mcp-changeset/changeset-go/ledger"
	"github.com/mcp-changeset/changeset-go/ledger/driver"
)

func exercisePrune(t *testing.T, h Harness) {
	runAll(t, h, []test{
		{"NeverPendingOrInFlight", testPruneNeverLive},
		{"OlderThanIsStrictlyBefore", testPruneOlderThan},
		{"KeepSparesTheNewest", testPruneKeep},
		{"IncludeAppliedOnlyWhenNoLongerUndoable", testPruneApplied},
		{"RunsOnlyWhenLeftWithoutChanges", testPruneRuns},
		{"DryRunDeletesNothing", testPruneDryRun},
		{"DeletesInBatchesAndReportsProgress", testPruneBatches},
		{"ReadsTheLedgerPageByPage", testPrunePages},
		{"AgeIsTheTimeOfTheLastUpdate", testPruneLastUpdate},
		{"KeepCountsOnlyWhatMayGo", testPruneKeepEligible},
		{"KeepBreaksTiesOnCreationTimeByID", testPruneKeepTies},
		{"ARowThatMovesOnMeanwhileIsKept", testPruneMovedOn},
		{"RunsGoInBatchesToo", testPruneRunBatches},
		{"ReportsTheSpaceAndVacuumKeepsEveryRow", testPruneSpace},
	})
}

const day = 24 * time.Hour

// addAged stores a change in status s, created and last updated at
// updated.
func addAged(t *testing.T, l *ledger.Ledger, id string, s ledger.Status, updated time.Time) *ledger.Change {
	t.Helper()
	c := pendingChange(id, updated)
	c.Status = s
	if s == ledger.Applied {
		c.AppliedAt = updated
	}
	insertChanges(t, l, c)
	return c
}

// insertExpired stores n expired changes, chg_<i in format>, the i-th
// created and updated i seconds after t0, in one transaction; runOf, if
// set, names the run of each.
func insertExpired(t *testing.T, l *ledger.Ledger, n int, format string, runOf func(i int) string) {
	t.Helper()
	err := l.WithTx(context.Background(), func(tx *ledger.Tx) error {
		for i := range n {
			c := pendingChange(fmt.Sprintf("chg_"+format, i), t0.Add(time.Duration(i)*time.Second))
			c.Status = ledger.Expired
			if runOf != nil {
				c.RunID = runOf(i)
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
}

// left lists the IDs of every change still stored, sorted.
func left(t *testing.T, l *ledger.Ledger) []string {
	t.Helper()
	ids := changeIDs(t, l, ledger.ChangeFilter{})
	slices.Sort(ids)
	return ids
}

func testPruneNeverLive(t *testing.T, h Harness) {
	ctx := context.Background()
	l, clk := open(t, h)
	for _, s := range ledger.Statuses {
		addAged(t, l, "chg_"+string(s), s, t0) // applied: not undoable
	}
	clk.Set(t0.Add(1000 * day))
	res, err := l.Prune(ctx, ledger.PruneOptions{IncludeApplied: true})
	if err != nil {
		t.Fatal(err)
	}
	if want := []string{"chg_apply_failed", "chg_applied", "chg_declined", "chg_expired", "chg_undo_failed", "chg_undone"}; !sameIDs(res.Changes, want...) {
		t.Errorf("pruned %v, want %v", res.Changes, want)
	}
	if got, want := left(t, l), []string{"chg_applying", "chg_pending", "chg_undoing"}; !slices.Equal(got, want) {
		t.Errorf("left %v, want %v", got, want)
	}
}

func testPruneOlderThan(t *testing.T, h Harness) {
	ctx := context.Background()
	l, clk := open(t, h)
	now := t0.Add(100 * day)
	cutoff := now.Add(-10 * day)
	addAged(t, l, "chg_before", ledger.Expired, cutoff.Add(-time.Microsecond))
	addAged(t, l, "chg_at", ledger.Expired, cutoff)
	addAged(t, l, "chg_after", ledger.Undone, cutoff.Add(time.Microsecond))
	clk.Set(now)
	res, err := l.Prune(ctx, ledger.PruneOptions{OlderThan: 10 * day})
	if err != nil || !sameIDs(res.Changes, "chg_before") {
		t.Errorf("Prune(older than 10 days) = %v, %v; want only the change updated before the cut-off", res.Changes, err)
	}
	if got := left(t, l); !slices.Equal(got, []string{"chg_after", "chg_at"}) {
		t.Errorf("left %v", got)
	}
}

func testPruneKeep(t *testing.T, h Harness) {
	ctx := context.Background()
	l, clk := open(t, h)
	for i := range 5 {
		addAged(t, l, fmt.Sprintf("chg_%d", i), ledger.Undone, t0.Add(time.Duration(i)*day))
	}
	addAged(t, l, "chg_pending", ledger.Pending, t0.Add(10*day)) // not eligible: does not count
	clk.Set(t0.Add(100 * day))
	res, err := l.Prune(ctx, ledger.PruneOptions{Keep: 2})
	if err != nil || !sameIDs(res.Changes, "chg_0", "chg_1", "chg_2") {
		t.Errorf("Prune(keep 2) = %v, %v; want the three oldest", res.Changes, err)
	}
	if got := left(t, l); !slices.Equal(got, []string{"chg_3", "chg_4", "chg_pending"}) {
		t.Errorf("left %v", got)
	}
	// Keep and age together: the newest are kept, then the age decides.
	res, err = l.Prune(ctx, ledger.PruneOptions{Keep: 1, OlderThan: 97 * day})
	if err != nil || len(res.Changes) != 0 {
		t.Errorf("Prune(keep 1, older than 97 days) = %v, %v; want nothing (chg_3 is too young)", res.Changes, err)
	}
	res, err = l.Prune(ctx, ledger.PruneOptions{Keep: 1, OlderThan: 96 * day})
	if err != nil || !sameIDs(res.Changes, "chg_3") {
		t.Errorf("Prune(keep 1, older than 96 days) = %v, %v; want chg_3", res.Changes, err)
	}
}

func testPruneApplied(t *testing.T, h Harness) {
	ctx := context.Background()
	l, clk := open(t, h)
	now := t0.Add(100 * day)
	noUndo := addAged(t, l, "chg_no_undo", ledger.Applied, t0)
	closed := addAged(t, l, "chg_window_closed", ledger.Applied, t0)
	stillOpen := addAged(t, l, "chg_window_open", ledger.Applied, t0)
	forever := addAged(t, l, "chg_never_expires", ledger.Applied, t0)
	closing := addAged(t, l, "chg_closes_now", ledger.Applied, t0)
	noUndo.Undoable = false
	closed.Undoable, closed.UndoExpiresAt = true, now.Add(-time.Second)
	stillOpen.Undoable, stillOpen.UndoExpiresAt = true, now.Add(time.Second)
	forever.Undoable, forever.UndoExpiresAt = true, time.Time{}
	closing.Undoable, closing.UndoExpiresAt = true, now // closed at now: no longer undoable
	for _, c := range []*ledger.Change{noUndo, closed, stillOpen, forever, closing} {
		if err := driver.BackendOf(l).UpdateChange(ctx, l.DB(), c, ledger.Applied); err != nil {
			t.Fatal(err)
		}
	}
	clk.Set(now)
	res, err := l.Prune(ctx, ledger.PruneOptions{})
	if err != nil || len(res.Changes) != 0 {
		t.Errorf("Prune without IncludeApplied = %v, %v; want nothing", res.Changes, err)
	}
	res, err = l.Prune(ctx, ledger.PruneOptions{IncludeApplied: true})
	if err != nil || !sameIDs(res.Changes, "chg_no_undo", "chg_window_closed", "chg_closes_now") {
		t.Errorf("Prune(include applied) = %v, %v", res.Changes, err)
	}
	if got := left(t, l); !slices.Equal(got, []string{"chg_never_expires", "chg_window_open"}) {
		t.Errorf("left %v", got)
	}
}

func testPruneRuns(t *testing.T, h Harness) {
	ctx := context.Background()
	l, clk := open(t, h)
	now := t0.Add(100 * day)
	for _, r := range []*ledger.Run{
		{ID: "run_done", Status: ledger.RunUndone, CreatedAt: t0, UpdatedAt: t0},             // its changes go: pruned
		{ID: "run_live", Status: ledger.RunOpen, CreatedAt: t0, UpdatedAt: t0},               // keeps a pending change
		{ID: "run_empty", Status: ledger.RunOpen, CreatedAt: t0, UpdatedAt: t0},              // no changes, old: pruned
		{ID: "run_recent", Status: ledger.RunOpen, CreatedAt: t0, UpdatedAt: now.Add(-day)},  // no changes, young
		{ID: "run_undoing", Status: ledger.RunUndoing, CreatedAt: t0, UpdatedAt: t0},         // being undone
		{ID: "run_kept", Status: ledger.RunPartiallyUndone, CreatedAt: t0, UpdatedAt: t0},    // keeps a young change
		{ID: "run_both", Status: ledger.RunPartiallyUndone, CreatedAt: t0, UpdatedAt: t0},    // one change goes, one stays
		{ID: "run_applied", Status: ledger.RunOpen, CreatedAt: t0, UpdatedAt: t0},            // applied, still undoable
		{ID: "run_expired", Status: ledger.RunUndone, CreatedAt: t0, UpdatedAt: t0.Add(day)}, // its change goes: pruned
	} {
		if err := driver.BackendOf(l).InsertRun(ctx, l.DB(), r); err != nil {
			t.Fatal(err)
		}
	}
	add := func(id, run string, s ledger.Status, updated time.Time) {
		c := pendingChange(id, updated)
		c.Status, c.RunID, c.AppliedAt, c.Undoable = s, run, updated, true
		insertChanges(t, l, c)
	}
	add("chg_d1", "run_done", ledger.Undone, t0)
	add("chg_d2", "run_done", ledger.UndoFailed, t0)
	add("chg_l1", "run_live", ledger.Pending, t0)
	add("chg_l2", "run_live", ledger.Undone, t0)
	add("chg_k1", "run_kept", ledger.Undone, now.Add(-day))
	add("chg_b1", "run_both", ledger.Undone, t0)
	add("chg_b2", "run_both", ledger.Applying, t0)
	add("chg_a1", "run_applied", ledger.Applied, t0)
	add("chg_e1", "run_expired", ledger.Expired, t0)
	clk.Set(now)
	res, err := l.Prune(ctx, ledger.PruneOptions{OlderThan: 30 * day, IncludeApplied: true})
	if err != nil {
		t.Fatal(err)
	}
	if !sameIDs(res.Changes, "chg_d1", "chg_d2", "chg_l2", "chg_b1", "chg_e1") {
		t.Errorf("pruned changes %v", res.Changes)
	}
	if !sameIDs(res.Runs, "run_done", "run_empty", "run_expired") {
		t.Errorf("pruned runs %v, want run_done run_empty run_expired", res.Runs)
	}
	rs, err := l.Runs(ctx, ledger.RunFilter{})
	if err != nil {
		t.Fatal(err)
	}
	var runs []string
	for _, r := range rs {
		runs = append(runs, r.ID)
	}
	if !sameIDs(runs, "run_live", "run_recent", "run_undoing", "run_kept", "run_both", "run_applied") {
		t.Errorf("runs left %v", runs)
	}
}

func testPruneDryRun(t *testing.T, h Harness) {
	ctx := context.Background()
	l, clk := open(t, h)
	insertRuns(t, l, "run_1")
	c := pendingChange("chg_1", t0)
	c.Status, c.RunID = ledger.Undone, "run_1"
	insertChanges(t, l, c)
	addAged(t, l, "chg_2", ledger.Expired, t0)
	addAged(t, l, "chg_3", ledger.Pending, t0)
	clk.Set(t0.Add(10 * day))
	before := left(t, l)
	dry, err := l.Prune(ctx, ledger.PruneOptions{DryRun: true, BatchSize: 1, Progress: func(int, int) {
		t.Error("a dry run reported progress of deletions")
	}})
	if err != nil {
		t.Fatal(err)
	}
	if got := left(t, l); !slices.Equal(got, before) {
		t.Errorf("a dry run deleted rows: %v left of %v", got, before)
	}
	if _, err := l.Run(ctx, "run_1"); err != nil {
		t.Errorf("a dry run deleted a run: %v", err)
	}
	done, err := l.Prune(ctx, ledger.PruneOptions{})
	if err != nil {
		t.Fatal(err)
	}
	slices.Sort(dry.Changes)
	slices.Sort(done.Changes)
	if !reflect.DeepEqual(dry.Changes, done.Changes) || !reflect.DeepEqual(dry.Runs, done.Runs) || len(done.Changes) != 2 || len(done.Runs) != 1 {
		t.Errorf("dry run %+v, real run %+v: want the same two changes and one run", dry, done)
	}
	if dry.Space != (ledger.Space{}) {
		t.Errorf("a dry run reported space %+v, want none", dry.Space)
	}
}

func testPruneBatches(t *testing.T, h Harness) {
	ctx := context.Background()
	l, clk := open(t, h)
	insertExpired(t, l, 25, "%02d", nil)
	clk.Set(t0.Add(day))
	var calls [][2]int
	res, err := l.Prune(ctx, ledger.PruneOptions{BatchSize: 10, Progress: func(deleted, total int) {
		calls = append(calls, [2]int{deleted, total})
	}})
	if err != nil || len(res.Changes) != 25 {
		t.Fatalf("Prune = %d changes, %v; want 25", len(res.Changes), err)
	}
	if want := [][2]int{{10, 25}, {20, 25}, {25, 25}}; !reflect.DeepEqual(calls, want) {
		t.Errorf("progress %v, want %v", calls, want)
	}
	if got := left(t, l); len(got) != 0 {
		t.Errorf("left %v", got)
	}
}

// testPrunePages prunes more changes and runs than Prune reads at a time
// (it pages through the ledger, 500 rows a page), with Keep falling inside
// a page and a run whose changes straddle what is deleted and kept.
func testPrunePages(t *testing.T, h Harness) {
	ctx := context.Background()
	l, clk := open(t, h)
	const n = 1203 // run_a: the newest 600, run_b: the next 600, run_c: the oldest 3
	insertRuns(t, l, "run_a", "run_b", "run_c")
	insertExpired(t, l, n, "%04d", func(i int) string {
		switch {
		case i < 3:
			return "run_c"
		case i < 603:
			return "run_b"
		}
		return "run_a"
	})
	clk.Set(t0.Add(day))
	opts := ledger.PruneOptions{Keep: 700, By: "operator:dan"}
	check := func(res ledger.PruneResult) {
		t.Helper()
		if len(res.Changes) != n-700 || res.Changes[0] != "chg_0502" || res.Changes[len(res.Changes)-1] != "chg_0000" {
			t.Errorf("Prune picked %d changes, %v … %v; want the oldest %d, newest first", len(res.Changes), res.Changes[:1], res.Changes[len(res.Changes)-1:], n-700)
		}
		if !reflect.DeepEqual(res.Runs, []string{"run_c"}) {
			t.Errorf("Prune picked runs %v, want [run_c]", res.Runs)
		}
	}
	opts.DryRun = true
	dry, err := l.Prune(ctx, opts)
	if err != nil {
		t.Fatal(err)
	}
	check(dry)
	if got := len(left(t, l)); got != n {
		t.Fatalf("a dry run left %d of %d changes", got, n)
	}
	opts.DryRun = false
	done, err := l.Prune(ctx, opts)
	if err != nil {
		t.Fatal(err)
	}
	check(done)
	kept := left(t, l)
	if len(kept) != 700 || kept[0] != "chg_0503" {
		t.Errorf("left %d changes from %v, want 700 from chg_0503", len(kept), kept[:1])
	}
	runs, err := l.Runs(ctx, ledger.RunFilter{})
	if err != nil || len(runs) != 2 {
		t.Errorf("runs left: %d, %v; want run_a and run_b", len(runs), err)
	}
}

// testPruneLastUpdate prunes by the time of a change's last update, not
// of its creation.
func testPruneLastUpdate(t *testing.T, h Harness) {
	ctx := context.Background()
	l, clk := open(t, h)
	touched := addAged(t, l, "chg_touched", ledger.Undone, t0)
	touched.UpdatedAt = t0.Add(50 * day) // created long ago, undone lately
	if err := driver.BackendOf(l).UpdateChange(ctx, l.DB(), touched, ledger.Undone); err != nil {
		t.Fatal(err)
	}
	addAged(t, l, "chg_old", ledger.Undone, t0.Add(10*day))
	clk.Set(t0.Add(60 * day))
	res, err := l.Prune(ctx, ledger.PruneOptions{OlderThan: 30 * day})
	if err != nil || !sameIDs(res.Changes, "chg_old") {
		t.Errorf("Prune(older than 30 days) = %v, %v; want chg_old only (chg_touched was updated 10 days ago)", res.Changes, err)
	}
}

// testPruneKeepEligible checks that Keep counts only the changes Prune
// may delete: an applied change still within its undo window is neither
// deleted nor counted, even when it is the newest.
func testPruneKeepEligible(t *testing.T, h Harness) {
	ctx := context.Background()
	l, clk := open(t, h)
	now := t0.Add(100 * day)
	for i := range 3 {
		addAged(t, l, fmt.Sprintf("chg_%d", i), ledger.Applied, t0.Add(time.Duration(i)*day)) // no undo: may go
	}
	open := addAged(t, l, "chg_3", ledger.Applied, t0.Add(3*day))
	open.Undoable, open.UndoHash, open.UndoExpiresAt = true, "undo", now.Add(day)
	if err := driver.BackendOf(l).UpdateChange(ctx, l.DB(), open, ledger.Applied); err != nil {
		t.Fatal(err)
	}
	clk.Set(now)
	res, err := l.Prune(ctx, ledger.PruneOptions{Keep: 1, IncludeApplied: true})
	if err != nil || !reflect.DeepEqual(res.Changes, []string{"chg_1", "chg_0"}) {
		t.Errorf("Prune(keep 1, include applied) = %v, %v; want [chg_1 chg_0]: chg_3 can still be undone, chg_2 is the one kept", res.Changes, err)
	}
	if got := left(t, l); !slices.Equal(got, []string{"chg_2", "chg_3"}) {
		t.Errorf("left %v, want chg_2 chg_3", got)
	}
}

// testPruneKeepTies checks that Keep orders changes created in the same
// microsecond by ID, as ListChanges does, and that Prune lists what it
// picks in that order, newest first.
func testPruneKeepTies(t *testing.T, h Harness) {
	ctx := context.Background()
	l, clk := open(t, h)
	for _, id := range []string{"chg_b", "chg_d", "chg_a", "chg_c"} {
		addAged(t, l, id, ledger.Expired, t0)
	}
	clk.Set(t0.Add(day))
	res, err := l.Prune(ctx, ledger.PruneOptions{Keep: 2, DryRun: true})
	if err != nil || !reflect.DeepEqual(res.Changes, []string{"chg_b", "chg_a"}) {
		t.Errorf("Prune(keep 2) = %v, %v; want [chg_b chg_a] (chg_d and chg_c are the newest by ID)", res.Changes, err)
	}
	all, err := l.Changes(ctx, ledger.ChangeFilter{Limit: 2})
	if err != nil || len(all) != 2 || all[0].ID != "chg_d" || all[1].ID != "chg_c" {
		t.Errorf("Changes(limit 2) = %v, %v: Keep must keep what the listing shows first", all, err)
	}
}

// testPruneMovedOn moves a change Prune picked to another status while
// Prune deletes an earlier batch: Prune keeps it.
func testPruneMovedOn(t *testing.T, h Harness) {
	ctx := context.Background()
	l, clk := open(t, h)
	for i := range 4 {
		addAged(t, l, fmt.Sprintf("chg_%d", i), ledger.Applied, t0.Add(time.Duration(i)*time.Second)) // no undo
	}
	clk.Set(t0.Add(10 * day))
	batches := 0
	res, err := l.Prune(ctx, ledger.PruneOptions{IncludeApplied: true, BatchSize: 2, Progress: func(deleted, total int) {
		batches++
		if batches > 1 {
			return
		}
		// The oldest go first: chg_3, the newest, is in the second
		// batch. A claim moves it on, as an undo would.
		if err := step(ctx, l, "chg_3", ledger.Applied, ledger.Undoing, nil); err != nil {
			t.Error(err)
		}
	}})
	if err != nil || len(res.Changes) != 4 || batches != 2 {
		t.Fatalf("Prune = %v, %v in %d batches; want 4 picked in 2", res.Changes, err, batches)
	}
	if got := left(t, l); !slices.Equal(got, []string{"chg_3"}) {
		t.Errorf("left %v, want chg_3, which moved to undoing before its batch", got)
	}
	if c := mustGet(t, l, "chg_3"); c.Status != ledger.Undoing {
		t.Errorf("chg_3 is %s, want undoing", c.Status)
	}
}

// testPruneRunBatches deletes more runs than a batch, each batch in a
// transaction of its own with its history entry.
func testPruneRunBatches(t *testing.T, h Harness) {
	ctx := context.Background()
	l, clk := open(t, h)
	ids := []string{"run_1", "run_2", "run_3", "run_4", "run_5"}
	insertRuns(t, l, ids...)
	clk.Set(t0.Add(day))
	res, err := l.Prune(ctx, ledger.PruneOptions{BatchSize: 2, By: "operator:dan"})
	if err != nil || !sameIDs(res.Runs, ids...) {
		t.Fatalf("Prune = %v, %v; want every empty run", res.Runs, err)
	}
	if runs, err := l.Runs(ctx, ledger.RunFilter{}); err != nil || len(runs) != 0 {
		t.Errorf("runs left: %d, %v", len(runs), err)
	}
	entries, err := l.History(ctx, ledger.HistoryFilter{})
	if err != nil {
		t.Fatal(err)
	}
	var notes []string
	for _, e := range entries {
		if e.To == ledger.HistoryPruned {
			notes = append(notes, e.Note)
		}
	}
	want := []string{"pruned 2 runs left with no changes", "pruned 2 runs left with no changes", "pruned 1 runs left with no changes"}
	if !slices.Equal(notes, want) {
		t.Errorf("prune entries %q, want %q", notes, want)
	}
}

// testPruneSpace checks what Prune reports of the space on a backend that
// can tell, and that Vacuum keeps every row.
func testPruneSpace(t *testing.T, h Harness) {
	ctx := context.Background()
	l, clk := open(t, h)
	insertRuns(t, l, "run_1")
	insertExpired(t, l, 300, "%03d", func(i int) string { return "run_1" })
	clk.Set(t0.Add(day))
	res, err := l.Prune(ctx, ledger.PruneOptions{Keep: 100})
	if err != nil || len(res.Changes) != 200 {
		t.Fatalf("Prune = %d changes, %v; want 200", len(res.Changes), err)
	}
	_, compacts := driver.BackendOf(l).(driver.Compactor)
	if compacts && (res.Space.Before <= 0 || res.Space.After <= 0) {
		t.Errorf("Prune reported the space %+v; want both sizes", res.Space)
	}
	if !compacts {
		if res.Space != (ledger.Space{}) {
			t.Errorf("a backend that cannot tell reported the space %+v", res.Space)
		}
		return
	}
	kept := left(t, l)
	space, err := l.Vacuum(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if space.Before <= 0 || space.After <= 0 || !space.Returned {
		t.Errorf("Vacuum = %+v; want both sizes, returned", space)
	}
	if got := left(t, l); !slices.Equal(got, kept) {
		t.Errorf("after Vacuum %d changes are left, want the %d kept", len(got), len(kept))
	}
	if problems, err := driver.BackendOf(l).Check(ctx); err != nil || len(problems) != 0 {
		t.Errorf("the backend's Check after Vacuum = %q, %v", problems, err)
	}
	// The ledger works on: another prune, and a write.
	res, err = l.Prune(ctx, ledger.PruneOptions{})
	if err != nil || len(res.Changes) != 100 {
		t.Errorf("Prune after Vacuum = %d changes, %v; want 100", len(res.Changes), err)
	}
	insertChanges(t, l, pendingChange("chg_new", t0.Add(day)))
}
