package sqlite

import (
	"context"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/mcp-changeset/changeset-go/ledger"
)

// TestQueryPlans_EveryHotOrPagedQueryUsesItsIndex asks SQLite how it would
// run the ledger's own statements, as the backend builds them, and checks
// that each reads the index meant for it rather than the whole table. The
// pending quota must use the partial index changes_open, expiry, reconcile
// and the failure filters changes_open_created (ordered by creation, so
// that a page reads only its own rows); SQLite picks a partial index only
// when the statuses are spelled as literal terms (see sqlval.Where.In). A
// filter on a status at rest pages through changes_created.
func TestQueryPlans_EveryHotOrPagedQueryUsesItsIndex(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	b, err := Open(ctx, filepath.Join(t.TempDir(), "plan.db"), ledger.OpenOptions{Create: true, BusyTimeout: ledger.DefaultBusyTimeout})
	if err != nil {
		t.Fatal(err)
	}
	defer b.Close()
	now := time.Now()
	key := &ledger.ChangeKey{CreatedAt: now, ID: "chg_1"}
	pending := []ledger.Status{ledger.Pending}
	cases := []struct {
		name  string
		index string
		query func() (string, []any)
	}{
		{"the pending quota of a scope", "COVERING INDEX changes_open", func() (string, []any) {
			return countChangesQuery(ledger.ChangeFilter{ScopeHash: "s", Statuses: pending, ExpiresAfter: now})
		}},
		{"expiry: the pending changes", "changes_open_created", func() (string, []any) {
			return listChangesQuery(ledger.ChangeFilter{Statuses: pending}, false)
		}},
		{"expiry: a page of pending changes", "changes_open_created", func() (string, []any) {
			return listChangesQuery(ledger.ChangeFilter{Statuses: pending, Limit: 500, Before: key}, false)
		}},
		{"reconcile: the changes in flight", "changes_open_created", func() (string, []any) {
			return listChangesQuery(ledger.ChangeFilter{Statuses: []ledger.Status{ledger.Applying, ledger.Undoing}}, false)
		}},
		{"the failures, a page", "changes_open_created", func() (string, []any) {
			return listChangesQuery(ledger.ChangeFilter{Statuses: []ledger.Status{ledger.ApplyFailed, ledger.UndoFailed}, Limit: 50, Before: key}, false)
		}},
		{"the applied changes, a page", "changes_created", func() (string, []any) {
			return listChangesQuery(ledger.ChangeFilter{Statuses: []ledger.Status{ledger.Applied}, Limit: 50, Before: key}, false)
		}},
		{"every change, a page", "changes_created", func() (string, []any) {
			return listChangesQuery(ledger.ChangeFilter{Limit: 50, Before: key}, false)
		}},
		{"a run's changes, a page", "changes_run_created_id", func() (string, []any) {
			return listChangesQuery(ledger.ChangeFilter{RunID: "run_1", Limit: 50, Before: key}, false)
		}},
		{"changes updated since, a page", "changes_created", func() (string, []any) {
			return listChangesQuery(ledger.ChangeFilter{UpdatedSince: now, Limit: 50}, false)
		}},
		{"the dependents of resources", "change_deps_resource", func() (string, []any) {
			return listChangesQuery(ledger.ChangeFilter{DependsOnAny: []string{"a", "b"}}, false)
		}},
		{"a change's history", "ledger_history_change", func() (string, []any) {
			return listHistoryQuery(ledger.HistoryFilter{ChangeID: "chg_1", Limit: 50})
		}},
		{"a run's history", "ledger_history_run", func() (string, []any) {
			return listHistoryQuery(ledger.HistoryFilter{RunID: "run_1", After: 7, Limit: 50})
		}},
		{"the history since", "ledger_history_at", func() (string, []any) {
			return listHistoryQuery(ledger.HistoryFilter{Since: now, Limit: 50})
		}},
		{"the history since, by one actor", "ledger_history_at", func() (string, []any) {
			return listHistoryQuery(ledger.HistoryFilter{Since: now, By: "person:ann", Limit: 50})
		}},
		{"a session's open run", "runs_session", func() (string, []any) {
			return listRunsQuery(ledger.RunFilter{ScopeHash: "s", Kind: ledger.RunSession, SessionKey: "k", Statuses: []ledger.RunStatus{ledger.RunOpen}, Limit: 1})
		}},
		{"the runs, a page", "runs_created", func() (string, []any) {
			return listRunsQuery(ledger.RunFilter{Limit: 50, Before: key})
		}},
		{"one agent's runs, a page", "runs_started_by", func() (string, []any) {
			return listRunsQuery(ledger.RunFilter{StartedBy: "agent:ana", Limit: 50, Before: key})
		}},
	}
	// The test of sorting must see a sort where there is one.
	if !sorts(t, b, "SELECT id FROM changes WHERE action = ? ORDER BY updated_at LIMIT 5", []any{"a"}) {
		t.Error("sorts does not see the sort of a read of changes")
	}
	for _, tc := range cases {
		query, args := tc.query()
		plan := queryPlan(t, b, query, args)
		if !strings.Contains(plan+" ", " "+tc.index+" ") {
			t.Errorf("%s: plan does not use %s:\n%s\nquery: %s", tc.name, tc.index, plan, query)
		}
		if line := wholeTable(plan); line != "" {
			t.Errorf("%s: plan reads a whole table (%s):\n%s", tc.name, line, plan)
		}
		if strings.Contains(query, " LIMIT ") && sorts(t, b, query, args) { // a list of every match may sort it
			t.Errorf("%s: plan sorts rows that an index could give in order:\n%s", tc.name, plan)
		}
	}
}

