package ledgertest

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"reflect"
	"strings"
	"testing"
	"time"

	"github.com/mcp-changeset/changeset-go/ledger"
	"github.com/mcp-changeset/changeset-go/ledger/driver"
)

func exerciseChanges(t *testing.T, h Harness) {
	runAll(t, h, []test{
		{"FixtureSetsEveryField", testChangeFixture},
		{"RoundTripKeepsEveryField", testChangeRoundTrip},
		{"EachFieldHasItsOwnColumn", testChangeOwnColumns},
		{"EachFieldIsInTheColumnNamedForIt", testColumnNames},
		{"RoundTripKeepsNilAndEmptyApart", testChangeNilAndEmpty},
		{"TimesComeBackAsUTCMicroseconds", testChangeTimes},
		{"TextAndJSONAreStoredByteForByte", testChangeTextExact},
		{"InvalidTextIsRefusedOrKeptExactly", testChangeInvalidText},
		{"DuplicateIDIsRefused", testChangeDuplicate},
		{"UnknownRunIsRefused", testChangeUnknownRun},
		{"MissingChangeIsNotFound", testChangeNotFound},
		{"UpdateIsCompareAndSet", testChangeCompareAndSet},
		{"UpdateOfMissingChangeIsNotFound", testChangeUpdateMissing},
		{"ConstraintsRefuseInvalidRows", testChangeConstraints},
		{"ListFiltersNewestFirst", testChangeList},
		{"ListSearchesActionTextAndTime", testChangeSearch},
		{"SearchTextIsLiteralInEveryCaseAndAlphabet", testSearchEdges},
		{"ShortSearchTextSearchesTheNewestChangesOnly", testSearchShortText},
		{"MergedPagesMatchThePlainList", testSearchMergedPages},
		{"FilterByActorFollowsEveryChangeOfAnActor", testSearchActorsFollowUpdates},
		{"StatusFiltersOfEveryMix", testChangeStatusFilters},
		{"TallyByActionAndStatus", testChangeTally},
		{"ListAndCountFilterByScopeAndDependency", testChangeScopeAndCount},
		{"DependsOnFindsEachChangeOnceAndForgetsDeletedOnes", testChangeDependsOn},
		{"PagingVisitsEveryChangeOnceNewestFirst", testChangePaging},
		{"DeleteOnlyInGivenStatuses", testChangeDelete},
		{"DeleteManyAtOnce", testChangeDeleteMany},
	})
}

// testChangeFixture fails when ledger.Change gains a field that fullChange
// leaves zero, so that no round trip of a backend can miss the new column.
func testChangeFixture(t *testing.T, h Harness) {
	c := fullChange("chg_full", t0)
	c.RunID = "run_1" // set by the tests that store a run first
	checkEveryFieldSet(t, *c, "fullChange")
}

func testChangeRoundTrip(t *testing.T, h Harness) {
	ctx := context.Background()
	l, _ := open(t, h)
	insertRuns(t, l, "run_1")
	c := fullChange("chg_full", t0)
	c.RunID = "run_1"
	insertChanges(t, l, c)
	if got := mustGet(t, l, c.ID); !reflect.DeepEqual(got, stored(c)) {
		t.Errorf("round trip:\n got %#v\nwant %#v", got, stored(c))
	}
	// The same row read inside a write transaction and through a list.
	err := l.WithTx(ctx, func(tx *ledger.Tx) error {
		got, err := tx.Change(c.ID)
		if err == nil && !reflect.DeepEqual(got, stored(c)) {
			t.Errorf("read in a transaction:\n got %#v\nwant %#v", got, stored(c))
		}
		return err
	})
	if err != nil {
		t.Fatal(err)
	}
	cs, err := l.Changes(ctx, ledger.ChangeFilter{RunID: "run_1"})
	if err != nil || len(cs) != 1 || !reflect.DeepEqual(cs[0], stored(c)) {
		t.Errorf("Changes = %#v, %v", cs, err)
	}
}

