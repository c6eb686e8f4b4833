package ledgertest

import (
	"context"
	"fmt"
	"testing"

	"github.com/mcp-changeset/changeset-go/ledger"
)

// testHistoryFailureKind proves that the history entry of a failed change
// carries its kind of failure (ledger.Failure) in Note, for every kind and
// for each way a change fails:
//   - an apply: pending → applying → apply_failed;
//   - an undo after its claim, as every undo of an ordinary operation
//     fails: applied → undoing → undo_failed;
//   - an undo straight from applied, as a run records a transactional
//     undo that rolled back to its savepoint (changeset's
//     recordRunFailure): applied → undo_failed.
//
// The entries are also listed, with their kinds, in the history of the
// run the changes belong to; and rewriting a failed row in its own status
// (an annotation) appends nothing.
//
// It was verified against ledger/history.go, changeEntry:
//
//	if c.Status == ApplyFailed || c.Status == UndoFailed {
//
// With "|| c.Status == UndoFailed" removed, every undo_failed entry loses
// its kind and this test fails (the History suite's ChangeLifeInOrder only
// covers an apply_failed entry).
func testHistoryFailureKind(t *testing.T, h Harness) {
	ctx := context.Background()
	l, clk := open(t, h)
	insertRuns(t, l, "run_1")

	// applied brings a new change of run_1 to applied at sec(1) and sec(2),
	// through the transitions the library makes.
	applied := func(id string) {
		t.Helper()
		c := pendingChange(id, t0)
		c.RunID = "run_1"
		if err := l.WithTx(ctx, func(tx *ledger.Tx) error { return tx.InsertChange(c) }); err != nil {
			t.Fatal(err)
		}
		clk.Set(sec(1))
		if err := step(ctx, l, id, ledger.Pending, ledger.Applying, func(c *ledger.Change) { c.AppliedBy = "agent:bob" }); err != nil {
			t.Fatal(err)
		}
		clk.Set(sec(2))
		if err := step(ctx, l, id, ledger.Applying, ledger.Applied, func(c *ledger.Change) { c.AppliedAt = c.UpdatedAt }); err != nil {
			t.Fatal(err)
		}
	}
	// fail moves id from from to the failed status to at sec(10), with kind.
	fail := func(id string, from, to ledger.Status, kind ledger.Failure, by string) {
		t.Helper()
		clk.Set(sec(10))
		err := step(ctx, l, id, from, to, func(c *ledger.Change) {
			c.Failure, c.NothingWritten = kind, kind == ledger.FailureStateChanged
			c.ErrorType, c.Error = "Test", "failed with "+string(kind)
			if to == ledger.ApplyFailed {
				c.AppliedBy = by
			} else {
				c.UndoneBy = by
			}
		})
		if err != nil {
			t.Fatalf("%s: %s → %s (%s): %v", id, from, to, kind, err)
		}
	}

	var inRun []entry // what run_1's history must list from sec(10) on
	for _, kind := range ledger.Failures {
		// A failed apply.
		ap := fmt.Sprintf("chg_apply_%s", kind)
		c := pendingChange(ap, t0)
		c.RunID = "run_1"
		insertChanges(t, l, c)
		clk.Set(sec(1))
		if err := step(ctx, l, ap, ledger.Pending, ledger.Applying, func(c *ledger.Change) { c.AppliedBy = "agent:bob" }); err != nil {
			t.Fatal(err)
		}
		fail(ap, ledger.Applying, ledger.ApplyFailed, kind, "agent:bob")

		// A failed undo after its claim.
		claimed := fmt.Sprintf("chg_undo_%s", kind)
		applied(claimed)
		clk.Set(sec(3))
		if err := step(ctx, l, claimed, ledger.Applied, ledger.Undoing, func(c *ledger.Change) { c.UndoneBy = "person:ann" }); err != nil {
			t.Fatal(err)
		}
		fail(claimed, ledger.Undoing, ledger.UndoFailed, kind, "person:ann")

		// A failed undo straight from applied.
		direct := fmt.Sprintf("chg_direct_%s", kind)
		applied(direct)
		fail(direct, ledger.Applied, ledger.UndoFailed, kind, "person:ann")

		history(t, l, ledger.HistoryFilter{ChangeID: ap, Since: sec(10)},
			entry{sec(10), ap, "run_1", "applying", "apply_failed", "agent:bob", string(kind)})
		history(t, l, ledger.HistoryFilter{ChangeID: claimed, Since: sec(3)},
			entry{sec(3), claimed, "run_1", "applied", "undoing", "person:ann", ""},
			entry{sec(10), claimed, "run_1", "undoing", "undo_failed", "person:ann", string(kind)})
		history(t, l, ledger.HistoryFilter{ChangeID: direct, Since: sec(10)},
			entry{sec(10), direct, "run_1", "applied", "undo_failed", "person:ann", string(kind)})
		inRun = append(inRun,
			entry{sec(10), ap, "run_1", "applying", "apply_failed", "agent:bob", string(kind)},
			entry{sec(10), claimed, "run_1", "undoing", "undo_failed", "person:ann", string(kind)},
			entry{sec(10), direct, "run_1", "applied", "undo_failed", "person:ann", string(kind)})

		// The row keeps the same kind as its entry.
		if got := mustGet(t, l, direct); got.Status != ledger.UndoFailed || got.Failure != kind {
			t.Errorf("%s: %s, failure %q; want undo_failed, %s", direct, got.Status, got.Failure, kind)
		}
	}
	history(t, l, ledger.HistoryFilter{RunID: "run_1", Since: sec(10)}, inRun...)

	// An annotation of a failed row appends nothing.
	direct := fmt.Sprintf("chg_direct_%s", ledger.FailureError)
	clk.Set(sec(20))
	if err := step(ctx, l, direct, ledger.UndoFailed, ledger.UndoFailed, func(c *ledger.Change) { c.Note = "seen by ops" }); err != nil {
		t.Fatal(err)
	}
	history(t, l, ledger.HistoryFilter{ChangeID: direct, Since: sec(10)},
		entry{sec(10), direct, "run_1", "applied", "undo_failed", "person:ann", string(ledger.FailureError)})
}
