package sqlite

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"path/filepath"
	"reflect"
	"strings"
	"testing"
	"time"

	"github.com/mcp-changeset/changeset-go/ledger"
)

// newLedger creates a ledger in a temporary directory.
func newLedger(t *testing.T) *Backend {
	t.Helper()
	b, err := Open(context.Background(), filepath.Join(t.TempDir(), "ledger.db"), ledger.OpenOptions{Create: true})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { b.Close() })
	return b
}

var t0 = time.Date(2025, 3, 4, 5, 6, 7, 123456000, time.UTC)

// fullChange returns a change with every field set.
func fullChange(id string, created time.Time) *ledger.Change {
	return &ledger.Change{
		ID: id, Action: "set_setting", Status: ledger.Applied,
		ScopeHash: "scope-hash", RunID: "", Resource: "setting:x",
		Payload: json.RawMessage(`{"key":"x","value":1}`), PayloadHash: "payload-hash",
		Diff: json.RawMessage(`[{"after":1,"before":0,"field":"x"}]`), Summary: "set x to 1 – ünïcode",
		Warnings:  []string{"one", "two \"quoted\""},
		StateHash: "state-hash", Before: json.RawMessage(`{"x":0}`), After: json.RawMessage(`{"x":1}`),
		ConfirmHash: "confirm-hash", UndoHash: "undo-hash", Undoable: true, Transactional: true,
		Result: json.RawMessage(`{"ok":true}`), ErrorType: "*fs.PathError", Error: "open x: denied",
		Note: "checked", AppliedBy: "agent", UndoneBy: "person:ann",
		CreatedAt: created, UpdatedAt: created.Add(time.Second), ExpiresAt: created.Add(15 * time.Minute),
		AppliedAt: created.Add(2 * time.Second), UndoExpiresAt: created.Add(24 * time.Hour), UndoneAt: created.Add(3 * time.Second),
	}
}

func pendingChange(id string, created time.Time) *ledger.Change {
	return &ledger.Change{ID: id, Action: "a", Status: ledger.Pending, ScopeHash: "s",
		Payload: json.RawMessage(`{}`), CreatedAt: created, UpdatedAt: created, ExpiresAt: created.Add(time.Minute)}
}

func TestChangeRoundTrip(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	b := newLedger(t)
	run := &ledger.Run{ID: "run_1", Label: "task", ScopeHash: "s", Status: ledger.RunOpen, CreatedAt: t0, UpdatedAt: t0}
	if err := b.InsertRun(ctx, b.DB(), run); err != nil {
		t.Fatal(err)
	}
	full := fullChange("chg_full", t0)
	full.RunID = "run_1"
	empty := &ledger.Change{ID: "chg_empty", Action: "a", Status: ledger.Pending,
		Payload: json.RawMessage{}, Warnings: []string{}, CreatedAt: t0, UpdatedAt: t0}
	bare := &ledger.Change{ID: "chg_bare", Action: "a", Status: ledger.Pending, CreatedAt: t0, UpdatedAt: t0}
	for _, c := range []*ledger.Change{full, empty, bare} {
		if err := b.InsertChange(ctx, b.DB(), c); err != nil {
			t.Fatal(err)
		}
		got, err := b.GetChange(ctx, b.DB(), c.ID)
		if err != nil {
			t.Fatal(err)
		}
		if !reflect.DeepEqual(got, c) {
			t.Errorf("round trip of %s:\n got %#v\nwant %#v", c.ID, got, c)
		}
	}
	got, _ := b.GetChange(ctx, b.DB(), "chg_empty")
	if got.Payload == nil || len(got.Payload) != 0 || got.Warnings == nil || got.Diff != nil {
		t.Errorf("nil and empty not kept apart: payload %#v warnings %#v diff %#v", got.Payload, got.Warnings, got.Diff)
	}
	if err := b.InsertChange(ctx, b.DB(), full); err == nil {
		t.Error("inserting a duplicate ID succeeded")
	}
	orphan := pendingChange("chg_orphan", t0)
	orphan.RunID = "run_missing"
	if err := b.InsertChange(ctx, b.DB(), orphan); err == nil {
		t.Error("inserting a change of a missing run succeeded")
	}
}

func TestTimesTruncatedToMicroseconds(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	b := newLedger(t)
	local := time.Date(2025, 1, 2, 3, 4, 5, 999999999, time.FixedZone("X", 3600))
	c := pendingChange("chg_t", local)
	if err := b.InsertChange(ctx, b.DB(), c); err != nil {
		t.Fatal(err)
	}
	got, err := b.GetChange(ctx, b.DB(), "chg_t")
	if err != nil {
		t.Fatal(err)
	}
	if want := local.Truncate(time.Microsecond).UTC(); got.CreatedAt != want {
		t.Errorf("CreatedAt = %v, want %v", got.CreatedAt, want)
	}
}

