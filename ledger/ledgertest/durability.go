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

// ExerciseDurability runs the part of the suite that tests lazy
// transactions ([ledger.Ledger.WithLazyTx]), which [Exercise] runs too: a
// backend whose lazy transactions differ by durability (a
// driver.LazyWriter) runs it again on ledgers opened with
// ledger.DurabilityClaims, or the whole suite if that is cheap.
func ExerciseDurability(t *testing.T, h Harness) {
	runAll(t, h, []test{
		{"LazyTxMakesEveryMoveButAClaim", testLazyChangeMoves},
		{"LazyTxMakesEveryRunMoveButAClaim", testLazyRunMoves},
		{"LazyTxRefusesToInsertAClaimedRow", testLazyInsertClaimed},
		{"LazyTxCommitsAndRollsBackLikeWithTx", testLazyCommit},
	})
}

// claimMoves are the moves of a change that claim it: it enters a status
// in which its operation has run or may be running, from one in which it
// had not. Written out here independently of package ledger.
var claimMoves = []string{"pending → applying", "pending → applied", "applied → undoing", "applied → undone"}

// testLazyChangeMoves tries every move the state machine allows in a lazy
// transaction: the claims are refused with ErrTransition, saying why, and
// leave the row as it was; every other move is written.
func testLazyChangeMoves(t *testing.T, h Harness) {
	ctx := context.Background()
	l, _ := open(t, h)
	for _, move := range changeMoves {
		f, to, _ := strings.Cut(move, " → ")
		from := ledger.Status(f)
		id := "chg_" + f + "_" + to
		c := pendingChange(id, t0)
		c.Status, c.AppliedAt = from, t0
		insertChanges(t, l, c)
		next := c.Clone()
		next.Status, next.UpdatedAt, next.Note = ledger.Status(to), sec(1), "moved"
		err := l.WithLazyTx(ctx, func(tx *ledger.Tx) error { return tx.UpdateChange(next, from) })
		got := mustGet(t, l, id)
		if !slices.Contains(claimMoves, move) {
			if err != nil || got.Status != next.Status || got.Note != "moved" {
				t.Errorf("lazy %s: %v (row %s); want it written", move, err, got.Status)
			}
			continue
		}
		if !errors.Is(err, ledger.ErrTransition) || !strings.Contains(err.Error(), "lazy") || !strings.Contains(err.Error(), id) {
			t.Errorf("lazy %s: %v; want ErrTransition naming the change and the lazy transaction", move, err)
		}
		if !reflect.DeepEqual(got, stored(c)) {
			t.Errorf("lazy %s: the refused claim changed the row: %#v", move, got)
		}
		// The same move in WithTx is written.
		if err := l.WithTx(ctx, func(tx *ledger.Tx) error { return tx.UpdateChange(next, from) }); err != nil {
			t.Errorf("%s in WithTx: %v", move, err)
		}
	}
}

// testLazyRunMoves does the same for runs: only open → undoing claims one.
func testLazyRunMoves(t *testing.T, h Harness) {
	ctx := context.Background()
	l, _ := open(t, h)
	for _, move := range runMoves {
		f, to, _ := strings.Cut(move, " → ")
		from := ledger.RunStatus(f)
		id := "run_" + f + "_" + to
		r := &ledger.Run{ID: id, Status: from, CreatedAt: t0, UpdatedAt: t0}
		if err := driver.BackendOf(l).InsertRun(ctx, l.DB(), r); err != nil {
			t.Fatal(err)
		}
		next := r.Clone()
		next.Status, next.UpdatedAt, next.Label = ledger.RunStatus(to), sec(1), "moved"
		err := l.WithLazyTx(ctx, func(tx *ledger.Tx) error { return tx.UpdateRun(next, from) })
		got, gerr := l.Run(ctx, id)
		if gerr != nil {
			t.Fatal(gerr)
		}
		if move != "open → undoing" {
			if err != nil || got.Status != next.Status || got.Label != "moved" {
				t.Errorf("lazy run %s: %v (row %s); want it written", move, err, got.Status)
			}
			continue
		}
		if !errors.Is(err, ledger.ErrTransition) || !strings.Contains(err.Error(), "lazy") || !strings.Contains(err.Error(), id) {
			t.Errorf("lazy run %s: %v; want ErrTransition naming the run and the lazy transaction", move, err)
		}
		if !reflect.DeepEqual(got, storedRun(r)) {
			t.Errorf("lazy run %s: the refused claim changed the run: %#v", move, got)
		}
	}
}