// wholeTable returns the first line of plan that reads a table without an
// index, or "". The subqueries of a merged page (b0, b1, …, page) hold at
// most a page each, the full-text table is read through its index, and
// its watermark is one row.
func wholeTable(plan string) string {
	for _, line := range strings.Split(plan, "\n") {
		name, _, _ := strings.Cut(strings.TrimPrefix(line, "SCAN "), " ")
		switch {
		case !strings.HasPrefix(line, "SCAN "), strings.Contains(line, " USING "):
		case name == "page", strings.HasPrefix(name, "b") && strings.Trim(name[1:], "0123456789") == "":
		case name == "changes_text" && strings.Contains(line, "VIRTUAL TABLE"):
		case name == "changes_text_tail": // one row, the index's watermark
		default:
			return line
		}
	}
	return ""
}

// sorts reports whether the plan of query sorts the rows of a read of
// changes itself (a temporary b-tree right after that read, in the same
// query), rather than the rows of a merged page's branches or of a page
// read from change_actors, which hold at most a page each.
func sorts(t *testing.T, b *Backend, query string, args []any) bool {
	t.Helper()
	rows := queryPlanRows(t, b, query, args)
	for i, r := range rows {
		if !strings.HasPrefix(r.detail, "USE TEMP B-TREE FOR ORDER BY") {
			continue
		}
		for j := i - 1; j >= 0; j-- {
			if rows[j].parent == r.parent {
				if strings.Contains(rows[j].detail, " changes USING ") {
					return true
				}
				break
			}
		}
	}
	return false
}

// planRow is one step of a query plan: its ID, its parent's and what it
// does.
type planRow struct {
	id, parent int
	detail     string
}

// queryPlan is SQLite's EXPLAIN QUERY PLAN of query, a line per step.
func queryPlan(t *testing.T, b *Backend, query string, args []any) string {
	t.Helper()
	var lines []string
	for _, r := range queryPlanRows(t, b, query, args) {
		lines = append(lines, r.detail)
	}
	return strings.Join(lines, "\n")
}