func testChangeNilAndEmpty(t *testing.T, h Harness) {
	l, _ := open(t, h)
	empty := &ledger.Change{ID: "chg_empty", Action: "a", Status: ledger.Pending,
		Payload: json.RawMessage{}, Diff: json.RawMessage{}, Before: json.RawMessage{}, After: json.RawMessage{}, UndoFound: json.RawMessage{},
		Result: json.RawMessage{}, Warnings: []string{}, RedactFields: []string{}, CreatedAt: t0, UpdatedAt: t0}
	bare := &ledger.Change{ID: "chg_bare", Action: "a", Status: ledger.Pending, CreatedAt: t0, UpdatedAt: t0}
	insertChanges(t, l, empty, bare)
	for _, want := range []*ledger.Change{empty, bare} {
		if got := mustGet(t, l, want.ID); !reflect.DeepEqual(got, want) {
			t.Errorf("round trip of %s:\n got %#v\nwant %#v", want.ID, got, want)
		}
	}
	got := mustGet(t, l, "chg_empty")
	if got.Payload == nil || got.Result == nil || got.Warnings == nil || got.RedactFields == nil {
		t.Errorf("empty values came back nil: payload %#v result %#v warnings %#v redact %#v", got.Payload, got.Result, got.Warnings, got.RedactFields)
	}
	got = mustGet(t, l, "chg_bare")
	if got.Payload != nil || got.Result != nil || got.Warnings != nil || got.RedactFields != nil || !got.ExpiresAt.IsZero() {
		t.Errorf("nil values came back set: payload %#v result %#v warnings %#v expires %v", got.Payload, got.Result, got.Warnings, got.ExpiresAt)
	}
}

func testChangeTimes(t *testing.T, h Harness) {
	l, _ := open(t, h)
	local := time.Date(2025, 1, 2, 3, 4, 5, 999999999, time.FixedZone("X", -7*3600))
	old := time.Date(1960, 5, 6, 7, 8, 9, 1000, time.UTC) // before 1970
	far := time.Date(2999, 12, 31, 23, 59, 59, 999999000, time.UTC)
	c := pendingChange("chg_t", local)
	c.UpdatedAt, c.ExpiresAt, c.UndoneAt = old, far, local.Add(-time.Nanosecond)
	insertChanges(t, l, c)
	got := mustGet(t, l, "chg_t")
	for _, tc := range []struct {
		name      string
		got, want time.Time
	}{
		{"CreatedAt", got.CreatedAt, time.Date(2025, 1, 2, 10, 4, 5, 999999000, time.UTC)},
		{"UpdatedAt", got.UpdatedAt, old},
		{"ExpiresAt", got.ExpiresAt, far},
		{"UndoneAt", got.UndoneAt, time.Date(2025, 1, 2, 10, 4, 5, 999999000, time.UTC)},
	} {
		if !tc.got.Equal(tc.want) || tc.got.Location() != time.UTC {
			t.Errorf("%s = %v, want %v in UTC", tc.name, tc.got, tc.want)
		}
	}
}

func testChangeTextExact(t *testing.T, h Harness) {
	l, _ := open(t, h)
	c := pendingChange("chg_text", t0)
	c.Summary = "émoji 😀, bidi \u202ereversed\u202c, combining e\u0301, CJK 漢字, tab\tnewline\nCR\r end"
	c.Note = `quotes ' " and \backslash\, SQL '; DROP TABLE changes; --, placeholders $1 ? %s :name`
	c.Error = strings.Repeat("long text ", 10000) // 100 kB
	c.Resource = "note:日本語.txt"
	// Stored JSON is text, never re-encoded: key order, spacing and
	// escapes come back as they went in.
	c.Payload = json.RawMessage(`{"z":1,"a":{"y":[1,2.50,"\u0000\ud83d\ude00"]}, "big":1e400 }`)
	c.Diff = json.RawMessage(`[{"field":"b","before":null,"after":"x"},{"field":"a"}]`)
	c.Warnings = []string{"", "line\nbreak", "\u2028 separator", "😀"}
	insertChanges(t, l, c)
	if got := mustGet(t, l, c.ID); !reflect.DeepEqual(got, stored(c)) {
		t.Errorf("text not kept exactly:\n got %q %q %q\nwant %q %q %q", got.Summary, got.Payload, got.Warnings, c.Summary, c.Payload, c.Warnings)
	}
}