func TestUpdateChangeCompareAndSet(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	b := newLedger(t)
	c := pendingChange("chg_1", t0)
	if err := b.InsertChange(ctx, b.DB(), c); err != nil {
		t.Fatal(err)
	}
	next := fullChange("chg_1", t0)
	next.Status = ledger.Applying
	next.Action, next.ScopeHash = "changed", "changed" // fixed at preview: not written
	err := b.UpdateChange(ctx, b.DB(), next, ledger.Applied)
	if !errors.Is(err, ledger.ErrConflict) || !strings.Contains(err.Error(), "expected applied, found pending") {
		t.Fatalf("update from the wrong status: %v, want ErrConflict naming both statuses", err)
	}
	if err := b.UpdateChange(ctx, b.DB(), next, ledger.Pending); err != nil {
		t.Fatal(err)
	}
	got, err := b.GetChange(ctx, b.DB(), "chg_1")
	if err != nil {
		t.Fatal(err)
	}
	want := next.Clone()
	want.Action, want.ScopeHash = c.Action, c.ScopeHash
	if !reflect.DeepEqual(got, want) {
		t.Errorf("after update:\n got %#v\nwant %#v", got, want)
	}
	if err := b.UpdateChange(ctx, b.DB(), next, ledger.Pending); !errors.Is(err, ledger.ErrConflict) {
		t.Errorf("second update from pending: %v, want ErrConflict", err)
	}
	gone := pendingChange("chg_gone", t0)
	if err := b.UpdateChange(ctx, b.DB(), gone, ledger.Pending); !errors.Is(err, ledger.ErrNotFound) || errors.Is(err, ledger.ErrConflict) {
		t.Errorf("update of a missing change: %v, want ErrNotFound", err)
	}
	if _, err := b.GetChange(ctx, b.DB(), "chg_gone"); !errors.Is(err, ledger.ErrNotFound) {
		t.Errorf("get of a missing change: %v, want ErrNotFound", err)
	} else if !strings.Contains(err.Error(), "chg_gone") {
		t.Errorf("not-found error %q does not name the change", err)
	}
	var le *ledger.Error
	if err := b.UpdateChange(ctx, b.DB(), gone, ledger.Pending); !errors.As(err, &le) {
		t.Errorf("error %T is not a *ledger.Error", err)
	}
	// An applied change must record when.
	bad := next.Clone()
	bad.Status, bad.AppliedAt = ledger.Applied, time.Time{}
	if err := b.UpdateChange(ctx, b.DB(), bad, ledger.Applying); err == nil {
		t.Error("an applied change without applied_at was accepted")
	}
}

