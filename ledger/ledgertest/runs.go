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

func exerciseRuns(t *testing.T, h Harness) {
	runAll(t, h, []test{
		{"FixtureSetsEveryField", testRunFixture},
		{"RoundTripKeepsEveryField", testRunRoundTrip},
		{"EachFieldHasItsOwnColumn", testRunOwnColumns},
		{"DuplicateIDIsRefused", testRunDuplicate},
		{"MissingRunIsNotFound", testRunNotFound},
		{"UpdateIsCompareAndSet", testRunCompareAndSet},
		{"InvalidStatusIsRefused", testRunInvalidStatus},
		{"ListFiltersNewestFirst", testRunList},
		{"InsertRunByRecordsWhoStartedIt", testRunStartedBy},
		{"DeleteOnlyRunsWithoutChanges", testRunDelete},
	})
}

func fullRun(id string) *ledger.Run {
	return &ledger.Run{ID: id, Label: "tidy notes – ünïcode 😀", ScopeHash: "scope", Status: ledger.RunUndoing,
		PlanHash: "plan", ConfirmHash: "confirm", ConfirmExpiresAt: t0.Add(time.Minute + time.Nanosecond),
		Kind: ledger.RunSession, SessionKey: "session-digest", StartedBy: "agent:alice",
		Report: json.RawMessage(`{"z":[3],"a":null}`), UndoneBy: "agent",
		CreatedAt: t0.In(time.FixedZone("Y", -3600)), UpdatedAt: t0.Add(time.Second)}
}

// storedRun is what reading r back must return: times in UTC microseconds,
// and an empty Kind as RunTask.
func storedRun(r *ledger.Run) *ledger.Run {
	d := *r // not r.Clone(), which turns an empty report into nil
	d.Report = slices.Clone(r.Report)
	d.ConfirmExpiresAt, d.CreatedAt, d.UpdatedAt = storedTime(d.ConfirmExpiresAt), storedTime(d.CreatedAt), storedTime(d.UpdatedAt)
	if d.Kind == "" {
		d.Kind = ledger.RunTask // an empty kind is stored as a task run
	}
	return &d
}

// testRunFixture fails when ledger.Run gains a field that fullRun leaves
// zero.
func testRunFixture(t *testing.T, h Harness) {
	checkEveryFieldSet(t, *fullRun("run_1"), "fullRun")
}

func testRunRoundTrip(t *testing.T, h Harness) {
	ctx := context.Background()
	l, _ := open(t, h)
	full := fullRun("run_1")
	bare := &ledger.Run{ID: "run_2", Status: ledger.RunOpen, CreatedAt: sec(1), UpdatedAt: t0}
	empty := &ledger.Run{ID: "run_3", Status: ledger.RunOpen, Report: json.RawMessage{}, CreatedAt: sec(2), UpdatedAt: t0}
	for _, want := range []*ledger.Run{full, bare, empty} {
		if err := driver.BackendOf(l).InsertRun(ctx, l.DB(), want); err != nil {
			t.Fatal(err)
		}
		got, err := l.Run(ctx, want.ID)
		if err != nil {
			t.Fatal(err)
		}
		if !reflect.DeepEqual(got, storedRun(want)) {
			t.Errorf("round trip:\n got %#v\nwant %#v", got, storedRun(want))
		}
	}
	err := l.WithTx(ctx, func(tx *ledger.Tx) error {
		got, err := tx.Run("run_1")
		if err == nil && !reflect.DeepEqual(got, storedRun(full)) {
			t.Errorf("read in a transaction:\n got %#v\nwant %#v", got, storedRun(full))
		}
		return err
	})
	if err != nil {
		t.Fatal(err)
	}
}

func testRunDuplicate(t *testing.T, h Harness) {
	ctx := context.Background()
	l, _ := open(t, h)
	r := fullRun("run_dup")
	if err := driver.BackendOf(l).InsertRun(ctx, l.DB(), r); err != nil {
		t.Fatal(err)
	}
	again := &ledger.Run{ID: "run_dup", Label: "other", Status: ledger.RunOpen, CreatedAt: t0, UpdatedAt: t0}
	err := l.WithTx(ctx, func(tx *ledger.Tx) error { return tx.InsertRun(again) })
	var le *ledger.Error
	if err == nil || !errors.As(err, &le) || errors.Is(err, ledger.ErrNotFound) || !strings.Contains(err.Error(), "run_dup") {
		t.Errorf("duplicate run: %v; want a *ledger.Error naming the run", err)
	}
	if got, _ := l.Run(ctx, "run_dup"); !reflect.DeepEqual(got, storedRun(r)) {
		t.Errorf("the first run changed: %#v", got)
	}
}