func testChangeInvalidText(t *testing.T, h Harness) {
	// A backend may refuse text that is not valid UTF-8 or holds NUL
	// bytes (PostgreSQL does), but must never store it altered.
	ctx := context.Background()
	l, _ := open(t, h)
	for i, bad := range []string{"nul \x00 byte", "invalid \xff\xfe utf-8", "lone surrogate \xed\xa0\x80"} {
		c := pendingChange(fmt.Sprintf("chg_bad%d", i), t0)
		c.Summary, c.Error = bad, bad
		err := driver.BackendOf(l).InsertChange(ctx, l.DB(), c)
		got, gerr := l.Change(ctx, c.ID)
		switch {
		case err != nil && !errors.Is(gerr, ledger.ErrNotFound):
			t.Errorf("%q: insert failed (%v) but left a row (%v)", bad, err, gerr)
		case err == nil && gerr != nil:
			t.Errorf("%q: inserted, then get failed: %v", bad, gerr)
		case err == nil && (got.Summary != bad || got.Error != bad):
			t.Errorf("%q: stored altered as %q, %q", bad, got.Summary, got.Error)
		}
		// The same for an update of an existing row.
		ok := pendingChange(fmt.Sprintf("chg_ok%d", i), t0)
		insertChanges(t, l, ok)
		next := ok.Clone()
		next.Error = bad
		err = driver.BackendOf(l).UpdateChange(ctx, l.DB(), next, ledger.Pending)
		got = mustGet(t, l, ok.ID)
		switch {
		case err != nil && got.Error != "":
			t.Errorf("%q: update failed (%v) but changed the row to %q", bad, err, got.Error)
		case err == nil && got.Error != bad:
			t.Errorf("%q: update stored %q", bad, got.Error)
		}
	}
}

func testChangeDuplicate(t *testing.T, h Harness) {
	ctx := context.Background()
	l, _ := open(t, h)
	c := pendingChange("chg_dup", t0)
	insertChanges(t, l, c)
	again := pendingChange("chg_dup", sec(5))
	again.Action = "other"
	err := driver.BackendOf(l).InsertChange(ctx, l.DB(), again)
	if err == nil {
		t.Fatal("inserting a duplicate ID succeeded")
	}
	var le *ledger.Error
	if !errors.As(err, &le) || errors.Is(err, ledger.ErrNotFound) || errors.Is(err, ledger.ErrConflict) || !strings.Contains(err.Error(), "chg_dup") {
		t.Errorf("duplicate insert: %v; want a *ledger.Error naming the change, neither not-found nor conflict", err)
	}
	// Inside a transaction too, and the transaction rolls back.
	err = l.WithTx(ctx, func(tx *ledger.Tx) error { return tx.InsertChange(again) })
	if err == nil {
		t.Error("inserting a duplicate ID in a transaction succeeded")
	}
	if got := mustGet(t, l, "chg_dup"); !reflect.DeepEqual(got, stored(c)) {
		t.Errorf("the first row changed: %#v", got)
	}
}

func testChangeUnknownRun(t *testing.T, h Harness) {
	ctx := context.Background()
	l, _ := open(t, h)
	c := pendingChange("chg_orphan", t0)
	c.RunID = "run_missing"
	if err := driver.BackendOf(l).InsertChange(ctx, l.DB(), c); err == nil {
		t.Error("inserting a change of a missing run succeeded")
	}
	if _, err := l.Change(ctx, c.ID); !errors.Is(err, ledger.ErrNotFound) {
		t.Errorf("after the refused insert: %v, want not found", err)
	}
}

func testChangeNotFound(t *testing.T, h Harness) {
	ctx := context.Background()
	l, _ := open(t, h)
	check := func(where string, err error) {
		t.Helper()
		var le *ledger.Error
		if !errors.Is(err, ledger.ErrNotFound) || !errors.As(err, &le) || !strings.Contains(err.Error(), "chg_none") {
			t.Errorf("%s: %v; want a *ledger.Error wrapping ErrNotFound and naming the change", where, err)
		}
	}
	_, err := l.Change(ctx, "chg_none")
	check("Get", err)
	err = l.WithTx(ctx, func(tx *ledger.Tx) error {
		_, err := tx.Change("chg_none")
		return err
	})
	check("Tx.Change", err)
}