// testLazyInsertClaimed: a lazy transaction inserts pending changes and
// open runs, never a row already claimed, and a refusal rolls back what
// the transaction wrote before it.
func testLazyInsertClaimed(t *testing.T, h Harness) {
	ctx := context.Background()
	l, _ := open(t, h)
	for _, s := range []ledger.Status{ledger.Applying, ledger.Applied, ledger.Undoing, ledger.Undone} {
		c := pendingChange("chg_new_"+string(s), t0)
		c.Status, c.AppliedAt = s, t0
		err := l.WithLazyTx(ctx, func(tx *ledger.Tx) error {
			if err := tx.InsertChange(pendingChange("chg_before_"+string(s), t0)); err != nil {
				return err
			}
			return tx.InsertChange(c)
		})
		if !errors.Is(err, ledger.ErrTransition) {
			t.Errorf("lazy insert of a change in status %s: %v; want ErrTransition", s, err)
		}
		for _, id := range []string{c.ID, "chg_before_" + string(s)} {
			if _, err := l.Change(ctx, id); !errors.Is(err, ledger.ErrNotFound) {
				t.Errorf("after the refused insert of a change in status %s, %s: %v; want it rolled back", s, id, err)
			}
		}
	}
	run := &ledger.Run{ID: "run_undoing", Status: ledger.RunUndoing, CreatedAt: t0, UpdatedAt: t0}
	if err := l.WithLazyTx(ctx, func(tx *ledger.Tx) error { return tx.InsertRun(run) }); !errors.Is(err, ledger.ErrTransition) {
		t.Errorf("lazy insert of an undoing run: %v; want ErrTransition", err)
	}
	for _, s := range []ledger.Status{ledger.Pending, ledger.Expired} {
		c := pendingChange("chg_ok_"+string(s), t0)
		c.Status = s
		if err := l.WithLazyTx(ctx, func(tx *ledger.Tx) error { return tx.InsertChange(c) }); err != nil {
			t.Errorf("lazy insert of a change in status %s: %v", s, err)
		}
	}
	open := &ledger.Run{ID: "run_open", Status: ledger.RunOpen, CreatedAt: t0, UpdatedAt: t0}
	if err := l.WithLazyTx(ctx, func(tx *ledger.Tx) error { return tx.InsertRunBy(open, "agent:a") }); err != nil {
		t.Errorf("lazy insert of an open run: %v", err)
	}
}

// testLazyCommit: a lazy transaction's commit is seen at once by every
// reader, a second handle (another process) included, and its rollback
// leaves nothing; the writes of the transactions around it on the same
// handle commit as before, whichever connection they get.
func testLazyCommit(t *testing.T, h Harness) {
	ctx := context.Background()
	l, _ := open(t, h)
	var other *ledger.Ledger
	if h.OpenSecond != nil {
		other = second(t, h, l)
	}
	boom := errors.New("boom")
	for i := range 20 { // more than one connection of each pool
		lazy := pendingChange("chg_lazy_"+string(rune('a'+i)), t0)
		if err := l.WithLazyTx(ctx, func(tx *ledger.Tx) error { return tx.InsertChange(lazy) }); err != nil {
			t.Fatal(err)
		}
		synced := pendingChange("chg_sync_"+string(rune('a'+i)), t0)
		if err := l.WithTx(ctx, func(tx *ledger.Tx) error { return tx.InsertChange(synced) }); err != nil {
			t.Fatal(err)
		}
		lost := pendingChange("chg_lost_"+string(rune('a'+i)), t0)
		err := l.WithLazyTx(ctx, func(tx *ledger.Tx) error {
			if err := tx.InsertChange(lost); err != nil {
				return err
			}
			return boom
		})
		if !errors.Is(err, boom) {
			t.Fatalf("lazy rollback: %v", err)
		}
		for _, reader := range []*ledger.Ledger{l, other} {
			if reader == nil {
				continue
			}
			for _, id := range []string{lazy.ID, synced.ID} {
				if _, err := reader.Change(ctx, id); err != nil {
					t.Errorf("%s after its commit: %v", id, err)
				}
			}
			if _, err := reader.Change(ctx, lost.ID); !errors.Is(err, ledger.ErrNotFound) {
				t.Errorf("%s after its rollback: %v; want ErrNotFound", lost.ID, err)
			}
		}
	}
	// A claim in WithTx after lazy commits on the same handle.
	c := mustGet(t, l, "chg_lazy_a")
	c.Status, c.UpdatedAt = ledger.Applying, sec(1)
	if err := l.WithTx(ctx, func(tx *ledger.Tx) error { return tx.UpdateChange(c, ledger.Pending) }); err != nil {
		t.Fatal(err)
	}
}