// queryPlanRows is SQLite's EXPLAIN QUERY PLAN of query, a row per step.
func queryPlanRows(t *testing.T, b *Backend, query string, args []any) []planRow {
	t.Helper()
	rows, err := b.DB().Query("EXPLAIN QUERY PLAN "+query, args...)
	if err != nil {
		t.Fatalf("explain %s: %v", query, err)
	}
	defer rows.Close()
	var out []planRow
	for rows.Next() {
		var r planRow
		var unused int
		if err := rows.Scan(&r.id, &r.parent, &unused, &r.detail); err != nil {
			t.Fatal(err)
		}
		out = append(out, r)
	}
	if err := rows.Err(); err != nil {
		t.Fatal(err)
	}
	return out
}

// filterAtom is one filter the dashboard, the CLI or a tool may set, with
// the indexes that serve it on its own (none for a filter that most
// changes pass, which the list serves by reading changes_created newest
// first until the page is full).
type filterAtom struct {
	name    string
	kind    string // atoms of one kind are never combined
	set     func(*ledger.ChangeFilter)
	indexes []string
	common  bool // a text found in many changes (ChangeTables.CommonText)
}

var filterAtoms = []filterAtom{
	{name: "status=apply_failed", kind: "status", set: func(f *ledger.ChangeFilter) { f.Statuses = []ledger.Status{ledger.ApplyFailed} }, indexes: []string{"changes_open_created"}},
	{name: "status=pending", kind: "status", set: func(f *ledger.ChangeFilter) { f.Statuses = []ledger.Status{ledger.Pending} }, indexes: []string{"changes_open_created"}},
	{name: "status=apply_failed,undo_failed", kind: "status", set: func(f *ledger.ChangeFilter) {
		f.Statuses = []ledger.Status{ledger.ApplyFailed, ledger.UndoFailed}
	}, indexes: []string{"changes_open_created"}},
	{name: "status=applying,undoing", kind: "status", set: func(f *ledger.ChangeFilter) {
		f.Statuses = []ledger.Status{ledger.Applying, ledger.Undoing}
	}, indexes: []string{"changes_open_created"}},
	{name: "status=applied", kind: "status", set: func(f *ledger.ChangeFilter) { f.Statuses = []ledger.Status{ledger.Applied} }},
	{name: "status=applied,undone", kind: "status", set: func(f *ledger.ChangeFilter) { f.Statuses = []ledger.Status{ledger.Applied, ledger.Undone} }},
	{name: "by", kind: "by", set: func(f *ledger.ChangeFilter) { f.By = "agent:kim" }, indexes: []string{"change_actors"}},
	{name: "action", kind: "action", set: func(f *ledger.ChangeFilter) { f.Action = "set_setting" }, indexes: []string{"changes_action"}},
	{name: "q=rare", kind: "text", set: func(f *ledger.ChangeFilter) { f.Text = "quarantine" }, indexes: []string{"changes_text"}},
	{name: "q=common", kind: "text", set: func(f *ledger.ChangeFilter) { f.Text = "feature" }, common: true},
	{name: "q=ab", kind: "text", set: func(f *ledger.ChangeFilter) { f.Text = "ab" }},
	{name: "since", kind: "since", set: func(f *ledger.ChangeFilter) { f.UpdatedSince = time.Now().Add(-time.Hour) }},
	{name: "run", kind: "run", set: func(f *ledger.ChangeFilter) { f.RunID = "run_1" }, indexes: []string{"changes_run_created_id"}},
}