func TestListChangesFilters(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	b := newLedger(t)
	for _, id := range []string{"run_a", "run_b"} {
		if err := b.InsertRun(ctx, b.DB(), &ledger.Run{ID: id, Status: ledger.RunOpen, CreatedAt: t0, UpdatedAt: t0}); err != nil {
			t.Fatal(err)
		}
	}
	add := func(id string, st ledger.Status, run string, created, updated time.Time) {
		c := pendingChange(id, created)
		c.Status, c.RunID, c.UpdatedAt = st, run, updated
		if st == ledger.Applied {
			c.AppliedAt = updated
		}
		if err := b.InsertChange(ctx, b.DB(), c); err != nil {
			t.Fatal(err)
		}
	}
	sec := func(n int) time.Time { return t0.Add(time.Duration(n) * time.Second) }
	add("chg_1", ledger.Pending, "", sec(1), sec(1))
	add("chg_2", ledger.Applied, "run_a", sec(2), sec(10))
	add("chg_3", ledger.Expired, "run_a", sec(3), sec(3))
	add("chg_4b", ledger.Applied, "run_b", sec(4), sec(4)) // same creation time as chg_4a:
	add("chg_4a", ledger.Undone, "", sec(4), sec(20))      // the larger ID comes first

	ids := func(f ledger.ChangeFilter) string {
		t.Helper()
		cs, err := b.ListChanges(ctx, b.DB(), f)
		if err != nil {
			t.Fatal(err)
		}
		var s []string
		for _, c := range cs {
			s = append(s, c.ID)
		}
		return strings.Join(s, " ")
	}
	for _, tc := range []struct {
		f    ledger.ChangeFilter
		want string
	}{
		{ledger.ChangeFilter{}, "chg_4b chg_4a chg_3 chg_2 chg_1"},
		{ledger.ChangeFilter{Limit: 2}, "chg_4b chg_4a"},
		{ledger.ChangeFilter{Statuses: []ledger.Status{ledger.Applied}}, "chg_4b chg_2"},
		{ledger.ChangeFilter{Statuses: []ledger.Status{ledger.Applied, ledger.Pending}}, "chg_4b chg_2 chg_1"},
		{ledger.ChangeFilter{RunID: "run_a"}, "chg_3 chg_2"},
		{ledger.ChangeFilter{RunID: "run_a", Statuses: []ledger.Status{ledger.Expired}}, "chg_3"},
		{ledger.ChangeFilter{UpdatedBefore: sec(4)}, "chg_3 chg_1"},                             // strictly before
		{ledger.ChangeFilter{UpdatedBefore: sec(4).Add(time.Nanosecond)}, "chg_4b chg_3 chg_1"}, // sub-µs cut-off
		{ledger.ChangeFilter{UpdatedBefore: sec(100), Statuses: []ledger.Status{ledger.Undone}, Limit: 1}, "chg_4a"},
		{ledger.ChangeFilter{RunID: "run_none"}, ""},
	} {
		if got := ids(tc.f); got != tc.want {
			t.Errorf("ListChanges(%+v) = %q, want %q", tc.f, got, tc.want)
		}
	}

	n, _, err := b.DeleteChanges(ctx, b.DB(), []string{"chg_1", "chg_2", "chg_3", "chg_missing"}, []ledger.Status{ledger.Expired, ledger.Pending})
	if err != nil || n != 2 {
		t.Fatalf("DeleteChanges = %d, %v; want 2", n, err)
	}
	if got := ids(ledger.ChangeFilter{}); got != "chg_4b chg_4a chg_2" {
		t.Errorf("after delete: %q", got)
	}
	if n, _, err := b.DeleteChanges(ctx, b.DB(), []string{"chg_2"}, nil); n != 0 || err != nil {
		t.Errorf("DeleteChanges with no statuses = %d, %v; want 0", n, err)
	}
	// run_a is still referenced by chg_2, run_b by chg_4b.
	if n, _, err := b.DeleteRuns(ctx, b.DB(), []string{"run_a", "run_b", "run_missing"}); n != 0 || err != nil {
		t.Errorf("DeleteRuns of referenced runs = %d, %v; want 0", n, err)
	}
	if n, _, err := b.DeleteChanges(ctx, b.DB(), []string{"chg_2"}, []ledger.Status{ledger.Applied}); n != 1 || err != nil {
		t.Fatalf("DeleteChanges = %d, %v; want 1", n, err)
	}
	if n, _, err := b.DeleteRuns(ctx, b.DB(), []string{"run_a", "run_b"}); n != 1 || err != nil {
		t.Errorf("DeleteRuns = %d, %v; want 1 (run_a)", n, err)
	}
}

func TestDeleteManyChanges(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	b := newLedger(t)
	tx, err := b.BeginWrite(ctx)
	if err != nil {
		t.Fatal(err)
	}
	var ids []string
	for i := range 1234 {
		id := fmt.Sprintf("chg_%05d", i)
		ids = append(ids, id)
		if err := b.InsertChange(ctx, tx, pendingChange(id, t0)); err != nil {
			t.Fatal(err)
		}
	}
	if err := tx.Commit(); err != nil {
		t.Fatal(err)
	}
	n, _, err := b.DeleteChanges(ctx, b.DB(), ids, []ledger.Status{ledger.Pending})
	if err != nil || n != len(ids) {
		t.Fatalf("DeleteChanges = %d, %v; want %d", n, err, len(ids))
	}
}

