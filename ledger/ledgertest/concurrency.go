package ledgertest

import (
	"context"
	"errors"
	"fmt"
	"math/rand/v2"
	"sync"
	"testing"
	"time"

	"github.com/mcp-changeset/changeset-go/ledger"
	"github.com/mcp-changeset/changeset-go/ledger/driver"
)

func exerciseConcurrency(t *testing.T, h Harness) {
	runAll(t, h, []test{
		{"RacingClaimsHaveOneWinner", testClaimRace},
		{"RacingClaimsThroughTwoHandlesHaveOneWinner", testClaimRaceTwoHandles},
		{"ExpiryRacingClaimsNeverDoesBoth", testExpireRacesClaims},
		{"ConcurrentPreviewsAllLand", testConcurrentInserts},
		{"DeletingARunWaitsForAChangeJoiningIt", testDeleteRunRacesJoin},
	})
}

// raceTimeout bounds a race: a deadlock fails the test instead of hanging
// the run.
const raceTimeout = 90 * time.Second

// claim moves change id from pending to applying for worker, as the claim
// of package changeset does: read the row in a write transaction, give up
// if it is no longer pending, write it back with a compare-and-set. won
// reports whether this worker moved it.
func claim(ctx context.Context, l *ledger.Ledger, id, worker string) (won bool, err error) {
	err = l.WithTx(ctx, func(tx *ledger.Tx) error {
		won = false
		c, err := tx.Change(id)
		if err != nil {
			return err
		}
		if c.Status != ledger.Pending {
			return nil // refused: not pending
		}
		c.Status, c.AppliedBy, c.ConfirmHash, c.UpdatedAt = ledger.Applying, worker, "", l.Now()
		if err := tx.UpdateChange(c, ledger.Pending); err != nil {
			return err
		}
		won = true
		return nil
	})
	if errors.Is(err, ledger.ErrConflict) {
		return false, nil // another claim moved it first: also a refusal
	}
	return won, err
}

// within runs fn and fails the test if it has not returned after
// raceTimeout. fn runs on another goroutine: it may call t.Error, not
// t.Fatal.
func within(t *testing.T, what string, fn func()) {
	t.Helper()
	done := make(chan struct{})
	go func() {
		defer close(done)
		fn()
	}()
	select {
	case <-done:
	case <-time.After(raceTimeout):
		t.Fatalf("%s did not finish within %v: deadlock?", what, raceTimeout)
	}
}

