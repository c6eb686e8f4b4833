package ledger_test

import (
	"context"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/mcp-changeset/changeset-go/ledger"
	"github.com/mcp-changeset/changeset-go/ledger/driver"
	_ "github.com/mcp-changeset/changeset-go/ledger/sqlite"
)

func TestCheck_FindsBrokenInvariantsWithoutQuotingDigests(t *testing.T) {
	ctx := context.Background()
	l, err := ledger.Open(ctx, filepath.Join(t.TempDir(), "ledger.db"), ledger.OpenOptions{Create: true})
	if err != nil {
		t.Fatal(err)
	}
	defer l.Close()
	now := time.Now()
	const digest = "0123456789abcdef0123456789abcdef0123456789abcdef0123456789abcdef"
	rows := []*ledger.Change{
		// Sound rows.
		{ID: "chg_pending", Status: ledger.Pending, ConfirmHash: digest},
		{ID: "chg_applied", Status: ledger.Applied, Undoable: true, UndoHash: digest, AppliedAt: now, UndoExpiresAt: now.Add(time.Hour)},
		{ID: "chg_closed", Status: ledger.Applied, Undoable: true, AppliedAt: now, UndoExpiresAt: now.Add(-time.Hour)},
		{ID: "chg_undone", Status: ledger.Undone, Undoable: true, AppliedAt: now, UndoneAt: now},
		// Broken rows.
		{ID: "chg_spent", Status: ledger.Expired, ConfirmHash: digest},
		{ID: "chg_tokenless", Status: ledger.Pending},
		{ID: "chg_stuck", Status: ledger.Applied, Undoable: true, AppliedAt: now},
		{ID: "chg_noundo", Status: ledger.Applied, UndoHash: digest, AppliedAt: now},
		{ID: "chg_when", Status: ledger.UndoFailed},
	}
	err = l.WithTx(ctx, func(tx *ledger.Tx) error {
		for _, c := range rows {
			c.Action, c.CreatedAt, c.UpdatedAt, c.ExpiresAt = "set", now, now, now
			if err := tx.InsertChange(c); err != nil {
				return err
			}
		}
		return tx.InsertRun(&ledger.Run{ID: "run_done", Status: ledger.RunUndone, ConfirmHash: digest, CreatedAt: now, UpdatedAt: now})
	})
	if err != nil {
		t.Fatal(err)
	}
	// A transition written past the ledger's Tx, without its history
	// entry; and a row with no history at all, as from before schema 4,
	// which is not a problem.
	sneaky := &ledger.Change{ID: "chg_sneaky", Action: "set", Status: ledger.Pending, ConfirmHash: digest, CreatedAt: now, UpdatedAt: now, ExpiresAt: now}
	if err := l.WithTx(ctx, func(tx *ledger.Tx) error { return tx.InsertChange(sneaky) }); err != nil {
		t.Fatal(err)
	}
	sneaky.Status, sneaky.ConfirmHash = ledger.Expired, ""
	if err := driver.BackendOf(l).UpdateChange(ctx, l.DB(), sneaky, ledger.Pending); err != nil {
		t.Fatal(err)
	}
	old := &ledger.Change{ID: "chg_old", Action: "set", Status: ledger.Expired, CreatedAt: now, UpdatedAt: now, ExpiresAt: now}
	if err := driver.BackendOf(l).InsertChange(ctx, l.DB(), old); err != nil {
		t.Fatal(err)
	}
	problems, err := l.Check(ctx)
	if err != nil {
		t.Fatal(err)
	}
	text := strings.Join(problems, "\n")
	for _, want := range []string{
		"change chg_spent: expired but still holds a confirmation digest",
		"change chg_tokenless: pending without a confirmation digest",
		"change chg_stuck: applied and undoable within its undo window, but holds no undo digest",
		"change chg_noundo: applied (undoable: false) but holds an undo digest",
		"change chg_when: undo_failed without the time it was applied",
		"run run_done: undone but still holds an undo confirmation digest",
		"run run_done: holds an undo confirmation digest without the plan digest it is bound to",
		"change chg_sneaky: expired, but its history ends at pending: a transition was written without its history entry",
	} {
		if !strings.Contains(text, want) {
			t.Errorf("Check lacks %q", want)
		}
	}
	if len(problems) != 8 {
		t.Errorf("Check found %d problems, want 8:\n%s", len(problems), text)
	}
	if strings.Contains(text, digest) {
		t.Error("Check quoted a digest")
	}
}

