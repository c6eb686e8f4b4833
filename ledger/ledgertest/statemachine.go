package ledgertest

import (
	"context"
	"errors"
	"reflect"
	"slices"
	"strings"
	"testing"

	"github.com/mcp-changeset/changeset-go/ledger"
	"github.com/mcp-changeset/changeset-go/ledger/driver"
)

// changeMoves and runMoves are the moves the state machine allows, written
// out here independently of package ledger's table: the moves drawn in
// docs/design.md, those the changeset package makes (one transaction per
// transactional operation's move, a run's transactional undo), and same-status writes
// of finished changes and of an open run (a dry run's token).
var (
	changeMoves = []string{
		"pending → expired", "pending → applying", "pending → applied", "pending → apply_failed", "pending → declined",
		"applying → applied", "applying → apply_failed",
		"applied → undoing", "applied → undone", "applied → undo_failed",
		"undoing → undone", "undoing → undo_failed",
		"expired → expired", "apply_failed → apply_failed", "undone → undone", "undo_failed → undo_failed", "declined → declined",
	}
	runMoves = []string{
		"open → open", "open → undoing",
		"undoing → open", "undoing → undone", "undoing → partially_undone",
	}
)

// testChangeMoves tries every move between two statuses through
// Tx.UpdateChange: the allowed ones are written, every other one is
// refused with ErrTransition, naming the change and both statuses, and
// leaves the row as it was.
func testChangeMoves(t *testing.T, h Harness) {
	ctx := context.Background()
	l, _ := open(t, h)
	for _, from := range ledger.Statuses {
		for _, to := range ledger.Statuses {
			move := string(from) + " → " + string(to)
			id := "chg_" + string(from) + "_" + string(to)
			c := pendingChange(id, t0)
			c.Status, c.AppliedAt = from, t0
			insertChanges(t, l, c)
			next := c.Clone()
			next.Status, next.UpdatedAt, next.Note = to, sec(1), "moved"
			err := l.WithTx(ctx, func(tx *ledger.Tx) error { return tx.UpdateChange(next, from) })
			got := mustGet(t, l, id)
			if slices.Contains(changeMoves, move) {
				if err != nil || got.Status != to || got.Note != "moved" {
					t.Errorf("%s: %v (row %s, note %q); want it written", move, err, got.Status, got.Note)
				}
				if !from.CanMoveTo(to) {
					t.Errorf("%s: CanMoveTo says no", move)
				}
				continue
			}
			if !errors.Is(err, ledger.ErrTransition) || errors.Is(err, ledger.ErrConflict) {
				t.Errorf("%s: %v; want ErrTransition", move, err)
			} else if msg := err.Error(); !strings.Contains(msg, id) || !strings.Contains(msg, string(from)+" → "+string(to)) {
				t.Errorf("%s: %q does not name the change and both statuses", move, msg)
			}
			if !reflect.DeepEqual(got, stored(c)) {
				t.Errorf("%s: the refused move changed the row: %#v", move, got)
			}
			if from.CanMoveTo(to) {
				t.Errorf("%s: CanMoveTo says yes", move)
			}
		}
	}
	// The refusal comes before the database: even a change that does not
	// exist is refused as a move, not as missing.
	ghost := pendingChange("chg_ghost", t0)
	ghost.Status = ledger.Pending
	err := l.WithTx(ctx, func(tx *ledger.Tx) error { return tx.UpdateChange(ghost, ledger.Applying) })
	if !errors.Is(err, ledger.ErrTransition) || errors.Is(err, ledger.ErrNotFound) {
		t.Errorf("applying → pending of a missing change: %v; want ErrTransition", err)
	}
}