func testRunNotFound(t *testing.T, h Harness) {
	ctx := context.Background()
	l, _ := open(t, h)
	if _, err := l.Run(ctx, "run_none"); !errors.Is(err, ledger.ErrNotFound) || !strings.Contains(err.Error(), "run_none") {
		t.Errorf("Run of a missing run: %v", err)
	}
	err := l.WithTx(ctx, func(tx *ledger.Tx) error {
		_, err := tx.Run("run_none")
		return err
	})
	if !errors.Is(err, ledger.ErrNotFound) {
		t.Errorf("Tx.Run of a missing run: %v", err)
	}
	err = driver.BackendOf(l).UpdateRun(ctx, l.DB(), &ledger.Run{ID: "run_none", Status: ledger.RunOpen, CreatedAt: t0, UpdatedAt: t0}, ledger.RunOpen)
	if !errors.Is(err, ledger.ErrNotFound) || errors.Is(err, ledger.ErrConflict) {
		t.Errorf("UpdateRun of a missing run: %v", err)
	}
}

func testRunCompareAndSet(t *testing.T, h Harness) {
	ctx := context.Background()
	l, _ := open(t, h)
	r := fullRun("run_1")
	if err := driver.BackendOf(l).InsertRun(ctx, l.DB(), r); err != nil {
		t.Fatal(err)
	}
	next := r.Clone()
	next.Status, next.Report, next.Label, next.UpdatedAt = ledger.RunUndone, nil, "relabelled", sec(9)
	next.PlanHash, next.ConfirmHash, next.ConfirmExpiresAt = "", "", time.Time{}
	next.ScopeHash, next.CreatedAt = "other", sec(99) // fixed when the run started
	err := driver.BackendOf(l).UpdateRun(ctx, l.DB(), next, ledger.RunOpen)
	if !errors.Is(err, ledger.ErrConflict) || !strings.Contains(err.Error(), "open") || !strings.Contains(err.Error(), "undoing") {
		t.Errorf("UpdateRun from the wrong status: %v; want ErrConflict naming both statuses", err)
	}
	if err := l.WithTx(ctx, func(tx *ledger.Tx) error { return tx.UpdateRun(next, ledger.RunUndoing) }); err != nil {
		t.Fatal(err)
	}
	got, err := l.Run(ctx, "run_1")
	want := storedRun(next)
	want.ScopeHash, want.CreatedAt = r.ScopeHash, storedTime(r.CreatedAt)
	if err != nil || !reflect.DeepEqual(got, want) {
		t.Errorf("after UpdateRun:\n got %#v, %v\nwant %#v", got, err, want)
	}
	if err := driver.BackendOf(l).UpdateRun(ctx, l.DB(), next, ledger.RunUndoing); !errors.Is(err, ledger.ErrConflict) {
		t.Errorf("second UpdateRun from undoing: %v, want ErrConflict", err)
	}
}

func testRunInvalidStatus(t *testing.T, h Harness) {
	ctx := context.Background()
	l, _ := open(t, h)
	if err := driver.BackendOf(l).InsertRun(ctx, l.DB(), &ledger.Run{ID: "run_x", Status: "bogus", CreatedAt: t0, UpdatedAt: t0}); err == nil {
		t.Error("inserted a run with an invalid status")
	}
	if err := driver.BackendOf(l).InsertRun(ctx, l.DB(), &ledger.Run{ID: "", Status: ledger.RunOpen, CreatedAt: t0, UpdatedAt: t0}); err == nil {
		t.Error("inserted a run with an empty ID")
	}
	if err := driver.BackendOf(l).InsertRun(ctx, l.DB(), &ledger.Run{ID: "run_k", Status: ledger.RunOpen, Kind: "Task", CreatedAt: t0, UpdatedAt: t0}); err == nil {
		t.Error("inserted a run with an invalid kind")
	}
	insertRuns(t, l, "run_1")
	err := driver.BackendOf(l).UpdateRun(ctx, l.DB(), &ledger.Run{ID: "run_1", Status: "bogus", CreatedAt: t0, UpdatedAt: t0}, ledger.RunOpen)
	if err == nil {
		t.Error("updated a run to an invalid status")
	}
	if got, err := l.Run(ctx, "run_1"); err != nil || got.Status != ledger.RunOpen {
		t.Errorf("after the refused update: %v, %v", got, err)
	}
}

