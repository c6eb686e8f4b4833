package ledgertest

import (
	"context"
	"testing"
	"time"

	"github.com/mcp-changeset/changeset-go/ledger"
	"github.com/mcp-changeset/changeset-go/ledger/driver"
)

// CheckUpgradedV1 checks a ledger that a backend's migrations brought up
// from schema 1, where the test had stored the change "chg_old" (summary
// "old change", error "boom", one redacted field) of the run "run_old"
// (label "old run"): both read back with the columns added since at their
// defaults, and a change using those columns (depends_on and change_deps)
// can be stored and found in the upgraded ledger. Each backend's migration
// test calls it after its own, backend-specific checks of the schema.
func CheckUpgradedV1(t *testing.T, b driver.Backend) {
	t.Helper()
	ctx := context.Background()
	c, err := b.GetChange(ctx, b.DB(), "chg_old")
	if err != nil || c.Summary != "old change" || c.Error != "boom" || c.Failure != "" || c.NothingWritten || c.DependsOn != nil || len(c.RedactFields) != 1 {
		t.Fatalf("the old change after the upgrade: %+v, %v", c, err)
	}
	r, err := b.GetRun(ctx, b.DB(), "run_old")
	if err != nil || r.Label != "old run" || r.Kind != ledger.RunTask || r.SessionKey != "" {
		t.Fatalf("the old run after the upgrade: %+v, %v (want a task run)", r, err)
	}
	at := time.Date(2026, 11, 30, 9, 0, 0, 0, time.UTC)
	n := &ledger.Change{ID: "chg_new", Action: "a", Status: ledger.Pending, RunID: "run_old", DependsOn: []string{"rule:42"},
		CreatedAt: at, UpdatedAt: at}
	if err := b.InsertChange(ctx, b.DB(), n); err != nil {
		t.Fatal(err)
	}
	deps, err := b.ListChanges(ctx, b.DB(), ledger.ChangeFilter{DependsOn: "rule:42"})
	if err != nil || len(deps) != 1 || deps[0].ID != "chg_new" {
		t.Errorf("DependsOn after the upgrade: %v, %v", deps, err)
	}
}

// CheckChainedAfterUpgrade checks a ledger that a backend's migrations
// brought up from a schema before the history's hash chain, where the
// test had stored entries history entries (some numbers left out, as a
// prune of that time left them): Verify finds them all chained, the next
// transition is numbered after them and chains on, and editing one of
// the old entries is found. Each backend's migration test calls it.
func CheckChainedAfterUpgrade(t *testing.T, l *ledger.Ledger, entries int) {
	t.Helper()
	ctx := context.Background()
	v := verify(t, l, ledger.Link{})
	if !v.OK() || v.Entries != entries || v.Head.Hash.IsZero() {
		t.Fatalf("Verify after the upgrade = %+v; want %d entries chained", v, entries)
	}
	c := pendingChange("chg_after_upgrade", time.Now())
	if err := l.WithTx(ctx, func(tx *ledger.Tx) error { return tx.InsertChange(c) }); err != nil {
		t.Fatal(err)
	}
	next := verify(t, l, ledger.Link{})
	if !next.OK() || next.Entries != entries+1 || next.Head.Seq != v.Head.Seq+1 {
		t.Fatalf("Verify after a transition = %+v; want entry %d chained after %d", next, v.Head.Seq+1, entries)
	}
	first := allEntries(t, l)[0]
	tamper(t, l, `UPDATE ledger_history SET note = 'rewritten' WHERE seq = ?`, first.Seq)
	if v := verify(t, l, ledger.Link{}); v.OK() || v.FirstBad != first.Seq {
		t.Fatalf("Verify after editing the oldest entry = first bad %d, %q; want %d", v.FirstBad, v.Problems, first.Seq)
	}
}