// TestQueryPlans_EveryFilterAndCombinationReadsAnIndexInOrder builds the
// list of every filter the dashboard (q, action, status, by, since, run
// and its cursor), `mcp-changeset list` (--status with one or several
// statuses, --run, --by, --action, --since, --limit) and the ledger's own
// scans (expiry, reconcile, check) send, alone and in every combination
// of up to three, a page at a time from a cursor and from the top, and
// checks SQLite's plan for each: no table is read whole, a filter with an
// index of its own is read through one of its indexes (a filter by actor
// through its range of change_actors), and no read of changes
// is sorted, so that a page reads its own rows however large the ledger.
// A page of a common text is the one exception by design: it reads
// changes_created newest first and tests each change against the
// full-text matches.
func TestQueryPlans_EveryFilterAndCombinationReadsAnIndexInOrder(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	b, err := Open(ctx, filepath.Join(t.TempDir(), "plan.db"), ledger.OpenOptions{Create: true, BusyTimeout: ledger.DefaultBusyTimeout})
	if err != nil {
		t.Fatal(err)
	}
	defer b.Close()
	key := &ledger.ChangeKey{CreatedAt: time.UnixMicro(time.Now().UnixMicro()), ID: "chg_1"}
	checked := 0
	var combine func(from int, chosen []filterAtom)
	combine = func(from int, chosen []filterAtom) {
		if len(chosen) > 0 {
			for _, before := range []*ledger.ChangeKey{nil, key} {
				checkListPlan(t, b, chosen, before)
				checked++
			}
		}
		if len(chosen) == 3 {
			return
		}
	next:
		for i := from; i < len(filterAtoms); i++ {
			for _, c := range chosen {
				if c.kind == filterAtoms[i].kind {
					continue next
				}
			}
			combine(i+1, append(chosen[:len(chosen):len(chosen)], filterAtoms[i]))
		}
	}
	combine(0, nil)
	if checked < 400 {
		t.Fatalf("only %d plans checked", checked)
	}
}

// checkListPlan checks the plan of a page of the filters atoms set (see
// TestQueryPlans_EveryFilterAndCombinationReadsAnIndexInOrder), and of
// their count.
func checkListPlan(t *testing.T, b *Backend, atoms []filterAtom, before *ledger.ChangeKey) {
	t.Helper()
	f := ledger.ChangeFilter{Limit: 51, Before: before}
	var names, want []string
	common := false
	for _, a := range atoms {
		a.set(&f)
		names = append(names, a.name)
		want = append(want, a.indexes...)
		common = common || a.common
	}
	name := strings.Join(names, " ")
	if before != nil {
		name += " before"
	}
	query, args := listChangesQuery(f, common)
	plan := queryPlan(t, b, query, args)
	if line := wholeTable(plan); line != "" {
		t.Errorf("%s: plan reads a whole table (%s):\n%s", name, line, plan)
	}
	sorted := sorts(t, b, query, args)
	if sorted && !strings.Contains(plan, "VIRTUAL TABLE") {
		t.Errorf("%s: plan sorts a read of changes:\n%s", name, plan)
	}
	if sorted && common {
		t.Errorf("%s: plan sorts the matches of a common text:\n%s", name, plan)
	}
	if len(want) > 0 {
		used := false
		for _, index := range want {
			used = used || strings.Contains(plan+"\n", " "+index+" ") || strings.Contains(plan+"\n", " "+index+"\n")
		}
		if !used || strings.Contains(plan, "SCAN changes ") && !strings.Contains(plan+"\n", "SCALAR SUBQUERY 1\nSCAN changes USING COVERING INDEX changes_created\n") {
			t.Errorf("%s: plan reads none of %v, or walks the whole list:\n%s", name, want, plan)
		}
	}
	if f.By != "" && !strings.Contains(plan, "SEARCH change_actors USING PRIMARY KEY (actor=?") {
		t.Errorf("%s: the page does not read the actor's range of change_actors:\n%s", name, plan)
	}
	if len(want) == 0 {
		return // counting what most changes pass reads most changes
	}
	f.Limit, f.Before = 0, nil
	query, args = countChangesQuery(f)
	plan = queryPlan(t, b, query, args)
	if line := wholeTable(plan); line != "" {
		t.Errorf("%s: the count reads a whole table (%s):\n%s", name, line, plan)
	}
}