func testChangeCompareAndSet(t *testing.T, h Harness) {
	ctx := context.Background()
	l, _ := open(t, h)
	insertRuns(t, l, "run_a", "run_b")
	c := pendingChange("chg_1", t0)
	c.RunID = "run_a"
	insertChanges(t, l, c)

	next := fullChange("chg_1", sec(50))
	next.Status = ledger.Applying
	// Fixed at preview, so never written by an update:
	next.Action, next.ScopeHash, next.RunID, next.DependsOn, next.PreviewedBy, next.Resources = "changed", "changed", "run_b", []string{"changed"}, "agent:changed", []string{"changed"}
	err := driver.BackendOf(l).UpdateChange(ctx, l.DB(), next, ledger.Applied)
	if !errors.Is(err, ledger.ErrConflict) || !strings.Contains(err.Error(), "applied") || !strings.Contains(err.Error(), "pending") {
		t.Fatalf("update from the wrong status: %v; want ErrConflict naming both statuses", err)
	}
	if got := mustGet(t, l, "chg_1"); !reflect.DeepEqual(got, stored(c)) {
		t.Fatalf("a refused update changed the row: %#v", got)
	}
	err = l.WithTx(ctx, func(tx *ledger.Tx) error { return tx.UpdateChange(next, ledger.Pending) })
	if err != nil {
		t.Fatal(err)
	}
	want := stored(next)
	want.Action, want.ScopeHash, want.RunID, want.CreatedAt, want.DependsOn, want.PreviewedBy, want.Resources = c.Action, c.ScopeHash, c.RunID, c.CreatedAt, c.DependsOn, c.PreviewedBy, c.Resources
	if got := mustGet(t, l, "chg_1"); !reflect.DeepEqual(got, want) {
		t.Errorf("after update:\n got %#v\nwant %#v", got, want)
	}
	if err := driver.BackendOf(l).UpdateChange(ctx, l.DB(), next, ledger.Pending); !errors.Is(err, ledger.ErrConflict) {
		t.Errorf("second update from pending: %v, want ErrConflict", err)
	}
	err = l.WithTx(ctx, func(tx *ledger.Tx) error { return tx.UpdateChange(next, ledger.Pending) })
	if !errors.Is(err, ledger.ErrConflict) {
		t.Errorf("second update from pending in a transaction: %v, want ErrConflict", err)
	}
}

func testChangeUpdateMissing(t *testing.T, h Harness) {
	ctx := context.Background()
	l, _ := open(t, h)
	gone := pendingChange("chg_gone", t0)
	err := driver.BackendOf(l).UpdateChange(ctx, l.DB(), gone, ledger.Pending)
	var le *ledger.Error
	if !errors.Is(err, ledger.ErrNotFound) || errors.Is(err, ledger.ErrConflict) || !errors.As(err, &le) {
		t.Errorf("update of a missing change: %v, want a *ledger.Error wrapping ErrNotFound", err)
	}
	gone.Status = ledger.Applying // a move the state machine allows
	err = l.WithTx(ctx, func(tx *ledger.Tx) error { return tx.UpdateChange(gone, ledger.Pending) })
	if !errors.Is(err, ledger.ErrNotFound) {
		t.Errorf("update of a missing change in a transaction: %v, want ErrNotFound", err)
	}
}

