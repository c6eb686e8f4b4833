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