func testRunList(t *testing.T, h Harness) {
	ctx := context.Background()
	l, _ := open(t, h)
	for _, r := range []*ledger.Run{
		{ID: "run_1", ScopeHash: "a", Status: ledger.RunUndone, CreatedAt: sec(1), UpdatedAt: sec(1)},
		{ID: "run_2", ScopeHash: "b", Status: ledger.RunOpen, Kind: ledger.RunTask, CreatedAt: sec(2), UpdatedAt: sec(2)},
		{ID: "run_3b", ScopeHash: "a", Status: ledger.RunOpen, Kind: ledger.RunSession, SessionKey: "k1", CreatedAt: sec(3), UpdatedAt: sec(3)},
		{ID: "run_3a", ScopeHash: "a", Status: ledger.RunPartiallyUndone, CreatedAt: sec(3), UpdatedAt: sec(3)},
		{ID: "run_4", ScopeHash: "a", Status: ledger.RunOpen, Kind: ledger.RunSession, SessionKey: "k2", CreatedAt: sec(4), UpdatedAt: sec(10)},
		{ID: "run_5", ScopeHash: "a", Status: ledger.RunOpen, Kind: ledger.RunSession, SessionKey: "k1", StartedBy: "agent:ana", CreatedAt: sec(5), UpdatedAt: sec(5)},
		{ID: "run_6", ScopeHash: "b", Status: ledger.RunOpen, Kind: ledger.RunSession, SessionKey: "k1", StartedBy: "agent:bob", CreatedAt: sec(6), UpdatedAt: sec(6)},
	} {
		if err := driver.BackendOf(l).InsertRun(ctx, l.DB(), r); err != nil {
			t.Fatal(err)
		}
	}
	for _, tc := range []struct {
		f    ledger.RunFilter
		want string
	}{
		{ledger.RunFilter{}, "run_6 run_5 run_4 run_3b run_3a run_2 run_1"},
		{ledger.RunFilter{Limit: 1}, "run_6"},
		{ledger.RunFilter{ScopeHash: "a"}, "run_5 run_4 run_3b run_3a run_1"},
		{ledger.RunFilter{ScopeHash: "a", Statuses: []ledger.RunStatus{ledger.RunOpen, ledger.RunUndone}}, "run_5 run_4 run_3b run_1"},
		{ledger.RunFilter{Statuses: []ledger.RunStatus{ledger.RunUndoing}}, ""},
		{ledger.RunFilter{ScopeHash: "none"}, ""},
		// An empty kind was stored as a task run.
		{ledger.RunFilter{Kind: ledger.RunTask}, "run_3a run_2 run_1"},
		{ledger.RunFilter{Kind: ledger.RunSession}, "run_6 run_5 run_4 run_3b"},
		{ledger.RunFilter{SessionKey: "k1"}, "run_6 run_5 run_3b"},
		// Who started it: exactly that actor.
		{ledger.RunFilter{StartedBy: "agent:ana"}, "run_5"},
		{ledger.RunFilter{StartedBy: "agent:an"}, ""},
		{ledger.RunFilter{StartedBy: "agent:bob", ScopeHash: "a"}, ""},
		// The session run of a caller: its scope, its session, open,
		// the newest.
		{ledger.RunFilter{ScopeHash: "a", SessionKey: "k1", Kind: ledger.RunSession, Statuses: []ledger.RunStatus{ledger.RunOpen}, Limit: 1}, "run_5"},
		{ledger.RunFilter{ScopeHash: "a", SessionKey: "k3", Kind: ledger.RunSession}, ""},
		// Strictly before, also with nanoseconds.
		{ledger.RunFilter{UpdatedBefore: sec(5)}, "run_3b run_3a run_2 run_1"},
		{ledger.RunFilter{UpdatedBefore: sec(5).Add(time.Nanosecond)}, "run_5 run_3b run_3a run_2 run_1"},
		{ledger.RunFilter{UpdatedBefore: sec(5).Add(-time.Nanosecond)}, "run_3b run_3a run_2 run_1"},
		{ledger.RunFilter{UpdatedBefore: sec(11), Kind: ledger.RunSession, ScopeHash: "a"}, "run_5 run_4 run_3b"},
		// At or after, also with nanoseconds.
		{ledger.RunFilter{UpdatedSince: sec(5)}, "run_6 run_5 run_4"},
		{ledger.RunFilter{UpdatedSince: sec(5).Add(time.Nanosecond)}, "run_6 run_4"},
		{ledger.RunFilter{UpdatedSince: sec(3), UpdatedBefore: sec(5)}, "run_3b run_3a"},
		// Paging: after a key, newest first; runs created in the same
		// microsecond are ordered by ID.
		{ledger.RunFilter{Before: &ledger.ChangeKey{CreatedAt: sec(4), ID: "run_4"}, Limit: 2}, "run_3b run_3a"},
		{ledger.RunFilter{Before: &ledger.ChangeKey{CreatedAt: sec(3), ID: "run_3b"}}, "run_3a run_2 run_1"},
		{ledger.RunFilter{Before: &ledger.ChangeKey{CreatedAt: sec(3), ID: "run_3b"}, ScopeHash: "a"}, "run_3a run_1"},
		{ledger.RunFilter{Before: &ledger.ChangeKey{CreatedAt: sec(1), ID: "run_1"}}, ""},
	} {
		rs, err := l.Runs(ctx, tc.f)
		if err != nil {
			t.Fatal(err)
		}
		var ids []string
		for _, r := range rs {
			ids = append(ids, r.ID)
		}
		if got := strings.Join(ids, " "); got != tc.want {
			t.Errorf("Runs(%+v) = %q, want %q", tc.f, got, tc.want)
		}
	}
}