func testChangeConstraints(t *testing.T, h Harness) {
	ctx := context.Background()
	l, _ := open(t, h)
	b := driver.BackendOf(l)
	for _, bad := range []*ledger.Change{
		{ID: "chg_status", Action: "a", Status: "bogus", CreatedAt: t0, UpdatedAt: t0},
		{ID: "", Action: "a", Status: ledger.Pending, CreatedAt: t0, UpdatedAt: t0},
		{ID: "chg_noapplytime", Action: "a", Status: ledger.Applied, CreatedAt: t0, UpdatedAt: t0},
		{ID: "chg_failure", Action: "a", Status: ledger.ApplyFailed, Failure: "bogus", CreatedAt: t0, UpdatedAt: t0},
	} {
		if err := b.InsertChange(ctx, l.DB(), bad); err == nil {
			t.Errorf("inserted an invalid change: %+v", bad)
		}
	}
	c := pendingChange("chg_1", t0)
	insertChanges(t, l, c)
	for _, mutate := range []func(*ledger.Change){
		func(c *ledger.Change) { c.Status = "bogus" },
		func(c *ledger.Change) { c.Status, c.AppliedAt = ledger.Applied, time.Time{} },
		func(c *ledger.Change) { c.Status, c.Failure = ledger.ApplyFailed, "Error" },
	} {
		next := c.Clone()
		mutate(next)
		if err := b.UpdateChange(ctx, l.DB(), next, ledger.Pending); err == nil {
			t.Errorf("update to an invalid row succeeded: status %q applied at %v", next.Status, next.AppliedAt)
		}
	}
	if got := mustGet(t, l, "chg_1"); !reflect.DeepEqual(got, stored(c)) {
		t.Errorf("refused updates changed the row: %#v", got)
	}
	cs, err := l.Changes(ctx, ledger.ChangeFilter{})
	if err != nil || len(cs) != 1 {
		t.Errorf("after refused inserts: %d changes, %v; want 1", len(cs), err)
	}
}

func testChangeList(t *testing.T, h Harness) {
	l, _ := open(t, h)
	insertRuns(t, l, "run_a", "run_b")
	add := func(id string, st ledger.Status, run string, created, updated time.Time) {
		c := pendingChange(id, created)
		c.Status, c.RunID, c.UpdatedAt = st, run, updated
		if st == ledger.Applied {
			c.AppliedAt = updated
		}
		insertChanges(t, l, c)
	}
	add("chg_1", ledger.Pending, "", sec(1), sec(1))
	add("chg_2", ledger.Applied, "run_a", sec(2), sec(10))
	add("chg_3", ledger.Expired, "run_a", sec(3), sec(3))
	// Created in the same microsecond, and stored in neither order: the
	// larger ID, byte by byte, comes first ('_' sorts after 'B' and
	// before 'a', whatever the database's collation says).
	add("chg_4a", ledger.Undone, "", sec(4), sec(20))
	add("chg_4B", ledger.Undone, "", sec(4), sec(20))
	add("chg_4b", ledger.Applied, "run_b", sec(4), sec(4))
	add("chg_4_", ledger.Undone, "", sec(4), sec(20))

	for _, tc := range []struct {
		f    ledger.ChangeFilter
		want string
	}{
		{ledger.ChangeFilter{}, "chg_4b chg_4a chg_4_ chg_4B chg_3 chg_2 chg_1"},
		{ledger.ChangeFilter{Limit: 2}, "chg_4b chg_4a"},
		{ledger.ChangeFilter{Limit: 100}, "chg_4b chg_4a chg_4_ chg_4B chg_3 chg_2 chg_1"},
		{ledger.ChangeFilter{Statuses: []ledger.Status{ledger.Applied}}, "chg_4b chg_2"},
		{ledger.ChangeFilter{Statuses: []ledger.Status{ledger.Applied, ledger.Pending}}, "chg_4b chg_2 chg_1"},
		{ledger.ChangeFilter{Statuses: []ledger.Status{ledger.Applying}}, ""},
		{ledger.ChangeFilter{RunID: "run_a"}, "chg_3 chg_2"},
		{ledger.ChangeFilter{RunID: "run_a", Statuses: []ledger.Status{ledger.Expired}}, "chg_3"},
		{ledger.ChangeFilter{RunID: "run_none"}, ""},
		// Strictly before, also when the cut-off has nanoseconds that
		// stored times lack.
		{ledger.ChangeFilter{UpdatedBefore: sec(4)}, "chg_3 chg_1"},
		{ledger.ChangeFilter{UpdatedBefore: sec(4).Add(time.Nanosecond)}, "chg_4b chg_3 chg_1"},
		{ledger.ChangeFilter{UpdatedBefore: sec(4).Add(-time.Nanosecond)}, "chg_3 chg_1"},
		{ledger.ChangeFilter{UpdatedBefore: sec(100), Statuses: []ledger.Status{ledger.Undone}, Limit: 2}, "chg_4a chg_4_"},
	} {
		if got := strings.Join(changeIDs(t, l, tc.f), " "); got != tc.want {
			t.Errorf("Changes(%+v) = %q, want %q", tc.f, got, tc.want)
		}
	}
	if got := changeIDs(t, l, ledger.ChangeFilter{RunID: "run_none"}); len(got) != 0 {
		t.Errorf("empty result: %v", got)
	}
}