func TestRunRoundTripAndCompareAndSet(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	b := newLedger(t)
	r := &ledger.Run{ID: "run_1", Label: "tidy notes", ScopeHash: "scope", Status: ledger.RunUndoing,
		PlanHash: "plan", ConfirmHash: "confirm", ConfirmExpiresAt: t0.Add(time.Minute),
		Report: json.RawMessage(`{"undone":3}`), UndoneBy: "agent", CreatedAt: t0, UpdatedAt: t0.Add(time.Second)}
	bare := &ledger.Run{ID: "run_2", Status: ledger.RunOpen, CreatedAt: t0.Add(time.Second), UpdatedAt: t0}
	for _, want := range []*ledger.Run{r, bare} {
		if err := b.InsertRun(ctx, b.DB(), want); err != nil {
			t.Fatal(err)
		}
		got, err := b.GetRun(ctx, b.DB(), want.ID)
		if err != nil {
			t.Fatal(err)
		}
		stored := *want
		stored.Kind = ledger.RunTask // an empty kind is stored as a task run
		if !reflect.DeepEqual(got, &stored) {
			t.Errorf("round trip:\n got %#v\nwant %#v", got, &stored)
		}
	}
	if err := b.InsertRun(ctx, b.DB(), r); err == nil {
		t.Error("inserting a duplicate run succeeded")
	}
	if _, err := b.GetRun(ctx, b.DB(), "run_x"); !errors.Is(err, ledger.ErrNotFound) {
		t.Errorf("GetRun of a missing run: %v", err)
	}
	next := r.Clone()
	next.Status, next.ScopeHash, next.Report = ledger.RunUndone, "other", nil
	if err := b.UpdateRun(ctx, b.DB(), next, ledger.RunOpen); !errors.Is(err, ledger.ErrConflict) {
		t.Errorf("UpdateRun from the wrong status: %v", err)
	}
	if err := b.UpdateRun(ctx, b.DB(), next, ledger.RunUndoing); err != nil {
		t.Fatal(err)
	}
	got, _ := b.GetRun(ctx, b.DB(), "run_1")
	if got.Status != ledger.RunUndone || got.Report != nil || got.ScopeHash != "scope" {
		t.Errorf("after UpdateRun: %#v", got)
	}
	if err := b.UpdateRun(ctx, b.DB(), &ledger.Run{ID: "run_x", Status: ledger.RunOpen}, ledger.RunOpen); !errors.Is(err, ledger.ErrNotFound) {
		t.Errorf("UpdateRun of a missing run: %v", err)
	}
	list := func(f ledger.RunFilter) (ids []string) {
		rs, err := b.ListRuns(ctx, b.DB(), f)
		if err != nil {
			t.Fatal(err)
		}
		for _, r := range rs {
			ids = append(ids, r.ID)
		}
		return ids
	}
	if got := list(ledger.RunFilter{}); !reflect.DeepEqual(got, []string{"run_2", "run_1"}) {
		t.Errorf("ListRuns = %v", got)
	}
	if got := list(ledger.RunFilter{Statuses: []ledger.RunStatus{ledger.RunUndone}, ScopeHash: "scope"}); !reflect.DeepEqual(got, []string{"run_1"}) {
		t.Errorf("ListRuns(undone, scope) = %v", got)
	}
	if got := list(ledger.RunFilter{Limit: 1}); !reflect.DeepEqual(got, []string{"run_2"}) {
		t.Errorf("ListRuns(limit 1) = %v", got)
	}
}

func TestMeta(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	b := newLedger(t)
	if v, ok, err := b.GetMeta(ctx, b.DB(), "k"); ok || v != nil || err != nil {
		t.Errorf("GetMeta of a missing key = %q, %v, %v", v, ok, err)
	}
	if v, err := b.SetMetaIfAbsent(ctx, b.DB(), "k", []byte{0, 1, 2}); err != nil || string(v) != "\x00\x01\x02" {
		t.Errorf("first SetMetaIfAbsent = %q, %v", v, err)
	}
	if v, err := b.SetMetaIfAbsent(ctx, b.DB(), "k", []byte("other")); err != nil || string(v) != "\x00\x01\x02" {
		t.Errorf("second SetMetaIfAbsent = %q, %v; want the first value", v, err)
	}
	if v, err := b.SetMetaIfAbsent(ctx, b.DB(), "empty", nil); err != nil || v == nil || len(v) != 0 {
		t.Errorf("SetMetaIfAbsent(empty) = %#v, %v", v, err)
	}
	if v, ok, err := b.GetMeta(ctx, b.DB(), "empty"); !ok || v == nil || len(v) != 0 || err != nil {
		t.Errorf("GetMeta(empty) = %#v, %v, %v", v, ok, err)
	}
}

func TestReadDuringWriteTransaction(t *testing.T) {
	t.Parallel()
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	b := newLedger(t)
	if err := b.InsertChange(ctx, b.DB(), pendingChange("chg_1", t0)); err != nil {
		t.Fatal(err)
	}
	tx, err := b.BeginWrite(ctx)
	if err != nil {
		t.Fatal(err)
	}
	defer tx.Rollback()
	if err := b.InsertChange(ctx, tx, pendingChange("chg_2", t0)); err != nil {
		t.Fatal(err)
	}
	// Another connection reads the committed state while the write
	// transaction is open.
	cs, err := b.ListChanges(ctx, b.DB(), ledger.ChangeFilter{})
	if err != nil || len(cs) != 1 {
		t.Fatalf("read during a write transaction = %d changes, %v; want 1", len(cs), err)
	}
	if err := tx.Commit(); err != nil {
		t.Fatal(err)
	}
	if cs, _ := b.ListChanges(ctx, b.DB(), ledger.ChangeFilter{}); len(cs) != 2 {
		t.Errorf("after commit: %d changes, want 2", len(cs))
	}
	if problems, err := b.Check(ctx); err != nil || len(problems) != 0 {
		t.Errorf("Check = %q, %v", problems, err)
	}
}
