package postgres_test

import (
	"database/sql"
	"strings"
	"testing"
	"time"

	"github.com/mcp-changeset/changeset-go/internal/pgtest"
	"github.com/mcp-changeset/changeset-go/ledger"
	"github.com/mcp-changeset/changeset-go/ledger/postgres"
)

// planLedgerSize is how many changes the plan test's ledger holds: enough
// for PostgreSQL's statistics to tell a common value from a rare one, so
// that its plans are those of a real ledger.
const planLedgerSize = 30000

// TestQueryPlans_EveryFilterReadsAnIndexNotTheTable fills a ledger with
// changes whose actors, actions, statuses and summaries mix common, rare
// and absent values (as changeset-bench's do), gathers statistics
// (ANALYZE), and asks PostgreSQL how it would run every list the
// dashboard, `mcp-changeset list` and the ledger's own scans send, alone
// and combined, a page at a time: no plan reads the changes table whole
// (a Seq Scan), and a page of a rare or absent value reads that value's
// index rather than walking changes_created newest first.
func TestQueryPlans_EveryFilterReadsAnIndexNotTheTable(t *testing.T) {
	dsn := pgtest.DSN(t)
	b := open(t, dsn, ledger.OpenOptions{Create: true})
	db := rawDB(t, dsn)
	// One change in 1000 has the rare values; 'absent' values none.
	mustExec(t, db, `INSERT INTO changes (id, action, status, scope_hash, summary, resource, payload,
			previewed_by, applied_by, undone_by, applied_at, created_at, updated_at, expires_at)
		SELECT 'chg_' || lpad(i::text, 20, '0'),
			CASE WHEN i % 1000 = 7 THEN 'rotate_signing_key' WHEN i % 3 = 0 THEN 'set_setting' ELSE 'update_ticket' END,
			(ARRAY['applied','applied','applied','undone','expired','apply_failed','pending','undo_failed','applied','undone'])[1 + i % 10],
			's',
			CASE WHEN i % 1000 = 7 THEN 'quarantine the host' ELSE 'set feature flag ' || (i % 97) END,
			'setting:flag' || (i % 50),
			repeat('x', 600),
			CASE WHEN i % 1000 = 11 THEN 'agent:auditor-kim' WHEN i % 3 = 0 THEN 'agent:ops-bot' ELSE 'agent:a' || (i % 20) END,
			CASE WHEN i % 2 = 0 THEN 'agent:ops-bot' ELSE '' END,
			CASE WHEN i % 10 IN (3, 7) THEN 'person:ann' ELSE '' END,
			1000000 + i, 1000000 + i * 1000, 1000000 + i * 1000, 1000000 + i * 1000 + 60000000
		FROM generate_series(1, $1) AS i`, planLedgerSize)
	mustExec(t, db, `ANALYZE changes`)

	// A status range of either index is read: PostgreSQL sorts the few
	// rows of a rare status by their time of creation.
	statusIndexes := []string{"changes_status_created", "changes_status_updated"}
	key := &ledger.ChangeKey{CreatedAt: time.UnixMicro(1000000 + planLedgerSize*500), ID: "chg_x"}
	type atom struct {
		set   func(*ledger.ChangeFilter)
		index []string // the indexes that may serve a rare value
	}
	// A filter that narrows to a range of time may be served by the
	// index of that range instead (the since filter: the updated_at index).
	also := map[string][]string{"since": {"changes_updated"}}
	atoms := map[string]atom{
		"by rare":         {func(f *ledger.ChangeFilter) { f.By = "agent:auditor-kim" }, []string{"changes_previewed_by", "changes_applied_by", "changes_undone_by"}},
		"by absent":       {func(f *ledger.ChangeFilter) { f.By = "agent:nobody" }, []string{"changes_previewed_by", "changes_applied_by", "changes_undone_by"}},
		"action rare":     {func(f *ledger.ChangeFilter) { f.Action = "rotate_signing_key" }, []string{"changes_action"}},
		"action absent":   {func(f *ledger.ChangeFilter) { f.Action = "drop_database" }, []string{"changes_action"}},
		"q rare":          {func(f *ledger.ChangeFilter) { f.Text = "quarantine" }, []string{"changes_text"}},
		"q absent":        {func(f *ledger.ChangeFilter) { f.Text = "zyzzyva" }, []string{"changes_text"}},
		"pending":         {func(f *ledger.ChangeFilter) { f.Statuses = []ledger.Status{ledger.Pending} }, statusIndexes},
		"failures":        {func(f *ledger.ChangeFilter) { f.Statuses = []ledger.Status{ledger.ApplyFailed, ledger.UndoFailed} }, statusIndexes},
		"in flight":       {func(f *ledger.ChangeFilter) { f.Statuses = []ledger.Status{ledger.Applying, ledger.Undoing} }, statusIndexes},
		"by common":       {func(f *ledger.ChangeFilter) { f.By = "agent:ops-bot" }, nil},
		"action common":   {func(f *ledger.ChangeFilter) { f.Action = "set_setting" }, nil},
		"q common":        {func(f *ledger.ChangeFilter) { f.Text = "feature" }, nil},
		"q short":         {func(f *ledger.ChangeFilter) { f.Text = "fe" }, nil},
		"status applied":  {func(f *ledger.ChangeFilter) { f.Statuses = []ledger.Status{ledger.Applied} }, nil},
		"since":           {func(f *ledger.ChangeFilter) { f.UpdatedSince = time.UnixMicro(1000000 + planLedgerSize*900) }, nil},
		"run":             {func(f *ledger.ChangeFilter) { f.RunID = "run_1" }, []string{"changes_run_created_id"}},
		"every change":    {func(f *ledger.ChangeFilter) {}, nil},
		"status rest two": {func(f *ledger.ChangeFilter) { f.Statuses = []ledger.Status{ledger.Applied, ledger.Undone} }, nil},
	}
	combos := [][]string{}
	for name := range atoms {
		combos = append(combos, []string{name})
	}
	for _, rare := range []string{"by rare", "by absent", "action rare", "action absent", "q rare", "q absent", "failures", "pending"} {
		for _, other := range []string{"by common", "action common", "q common", "q short", "status applied", "since", "status rest two"} {
			if kind(rare) != kind(other) {
				combos = append(combos, []string{rare, other})
			}
		}
	}
	for _, names := range combos {
		for _, before := range []*ledger.ChangeKey{nil, key} {
			f := ledger.ChangeFilter{Limit: 51, Before: before}
			var want, ok []string
			for _, n := range names {
				atoms[n].set(&f)
				want = append(want, atoms[n].index...)
				ok = append(ok, also[n]...)
			}
			name := strings.Join(names, " + ")
			query, args := postgres.ListChangesQuery(b, f)
			plan := explain(t, db, query, args)
			if strings.Contains(plan, "Seq Scan on changes") {
				t.Errorf("%s (before %v): the plan reads the whole table:\n%s", name, before != nil, plan)
			}
			if len(want) == 0 {
				continue
			}
			used := false
			for _, index := range append(want, ok...) {
				used = used || strings.Contains(plan, " "+index+" ")
			}
			if !used {
				t.Errorf("%s (before %v): the plan reads none of %v:\n%s", name, before != nil, want, plan)
			}
		}
	}
}

// kind is the field an atom of TestQueryPlans_EveryFilterReadsAnIndexNotTheTable
// sets.
func kind(atom string) string {
	switch atom {
	case "pending", "failures", "in flight", "status applied", "status rest two":
		return "status"
	}
	return strings.Fields(atom)[0]
}

// explain is PostgreSQL's plan of query, with its arguments, as text.
func explain(t *testing.T, db *sql.DB, query string, args []any) string {
	t.Helper()
	rows, err := db.Query("EXPLAIN "+query, args...)
	if err != nil {
		t.Fatalf("explain %s: %v", query, err)
	}
	defer rows.Close()
	var lines []string
	for rows.Next() {
		var line string
		if err := rows.Scan(&line); err != nil {
			t.Fatal(err)
		}
		lines = append(lines, line)
	}
	if err := rows.Err(); err != nil {
		t.Fatal(err)
	}
	return strings.Join(lines, "\n")
}