// testChangeSearch: the filters behind the dashboard's search and the
// CLI's --action and --since. Text matches summary, action or resource,
// ignoring ASCII case, literally (LIKE's wildcards are plain characters).
func testChangeSearch(t *testing.T, h Harness) {
	l, _ := open(t, h)
	add := func(id, action, summary, resource string, updated time.Time) {
		c := pendingChange(id, sec(1))
		c.Action, c.Summary, c.Resource, c.UpdatedAt = action, summary, resource, updated
		insertChanges(t, l, c)
	}
	add("chg_1", "set_setting", "Set theme to dark", "setting:theme", sec(1))
	add("chg_2", "write_note", "Write TODO.txt (100% done)", "note:todo.txt", sec(5))
	add("chg_3", "delete_note", "Delete a_b.txt", "note:a_b.txt", sec(9))
	add("chg_4", "set_setting", `Set path to C:\tmp`, "", sec(10))
	for _, tc := range []struct {
		f    ledger.ChangeFilter
		want string
	}{
		{ledger.ChangeFilter{Action: "set_setting"}, "chg_4 chg_1"},
		{ledger.ChangeFilter{Action: "set"}, ""},
		{ledger.ChangeFilter{Text: "THEME"}, "chg_1"},
		{ledger.ChangeFilter{Text: "note"}, "chg_3 chg_2"},          // action and resource
		{ledger.ChangeFilter{Text: "todo.txt"}, "chg_2"},            // summary and resource
		{ledger.ChangeFilter{Text: "100%"}, "chg_2"},                // % is literal
		{ledger.ChangeFilter{Text: "%"}, "chg_2"},                   // not "anything"
		{ledger.ChangeFilter{Text: "a_b"}, "chg_3"},                 // _ is literal
		{ledger.ChangeFilter{Text: "_"}, "chg_4 chg_3 chg_2 chg_1"}, // every action has one
		{ledger.ChangeFilter{Text: `C:\tmp`}, "chg_4"},              // so is the escape character
		{ledger.ChangeFilter{Text: `\`}, "chg_4"},
		{ledger.ChangeFilter{Text: "' OR 1=1 --"}, ""},
		{ledger.ChangeFilter{UpdatedSince: sec(5)}, "chg_4 chg_3 chg_2"},
		{ledger.ChangeFilter{UpdatedSince: sec(5).Add(time.Nanosecond)}, "chg_4 chg_3"},
		{ledger.ChangeFilter{UpdatedSince: sec(5), Action: "set_setting"}, "chg_4"},
		{ledger.ChangeFilter{UpdatedSince: sec(2), UpdatedBefore: sec(10), Text: "note"}, "chg_3 chg_2"},
	} {
		if got := strings.Join(changeIDs(t, l, tc.f), " "); got != tc.want {
			t.Errorf("Changes(%+v) = %q, want %q", tc.f, got, tc.want)
		}
	}
	if _, err := l.Changes(context.Background(), ledger.ChangeFilter{Text: strings.Repeat("x", ledger.MaxFilterText+1)}); err == nil {
		t.Error("a search text over MaxFilterText was accepted")
	}
	if _, err := l.Changes(context.Background(), ledger.ChangeFilter{DependsOnAny: make([]string, ledger.MaxDependsOnAny+1)}); err == nil {
		t.Error("more than MaxDependsOnAny resources were accepted")
	}
}

// testChangeStatusFilters lists and counts by every set of statuses a
// caller passes: in-flight and failed ones only (which SQLite reads from
// its partial index), at-rest ones only, and mixes of both, with a scope
// and a page size.
func testChangeStatusFilters(t *testing.T, h Harness) {
	ctx := context.Background()
	l, _ := open(t, h)
	for i, st := range ledger.Statuses {
		c := pendingChange(fmt.Sprintf("chg_%d", i), sec(i+1))
		c.Status = st
		if st == ledger.Applied {
			c.AppliedAt = sec(i + 1)
		}
		if i%2 == 1 {
			c.ScopeHash = "t"
		}
		insertChanges(t, l, c)
	}
	// Statuses: 0 pending, 1 expired, 2 applying, 3 applied,
	// 4 apply_failed, 5 undoing, 6 undone, 7 undo_failed; odd ones in
	// scope t.
	S := func(ss ...ledger.Status) []ledger.Status { return ss }
	for _, tc := range []struct {
		f    ledger.ChangeFilter
		want string
	}{
		{ledger.ChangeFilter{Statuses: S(ledger.Pending)}, "chg_0"},
		{ledger.ChangeFilter{Statuses: S(ledger.Applying, ledger.Undoing)}, "chg_5 chg_2"},
		{ledger.ChangeFilter{Statuses: S(ledger.ApplyFailed, ledger.UndoFailed, ledger.Pending)}, "chg_7 chg_4 chg_0"},
		{ledger.ChangeFilter{Statuses: S(ledger.ApplyFailed, ledger.UndoFailed), ScopeHash: "t"}, "chg_7"},
		{ledger.ChangeFilter{Statuses: S(ledger.Applied)}, "chg_3"},
		{ledger.ChangeFilter{Statuses: S(ledger.Expired, ledger.Undone)}, "chg_6 chg_1"},
		{ledger.ChangeFilter{Statuses: S(ledger.Applied, ledger.ApplyFailed)}, "chg_4 chg_3"},
		{ledger.ChangeFilter{Statuses: S(ledger.Undone, ledger.Undoing, ledger.UndoFailed), Limit: 2}, "chg_7 chg_6"},
		{ledger.ChangeFilter{Statuses: ledger.Statuses, ScopeHash: "t"}, "chg_7 chg_5 chg_3 chg_1"},
	} {
		if got := strings.Join(changeIDs(t, l, tc.f), " "); got != tc.want {
			t.Errorf("Changes(%v) = %q, want %q", tc.f.Statuses, got, tc.want)
		}
		tc.f.Limit = 0
		n, err := driver.BackendOf(l).CountChanges(ctx, l.DB(), tc.f)
		if want := len(changeIDs(t, l, tc.f)); err != nil || n != want {
			t.Errorf("CountChanges(%v) = %d, %v; want %d", tc.f.Statuses, n, err, want)
		}
	}
}

// testChangeTally: counts by action and status, with the newest update of
// each group, for the changes a filter selects.
func testChangeTally(t *testing.T, h Harness) {
	ctx := context.Background()
	l, _ := open(t, h)
	insertRuns(t, l, "run_a", "run_b")
	add := func(id, action string, st ledger.Status, run string, updated time.Time) {
		c := pendingChange(id, sec(1))
		c.Action, c.Status, c.RunID, c.UpdatedAt = action, st, run, updated
		if st == ledger.Applied {
			c.AppliedAt = updated
		}
		insertChanges(t, l, c)
	}
	add("chg_1", "set", ledger.Applied, "run_a", sec(3))
	add("chg_2", "set", ledger.Applied, "run_a", sec(7))
	add("chg_3", "set", ledger.Pending, "run_a", sec(2))
	add("chg_4", "delete", ledger.Applied, "run_a", sec(5))
	add("chg_5", "set", ledger.Applied, "run_b", sec(9))
	show := func(ts []ledger.Tally) string {
		var parts []string
		for _, t := range ts {
			parts = append(parts, fmt.Sprintf("%s/%s=%d@%d", t.Action, t.Status, t.N, t.Updated.Unix()-sec(0).Unix()))
		}
		return strings.Join(parts, " ")
	}
	for _, tc := range []struct {
		f    ledger.ChangeFilter
		want string
	}{
		{ledger.ChangeFilter{RunID: "run_a"}, "delete/applied=1@5 set/applied=2@7 set/pending=1@2"},
		{ledger.ChangeFilter{RunID: "run_b"}, "set/applied=1@9"},
		{ledger.ChangeFilter{Statuses: []ledger.Status{ledger.Applied}}, "delete/applied=1@5 set/applied=3@9"},
		{ledger.ChangeFilter{RunID: "run_none"}, ""},
		{ledger.ChangeFilter{RunID: "run_a", Limit: 1}, "delete/applied=1@5 set/applied=2@7 set/pending=1@2"}, // Limit ignored
	} {
		got, err := l.TallyChanges(ctx, tc.f)
		if err != nil {
			t.Fatal(err)
		}
		if s := show(got); s != tc.want {
			t.Errorf("TallyChanges(%+v) = %q, want %q", tc.f, s, tc.want)
		}
	}
	if _, err := l.TallyChanges(ctx, ledger.ChangeFilter{Text: strings.Repeat("x", ledger.MaxFilterText+1)}); err == nil {
		t.Error("a search text over MaxFilterText was accepted")
	}
}

func testChangeDelete(t *testing.T, h Harness) {
	ctx := context.Background()
	l, _ := open(t, h)
	b := driver.BackendOf(l)
	insertRuns(t, l, "run_a")
	for i, st := range []ledger.Status{ledger.Pending, ledger.Applied, ledger.Expired, ledger.Undone} {
		c := pendingChange(fmt.Sprintf("chg_%d", i+1), sec(i))
		c.Status, c.AppliedAt, c.RunID = st, sec(i), "run_a"
		insertChanges(t, l, c)
	}
	n, _, err := b.DeleteChanges(ctx, l.DB(), []string{"chg_1", "chg_2", "chg_3", "chg_missing"}, []ledger.Status{ledger.Expired, ledger.Pending})
	if err != nil || n != 2 {
		t.Fatalf("DeleteChanges = %d, %v; want 2", n, err)
	}
	if got := strings.Join(changeIDs(t, l, ledger.ChangeFilter{}), " "); got != "chg_4 chg_2" {
		t.Errorf("after delete: %q, want the applied and the undone change", got)
	}
	for _, tc := range []struct {
		ids      []string
		statuses []ledger.Status
	}{
		{[]string{"chg_2", "chg_4"}, nil},
		{nil, []ledger.Status{ledger.Applied}},
		{[]string{}, []ledger.Status{ledger.Applied}},
		{[]string{"chg_2"}, []ledger.Status{ledger.Undone}},
	} {
		if n, _, err := b.DeleteChanges(ctx, l.DB(), tc.ids, tc.statuses); n != 0 || err != nil {
			t.Errorf("DeleteChanges(%v, %v) = %d, %v; want 0", tc.ids, tc.statuses, n, err)
		}
	}
	err = l.WithTx(ctx, func(tx *ledger.Tx) error {
		n, _, err := b.DeleteChanges(ctx, tx.SQL(), []string{"chg_2", "chg_4"}, []ledger.Status{ledger.Applied, ledger.Undone})
		if err == nil && n != 2 {
			t.Errorf("DeleteChanges in a transaction = %d, want 2", n)
		}
		return err
	})
	if err != nil {
		t.Fatal(err)
	}
	if got := changeIDs(t, l, ledger.ChangeFilter{}); len(got) != 0 {
		t.Errorf("left: %v", got)
	}
}

func testChangeDeleteMany(t *testing.T, h Harness) {
	ctx := context.Background()
	l, _ := open(t, h)
	var ids []string
	err := l.WithTx(ctx, func(tx *ledger.Tx) error {
		for i := range 1234 {
			id := fmt.Sprintf("chg_%05d", i)
			ids = append(ids, id)
			if err := tx.InsertChange(pendingChange(id, t0)); err != nil {
				return err
			}
		}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	n, _, err := driver.BackendOf(l).DeleteChanges(ctx, l.DB(), ids, []ledger.Status{ledger.Pending})
	if err != nil || n != len(ids) {
		t.Fatalf("DeleteChanges = %d, %v; want %d", n, err, len(ids))
	}
}