func testRunDelete(t *testing.T, h Harness) {
	ctx := context.Background()
	l, _ := open(t, h)
	b := driver.BackendOf(l)
	insertRuns(t, l, "run_a", "run_b", "run_c")
	for _, c := range []struct{ id, run string }{{"chg_a", "run_a"}, {"chg_b", "run_b"}} {
		ch := pendingChange(c.id, t0)
		ch.RunID = c.run
		insertChanges(t, l, ch)
	}
	if n, _, err := b.DeleteRuns(ctx, l.DB(), []string{"run_a", "run_b", "run_missing"}); n != 0 || err != nil {
		t.Errorf("DeleteRuns of runs with changes = %d, %v; want 0", n, err)
	}
	if n, _, err := b.DeleteRuns(ctx, l.DB(), nil); n != 0 || err != nil {
		t.Errorf("DeleteRuns(nil) = %d, %v; want 0", n, err)
	}
	if n, _, err := b.DeleteChanges(ctx, l.DB(), []string{"chg_a"}, []ledger.Status{ledger.Pending}); n != 1 || err != nil {
		t.Fatalf("DeleteChanges = %d, %v", n, err)
	}
	if n, _, err := b.DeleteRuns(ctx, l.DB(), []string{"run_a", "run_b", "run_c"}); n != 2 || err != nil {
		t.Errorf("DeleteRuns = %d, %v; want 2 (run_a, run_c)", n, err)
	}
	err := l.WithTx(ctx, func(tx *ledger.Tx) error {
		n, _, err := b.DeleteRuns(ctx, tx.SQL(), []string{"run_a", "run_b", "run_c"})
		if err == nil && n != 0 {
			t.Errorf("DeleteRuns in a transaction = %d, want 0", n)
		}
		return err
	})
	if err != nil {
		t.Fatal(err)
	}
	rs, _ := l.Runs(ctx, ledger.RunFilter{})
	if len(rs) != 1 || rs[0].ID != "run_b" {
		t.Errorf("runs left: %v, want run_b", rs)
	}
}

// testRunStartedBy: InsertRunBy records who started the run on its row,
// as in its first history entry, and the runs of that actor list from it.
func testRunStartedBy(t *testing.T, h Harness) {
	ctx := context.Background()
	l, _ := open(t, h)
	err := l.WithTx(ctx, func(tx *ledger.Tx) error {
		for i, by := range []string{"agent:carol", "", "agent:carol"} {
			r := &ledger.Run{ID: fmt.Sprintf("run_%d", i), Status: ledger.RunOpen, CreatedAt: sec(i), UpdatedAt: sec(i)}
			if err := tx.InsertRunBy(r, by); err != nil {
				return err
			}
		}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	r, err := l.Run(ctx, "run_0")
	if err != nil || r.StartedBy != "agent:carol" {
		t.Fatalf("run_0: %+v, %v; want StartedBy agent:carol", r, err)
	}
	entries, err := l.History(ctx, ledger.HistoryFilter{RunID: "run_0"})
	if err != nil || len(entries) != 1 || entries[0].By != r.StartedBy {
		t.Fatalf("run_0's history %+v, %v: its first entry must name who started it", entries, err)
	}
	rs, err := l.Runs(ctx, ledger.RunFilter{StartedBy: "agent:carol"})
	if err != nil || len(rs) != 2 || rs[0].ID != "run_2" || rs[1].ID != "run_0" {
		t.Fatalf("carol's runs: %v, %v; want run_2 run_0", rs, err)
	}
}