// TestCheckWith_RoutineReadsTheWindowAndTheOpenRows breaks rows in and out
// of the routine check's window: it reports the rows with a transition
// since Since and every in-flight row, not the others (an old pending row
// among them: stale previews are expire's), which the full check reports.
func TestCheckWith_RoutineReadsTheWindowAndTheOpenRows(t *testing.T) {
	ctx := context.Background()
	t0 := time.Now().Add(-30 * 24 * time.Hour)
	now := t0.Add(10 * 24 * time.Hour)
	l, err := ledger.Open(ctx, filepath.Join(t.TempDir(), "ledger.db"), ledger.OpenOptions{Create: true, Clock: func() time.Time { return now }})
	if err != nil {
		t.Fatal(err)
	}
	defer l.Close()
	b := driver.BackendOf(l)
	const digest = "0123456789abcdef0123456789abcdef0123456789abcdef0123456789abcdef"
	pending := func(id string, at time.Time) *ledger.Change {
		return &ledger.Change{ID: id, Action: "set", Status: ledger.Pending, ConfirmHash: digest, CreatedAt: at, UpdatedAt: at, ExpiresAt: at.Add(time.Minute)}
	}
	// Written through the ledger, with their history: two old, one
	// recent, one recent run.
	old, recent, sneaky := pending("chg_old", t0), pending("chg_recent", now.Add(-time.Hour)), pending("chg_sneaky", now.Add(-time.Hour))
	err = l.WithTx(ctx, func(tx *ledger.Tx) error {
		for _, c := range []*ledger.Change{old, recent, sneaky} {
			if err := tx.InsertChange(c); err != nil {
				return err
			}
			c.Status, c.ConfirmHash, c.UpdatedAt = ledger.Expired, "", c.CreatedAt.Add(time.Minute)
			if c.ID != "chg_sneaky" {
				if err := tx.UpdateChange(c, ledger.Pending); err != nil {
					return err
				}
			}
		}
		return tx.InsertRun(&ledger.Run{ID: "run_recent", Status: ledger.RunUndone, ConfirmHash: digest, PlanHash: digest, CreatedAt: now.Add(-time.Hour), UpdatedAt: now.Add(-time.Hour)})
	})
	if err != nil {
		t.Fatal(err)
	}
	// Broken behind the ledger's back.
	for _, c := range []*ledger.Change{old, recent} {
		c.ConfirmHash = digest
		if err := b.UpdateChange(ctx, l.DB(), c, ledger.Expired); err != nil {
			t.Fatal(err)
		}
	}
	if err := b.UpdateChange(ctx, l.DB(), sneaky, ledger.Pending); err != nil { // expired without its entry
		t.Fatal(err)
	}
	if err := b.InsertChange(ctx, l.DB(), &ledger.Change{ID: "chg_tokenless", Action: "set", Status: ledger.Pending, CreatedAt: t0, UpdatedAt: t0, ExpiresAt: t0}); err != nil {
		t.Fatal(err)
	}
	if err := b.InsertChange(ctx, l.DB(), &ledger.Change{ID: "chg_stuck", Action: "set", Status: ledger.Applying, ConfirmHash: digest, CreatedAt: t0, UpdatedAt: t0, ExpiresAt: t0}); err != nil {
		t.Fatal(err)
	}
	oldLine := "change chg_old: expired but still holds a confirmation digest"
	tokenlessLine := "change chg_tokenless: pending without a confirmation digest"
	recentLines := []string{
		"change chg_recent: expired but still holds a confirmation digest",
		"change chg_sneaky: expired, but its history ends at pending",
		"run run_recent: undone but still holds an undo confirmation digest",
		"change chg_stuck: applying but still holds a confirmation digest",
	}
	stages := map[string]bool{}
	routine, err := l.CheckWith(ctx, ledger.CheckOptions{Progress: func(stage string, done, total int) { stages[stage] = true }})
	if err != nil {
		t.Fatal(err)
	}
	text := strings.Join(routine, "\n")
	for _, want := range recentLines {
		if !strings.Contains(text, want) {
			t.Errorf("the routine check lacks %q:\n%s", want, text)
		}
	}
	if strings.Contains(text, oldLine) || strings.Contains(text, tokenlessLine) || len(routine) != len(recentLines) {
		t.Errorf("the routine check read outside its window:\n%s", text)
	}
	for _, s := range []string{"file", "history", "runs", "changes"} {
		if !stages[s] {
			t.Errorf("the routine check reported no progress for %q (%v)", s, stages)
		}
	}
	// A wider window takes in chg_old's entries; chg_tokenless has none
	// (written behind the ledger's back), so only the full check finds it.
	for name, tc := range map[string]struct {
		opts  ledger.CheckOptions
		extra []string
	}{
		"full":           {ledger.CheckOptions{Full: true}, []string{oldLine, tokenlessLine}},
		"a wider window": {ledger.CheckOptions{Since: t0.Add(-time.Hour)}, []string{oldLine}},
	} {
		problems, err := l.CheckWith(ctx, tc.opts)
		if err != nil {
			t.Fatal(err)
		}
		text := strings.Join(problems, "\n")
		for _, want := range tc.extra {
			if !strings.Contains(text, want) {
				t.Errorf("the %s check lacks %q:\n%s", name, want, text)
			}
		}
		if len(problems) != len(recentLines)+len(tc.extra) {
			t.Errorf("the %s check found:\n%s\nwant the routine's findings and %q", name, text, tc.extra)
		}
	}
}
