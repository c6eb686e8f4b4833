package sqlite

import (
	"context"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/mcp-changeset/changeset-go/ledger"
)

// TestQueryPlans_ApprovalsAndOutboxUseTheirIndexes asks SQLite how it would
// run the statements of approvals and of the outbox, as the backend builds
// them: the waiting approvals, a page at a time, read the partial index
// that holds only them; a sender's lease reads only the undelivered
// events; none of them reads a whole table.
func TestQueryPlans_ApprovalsAndOutboxUseTheirIndexes(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	b, err := Open(ctx, filepath.Join(t.TempDir(), "plan.db"), ledger.OpenOptions{Create: true, BusyTimeout: ledger.DefaultBusyTimeout})
	if err != nil {
		t.Fatal(err)
	}
	defer b.Close()
	now := time.Now()
	key := &ledger.ChangeKey{CreatedAt: now, ID: "apr_1"}
	cases := []struct {
		name  string
		index string
		query func() (string, []any)
	}{
		{"the waiting approvals, a page", "ledger_approvals_waiting",
			func() (string, []any) {
				return listApprovalsQuery(ledger.ApprovalFilter{Statuses: []ledger.ApprovalStatus{ledger.ApprovalWaiting}, Limit: 50, Before: key})
			}},
		{"a change's approvals", "ledger_approvals_change", func() (string, []any) { return listApprovalsQuery(ledger.ApprovalFilter{ChangeID: "chg_1"}) }},
		{"a run's approvals", "ledger_approvals_run", func() (string, []any) { return listApprovalsQuery(ledger.ApprovalFilter{RunID: "run_1"}) }},
		{"the approvals past their deadline", "ledger_approvals_open", func() (string, []any) {
			return listApprovalsQuery(ledger.ApprovalFilter{
				Statuses: []ledger.ApprovalStatus{ledger.ApprovalWaiting, ledger.ApprovalApproved}, DueBy: now, Limit: 100})
		}},
		{"an approval's history", "ledger_history_approval", func() (string, []any) { return listHistoryQuery(ledger.HistoryFilter{ApprovalID: "apr_1", Limit: 50}) }},
		{"a sender's lease", "ledger_outbox_due", func() (string, []any) { return leaseEventsSQL, []any{"r", 2, 1, 1, 10} }},
		{"pruning delivered events", "ledger_outbox_delivered", func() (string, []any) { return deleteEventsSQL, []any{1, 1, 1000} }},
		{"pruning events of any state by age", "ledger_outbox_created", func() (string, []any) { return deleteEventsSQL, []any{1, 1, 1000} }},
	}
	for _, tc := range cases {
		query, args := tc.query()
		plan := explain(t, b.DB(), query, args)
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