// testRunMoves does the same for runs through Tx.UpdateRun.
func testRunMoves(t *testing.T, h Harness) {
	ctx := context.Background()
	l, _ := open(t, h)
	for _, from := range ledger.RunStatuses {
		for _, to := range ledger.RunStatuses {
			move := string(from) + " → " + string(to)
			id := "run_" + string(from) + "_" + string(to)
			r := &ledger.Run{ID: id, Status: from, CreatedAt: t0, UpdatedAt: t0}
			if err := driver.BackendOf(l).InsertRun(ctx, l.DB(), r); err != nil {
				t.Fatal(err)
			}
			next := r.Clone()
			next.Status, next.UpdatedAt, next.Label = to, sec(1), "moved"
			err := l.WithTx(ctx, func(tx *ledger.Tx) error { return tx.UpdateRun(next, from) })
			got, gerr := l.Run(ctx, id)
			if gerr != nil {
				t.Fatal(gerr)
			}
			if slices.Contains(runMoves, move) {
				if err != nil || got.Status != to || got.Label != "moved" {
					t.Errorf("run %s: %v (row %s); want it written", move, err, got.Status)
				}
				continue
			}
			if !errors.Is(err, ledger.ErrTransition) || !strings.Contains(err.Error(), id) || !strings.Contains(err.Error(), move) {
				t.Errorf("run %s: %v; want ErrTransition naming the run and both statuses", move, err)
			}
			if !reflect.DeepEqual(got, storedRun(r)) {
				t.Errorf("run %s: the refused move changed the row: %#v", move, got)
			}
		}
	}
}

// testNamedRefusals are the moves the brief of the state machine names:
// each is refused on every backend.
func testNamedRefusals(t *testing.T, h Harness) {
	ctx := context.Background()
	l, _ := open(t, h)
	for _, m := range []struct{ from, to ledger.Status }{
		{ledger.Applying, ledger.Pending}, {ledger.Undone, ledger.Applied}, {ledger.Expired, ledger.Applying},
	} {
		c := pendingChange("chg_"+string(m.from), t0)
		c.Status, c.AppliedAt = m.from, t0
		insertChanges(t, l, c)
		next := c.Clone()
		next.Status = m.to
		if err := l.WithTx(ctx, func(tx *ledger.Tx) error { return tx.UpdateChange(next, m.from) }); !errors.Is(err, ledger.ErrTransition) {
			t.Errorf("%s → %s: %v, want ErrTransition", m.from, m.to, err)
		}
	}
	r := &ledger.Run{ID: "run_done", Status: ledger.RunPartiallyUndone, CreatedAt: t0, UpdatedAt: t0}
	if err := driver.BackendOf(l).InsertRun(ctx, l.DB(), r); err != nil {
		t.Fatal(err)
	}
	next := r.Clone()
	next.Status = ledger.RunOpen
	if err := l.WithTx(ctx, func(tx *ledger.Tx) error { return tx.UpdateRun(next, ledger.RunPartiallyUndone) }); !errors.Is(err, ledger.ErrTransition) {
		t.Errorf("partially_undone → open: %v, want ErrTransition", err)
	}
}

// testFailureKinds: Reconcile records an interrupted failure that may
// have written; expiry records no failure.
func testFailureKinds(t *testing.T, h Harness) {
	ctx := context.Background()
	l, clk := open(t, h)
	for _, s := range []ledger.Status{ledger.Applying, ledger.Undoing} {
		c := pendingChange("chg_"+string(s), t0)
		c.Status, c.AppliedAt, c.NothingWritten = s, t0, true // NothingWritten must not survive
		insertChanges(t, l, c)
		if _, err := l.Reconcile(ctx, c.ID, "checked", "operator:ops"); err != nil {
			t.Fatal(err)
		}
		if got := mustGet(t, l, c.ID); got.Failure != ledger.FailureInterrupted || got.NothingWritten {
			t.Errorf("reconciled %s: failure %q, nothing written %v; want interrupted, false", s, got.Failure, got.NothingWritten)
		}
	}
	insertChanges(t, l, pendingChange("chg_stale", t0))
	clk.Set(sec(120))
	if ids, err := l.ExpireStale(ctx); err != nil || len(ids) != 1 {
		t.Fatalf("ExpireStale = %v, %v", ids, err)
	}
	if got := mustGet(t, l, "chg_stale"); got.Status != ledger.Expired || got.Failure != "" || got.NothingWritten {
		t.Errorf("expired: %s, failure %q, nothing written %v; want no failure", got.Status, got.Failure, got.NothingWritten)
	}
}
