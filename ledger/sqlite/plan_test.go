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
// pending quota, expiry, reconcile and the failure filters must use the
// partial index changes_open, which SQLite picks only when the statuses
// are spelled as "status = ?" terms (see sqlval.Where.In); a filter on a
// status at rest pages through changes_created.
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
		{"expiry: the pending changes", "changes_open", func() (string, []any) {
			return listChangesQuery(ledger.ChangeFilter{Statuses: pending})
		}},
		{"reconcile: the changes in flight", "changes_open", func() (string, []any) {
			return listChangesQuery(ledger.ChangeFilter{Statuses: []ledger.Status{ledger.Applying, ledger.Undoing}})
		}},
		{"the failures, a page", "changes_open", func() (string, []any) {
			return listChangesQuery(ledger.ChangeFilter{Statuses: []ledger.Status{ledger.ApplyFailed, ledger.UndoFailed}, Limit: 50, Before: key})
		}},
		{"the applied changes, a page", "changes_created", func() (string, []any) {
			return listChangesQuery(ledger.ChangeFilter{Statuses: []ledger.Status{ledger.Applied}, Limit: 50, Before: key})
		}},
		{"every change, a page", "changes_created", func() (string, []any) {
			return listChangesQuery(ledger.ChangeFilter{Limit: 50, Before: key})
		}},
		{"a run's changes, a page", "changes_run_created_id", func() (string, []any) {
			return listChangesQuery(ledger.ChangeFilter{RunID: "run_1", Limit: 50, Before: key})
		}},
		{"changes updated since, a page", "changes_created", func() (string, []any) {
			return listChangesQuery(ledger.ChangeFilter{UpdatedSince: now, Limit: 50})
		}},
		{"the dependents of resources", "change_deps_resource", func() (string, []any) {
			return listChangesQuery(ledger.ChangeFilter{DependsOnAny: []string{"a", "b"}})
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
	}
	for _, tc := range cases {
		query, args := tc.query()
		plan := queryPlan(t, b, query, args)
		if !strings.Contains(plan+" ", " "+tc.index+" ") {
			t.Errorf("%s: plan does not use %s:\n%s\nquery: %s", tc.name, tc.index, plan, query)
		}
		for _, line := range strings.Split(plan, "\n") {
			if strings.HasPrefix(line, "SCAN ") && !strings.Contains(line, " USING ") {
				t.Errorf("%s: plan reads a whole table (%s):\n%s", tc.name, line, plan)
			}
		}
	}
}

// queryPlan is SQLite's EXPLAIN QUERY PLAN of query, a line per step.
func queryPlan(t *testing.T, b *Backend, query string, args []any) string {
	t.Helper()
	rows, err := b.DB().Query("EXPLAIN QUERY PLAN "+query, args...)
	if err != nil {
		t.Fatalf("explain %s: %v", query, err)
	}
	defer rows.Close()
	var lines []string
	for rows.Next() {
		var id, parent, unused int
		var detail string
		if err := rows.Scan(&id, &parent, &unused, &detail); err != nil {
			t.Fatal(err)
		}
		lines = append(lines, detail)
	}
	if err := rows.Err(); err != nil {
		t.Fatal(err)
	}
	return strings.Join(lines, "\n")
}