// raceClaims has workers claim every one of rows pending changes, in an
// order of their own, spread over handles, and checks that each change
// was won exactly once and that no error other than a refusal surfaced.
func raceClaims(t *testing.T, l *ledger.Ledger, handles []*ledger.Ledger, rows, workers int) {
	ctx := ctxFor(t)
	var ids []string
	for i := range rows {
		ids = append(ids, fmt.Sprintf("chg_%03d", i))
	}
	err := l.WithTx(ctx, func(tx *ledger.Tx) error {
		for _, id := range ids {
			if err := tx.InsertChange(pendingChange(id, t0)); err != nil {
				return err
			}
		}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	var mu sync.Mutex
	winners := map[string][]string{}
	within(t, "racing claims", func() {
		var wg sync.WaitGroup
		start := make(chan struct{})
		for w := range workers {
			wg.Go(func() {
				hl := handles[w%len(handles)]
				name := fmt.Sprintf("worker-%d", w)
				<-start
				for _, i := range rand.Perm(len(ids)) {
					won, err := claim(ctx, hl, ids[i], name)
					if err != nil {
						t.Errorf("%s claiming %s: %v (only refusals may surface)", name, ids[i], err)
						return
					}
					if won {
						mu.Lock()
						winners[ids[i]] = append(winners[ids[i]], name)
						mu.Unlock()
					}
				}
			})
		}
		close(start)
		wg.Wait()
	})
	for _, id := range ids {
		w := winners[id]
		if len(w) != 1 {
			t.Errorf("%s was claimed by %d workers %v, want exactly one", id, len(w), w)
			continue
		}
		if c := mustGet(t, l, id); c.Status != ledger.Applying || c.AppliedBy != w[0] {
			t.Errorf("%s: %s by %q, want applying by its winner %s", id, c.Status, c.AppliedBy, w[0])
		}
	}
}

func testClaimRace(t *testing.T, h Harness) {
	l, _ := open(t, h)
	raceClaims(t, l, []*ledger.Ledger{l}, 20, 16)
}

func testClaimRaceTwoHandles(t *testing.T, h Harness) {
	if h.OpenSecond == nil {
		t.Skip("the harness cannot open a second handle")
	}
	l, _ := open(t, h)
	raceClaims(t, l, []*ledger.Ledger{l, second(t, h, l)}, 20, 16)
}

func testExpireRacesClaims(t *testing.T, h Harness) {
	ctx := ctxFor(t)
	l, clk := open(t, h)
	handles := []*ledger.Ledger{l}
	if h.OpenSecond != nil {
		handles = append(handles, second(t, h, l))
	}
	const rows = 40
	var ids []string
	err := l.WithTx(ctx, func(tx *ledger.Tx) error {
		for i := range rows {
			id := fmt.Sprintf("chg_%03d", i)
			ids = append(ids, id)
			if err := tx.InsertChange(pendingChange(id, t0)); err != nil {
				return err
			}
		}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	clk.Set(t0.Add(time.Hour)) // every row's token has expired
	var mu sync.Mutex
	expired := map[string]int{}
	claimed := map[string]int{}
	within(t, "expiry racing claims", func() {
		var wg sync.WaitGroup
		for i, hl := range handles {
			wg.Go(func() {
				moved, err := hl.ExpireStale(ctx)
				if err != nil {
					t.Errorf("ExpireStale through handle %d: %v", i, err)
				}
				mu.Lock()
				for _, id := range moved {
					expired[id]++
				}
				mu.Unlock()
			})
		}
		for w := range 8 {
			wg.Go(func() {
				hl := handles[w%len(handles)]
				for _, i := range rand.Perm(rows) {
					won, err := claim(ctx, hl, ids[i], fmt.Sprintf("worker-%d", w))
					if err != nil {
						t.Errorf("claim %s: %v", ids[i], err)
						return
					}
					if won {
						mu.Lock()
						claimed[ids[i]]++
						mu.Unlock()
					}
				}
			})
		}
		wg.Wait()
	})
	for _, id := range ids {
		c := mustGet(t, l, id)
		switch {
		case expired[id]+claimed[id] != 1:
			t.Errorf("%s: expired %d times and claimed %d times, want one of them once", id, expired[id], claimed[id])
		case expired[id] == 1 && c.Status != ledger.Expired, claimed[id] == 1 && c.Status != ledger.Applying:
			t.Errorf("%s: reported expired %d, claimed %d, but it is %s", id, expired[id], claimed[id], c.Status)
		}
	}
}

func testConcurrentInserts(t *testing.T, h Harness) {
	ctx := ctxFor(t)
	l, _ := open(t, h)
	handles := []*ledger.Ledger{l}
	if h.OpenSecond != nil {
		handles = append(handles, second(t, h, l))
	}
	insertRuns(t, l, "run_1")
	const workers, each = 8, 25
	within(t, "concurrent previews", func() {
		var wg sync.WaitGroup
		for w := range workers {
			wg.Go(func() {
				hl := handles[w%len(handles)]
				for i := range each {
					c := pendingChange(fmt.Sprintf("chg_%d_%02d", w, i), t0.Add(time.Duration(i)*time.Millisecond))
					c.RunID = "run_1"
					// As a preview joining a run does: check the run,
					// then insert, in one transaction.
					err := hl.WithTx(ctx, func(tx *ledger.Tx) error {
						if _, err := tx.Run("run_1"); err != nil {
							return err
						}
						return tx.InsertChange(c)
					})
					if err != nil {
						t.Errorf("insert %s: %v", c.ID, err)
						return
					}
				}
			})
		}
		wg.Wait()
	})
	if ids := changeIDs(t, l, ledger.ChangeFilter{RunID: "run_1"}); len(ids) != workers*each {
		t.Errorf("%d changes landed, want %d", len(ids), workers*each)
	}
}

func testDeleteRunRacesJoin(t *testing.T, h Harness) {
	// A change joins a run in a transaction that is still open when
	// pruning tries to delete the run as empty: the delete must wait,
	// then keep the run (and report nothing deleted), not fail.
	ctx := ctxFor(t)
	l, _ := open(t, h)
	insertRuns(t, l, "run_1")
	joined, release := make(chan struct{}), make(chan struct{})
	txDone := make(chan error, 1)
	go func() {
		txDone <- l.WithTx(ctx, func(tx *ledger.Tx) error {
			c := pendingChange("chg_1", t0)
			c.RunID = "run_1"
			if err := tx.InsertChange(c); err != nil {
				close(joined)
				return err
			}
			close(joined)
			<-release
			return nil
		})
	}()
	<-joined
	type result struct {
		n   int
		err error
	}
	deleted := make(chan result, 1)
	go func() {
		n, _, err := driver.BackendOf(l).DeleteRuns(ctx, l.DB(), []string{"run_1"})
		deleted <- result{n, err}
	}()
	// Give the delete time to reach the lock; it is correct either way.
	time.Sleep(200 * time.Millisecond)
	close(release)
	within(t, "deleting a run while a change joins it", func() {
		if err := <-txDone; err != nil {
			t.Errorf("joining the run: %v", err)
		}
		if r := <-deleted; r.n != 0 || r.err != nil {
			t.Errorf("DeleteRuns = %d, %v; want 0 and no error: a change joined the run", r.n, r.err)
		}
	})
	if _, err := l.Run(ctx, "run_1"); err != nil {
		t.Errorf("the run was deleted: %v", err)
	}
	if c := mustGet(t, l, "chg_1"); c.RunID != "run_1" {
		t.Errorf("the change lost its run: %q", c.RunID)
	}
}
