package ledgertest

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"testing"
	"time"

	"github.com/mcp-changeset/changeset-go/ledger"
)

func exerciseOutbox(t *testing.T, h Harness) {
	runAll(t, h, []test{
		{"EventsCommitWithTheirTransition", testOutboxWithTransition},
		{"ALeaseKeepsAnEventFromOthersUntilItEnds", testOutboxLease},
		{"AFailedAttemptWaitsForItsNextTime", testOutboxFailure},
		{"PruneKeepsUndeliveredEventsUntilTheLedgersCutOff", testOutboxPrune},
		{"TwoHandlesLeasingAtOnceNeverShareAnEvent", testOutboxConcurrentLeases},
	})
}

// addEvents writes n events named name at t0 plus i milliseconds, one
// transaction each, and returns their IDs in that order.
func addEvents(t *testing.T, l *ledger.Ledger, name string, n int) []string {
	t.Helper()
	var ids []string
	for i := range n {
		err := l.WithTx(context.Background(), func(tx *ledger.Tx) error {
			e, err := tx.AddEvent(ledger.EventBody{Event: name, At: t0.Add(time.Duration(i) * time.Millisecond), ChangeID: fmt.Sprintf("chg_%d", i)})
			if err == nil {
				ids = append(ids, e.ID)
			}
			return err
		})
		if err != nil {
			t.Fatal(err)
		}
	}
	return ids
}

func eventIDs(es []*ledger.Event) []string {
	out := []string{}
	for _, e := range es {
		out = append(out, e.ID)
	}
	return out
}

func testOutboxWithTransition(t *testing.T, h Harness) {
	ctx := context.Background()
	l, _ := open(t, h)
	c := pendingChange("chg_1", t0)
	c.Summary, c.PreviewedBy = "delete note", "agent:alice"
	insertChanges(t, l, c)
	// A rolled back failure leaves no event.
	boom := errors.New("rolled back")
	err := l.WithTx(ctx, func(tx *ledger.Tx) error {
		f := c.Clone()
		f.Status, f.ConfirmHash, f.Failure, f.UpdatedAt = ledger.ApplyFailed, "", ledger.FailureError, sec(1)
		if err := tx.UpdateChange(f, ledger.Pending); err != nil {
			return err
		}
		return boom
	})
	if !errors.Is(err, boom) {
		t.Fatal(err)
	}
	if es, err := l.Events(ctx, ledger.EventFilter{}); err != nil || len(es) != 0 {
		t.Fatalf("events after a rollback: %d, %v", len(es), err)
	}
	f := c.Clone()
	f.Status, f.ConfirmHash, f.Failure, f.UpdatedAt = ledger.ApplyFailed, "", ledger.FailureError, sec(1)
	if err := l.WithTx(ctx, func(tx *ledger.Tx) error { return tx.UpdateChange(f, ledger.Pending) }); err != nil {
		t.Fatal(err)
	}
	ev := bodies(t, l, ledger.EventChangeFailed)
	if len(ev) != 1 || ev[0].ChangeID != c.ID || ev[0].Summary != "delete note" || ev[0].RequestedBy != "agent:alice" || !ev[0].At.Equal(sec(1)) {
		t.Fatalf("change.failed events: %+v", ev)
	}
	es, err := l.Events(ctx, ledger.EventFilter{Undelivered: true})
	if err != nil || len(es) != 1 || es[0].Attempts != 0 || !es[0].NextAttemptAt.Equal(storedTime(sec(1))) || es[0].LeaseOwner != "" || !es[0].DeliveredAt.IsZero() {
		t.Fatalf("the stored event: %+v, %v", es, err)
	}
	// A run's undo that ends sends run.undone.
	r := &ledger.Run{ID: "run_1", Label: "tidy", Status: ledger.RunUndoing, UndoneBy: "agent:bob", CreatedAt: t0, UpdatedAt: t0}
	if err := l.WithTx(ctx, func(tx *ledger.Tx) error { return tx.InsertRun(r) }); err != nil {
		t.Fatal(err)
	}
	r.Status, r.UpdatedAt = ledger.RunPartiallyUndone, sec(2)
	if err := l.WithTx(ctx, func(tx *ledger.Tx) error { return tx.UpdateRun(r, ledger.RunUndoing) }); err != nil {
		t.Fatal(err)
	}
	if ev := bodies(t, l, ledger.EventRunUndone); len(ev) != 1 || ev[0].RunID != "run_1" || ev[0].Summary != "tidy" || ev[0].DecidedBy != "agent:bob" {
		t.Fatalf("run.undone events: %+v", ev)
	}
	if err := l.WithTx(ctx, func(tx *ledger.Tx) error { _, err := tx.AddEvent(ledger.EventBody{}); return err }); err == nil {
		t.Error("an event without a name was added")
	}
}

func testOutboxLease(t *testing.T, h Harness) {
	ctx := context.Background()
	l, clk := open(t, h)
	ids := addEvents(t, l, "test.event", 3)
	clk.Set(sec(10))
	got, err := l.LeaseEvents(ctx, "replica-a", 2, time.Minute)
	if err != nil || fmt.Sprint(eventIDs(got)) != fmt.Sprint(ids[:2]) {
		t.Fatalf("lease of 2: %v, %v; want %v", eventIDs(got), err, ids[:2])
	}
	if got[0].LeaseOwner != "replica-a" || !got[0].LeaseUntil.Equal(storedTime(sec(70))) || got[0].Attempts != 1 {
		t.Errorf("a leased event: %+v", got[0])
	}
	other, err := l.LeaseEvents(ctx, "replica-b", 10, time.Minute)
	if err != nil || fmt.Sprint(eventIDs(other)) != fmt.Sprint(ids[2:]) {
		t.Fatalf("replica-b leased %v, %v; want only %v", eventIDs(other), err, ids[2:])
	}
	if none, err := l.LeaseEvents(ctx, "replica-c", 10, time.Minute); err != nil || len(none) != 0 {
		t.Fatalf("while every lease is live, replica-c leased %v, %v", eventIDs(none), err)
	}
	if err := l.EventDelivered(ctx, ids[0], "replica-a"); err != nil {
		t.Fatal(err)
	}
	if err := l.EventDelivered(ctx, ids[0], "replica-a"); !errors.Is(err, ledger.ErrConflict) {
		t.Errorf("delivered twice: %v, want ErrConflict", err)
	}
	if err := l.EventDelivered(ctx, ids[2], "replica-a"); !errors.Is(err, ledger.ErrConflict) {
		t.Errorf("marked by a replica that does not hold it: %v, want ErrConflict", err)
	}
	// replica-a's lease on ids[1] runs out: replica-c takes it over, and
	// replica-a can no longer mark it.
	clk.Set(sec(70))
	taken, err := l.LeaseEvents(ctx, "replica-c", 10, time.Minute)
	if err != nil || fmt.Sprint(eventIDs(taken)) != fmt.Sprint(ids[1:]) || taken[0].Attempts != 2 {
		t.Fatalf("after the leases ran out, replica-c leased %v, %v; want %v on their second attempt", eventIDs(taken), err, ids[1:])
	}
	if err := l.EventFailed(ctx, ids[1], "replica-a", sec(80), "late"); !errors.Is(err, ledger.ErrConflict) {
		t.Errorf("an outcome after the lease was lost: %v, want ErrConflict", err)
	}
	if err := l.EventDelivered(ctx, ids[1], "replica-c"); err != nil {
		t.Fatal(err)
	}
	es, err := l.Events(ctx, ledger.EventFilter{Undelivered: true})
	if err != nil || fmt.Sprint(eventIDs(es)) != fmt.Sprint(ids[2:]) {
		t.Errorf("undelivered: %v, %v; want %v", eventIDs(es), err, ids[2:])
	}
	delivered, _ := l.Events(ctx, ledger.EventFilter{})
	if !delivered[0].DeliveredAt.Equal(storedTime(sec(10))) || delivered[0].LeaseOwner != "" || !delivered[0].LeaseUntil.IsZero() {
		t.Errorf("a delivered event: %+v", delivered[0])
	}
	if _, err := l.LeaseEvents(ctx, "", 1, time.Minute); err == nil {
		t.Error("a lease without an owner was taken")
	}
	page, err := l.Events(ctx, ledger.EventFilter{After: &ledger.ChangeKey{CreatedAt: delivered[0].CreatedAt, ID: delivered[0].ID}, Limit: 1})
	if err != nil || len(page) != 1 || page[0].ID != ids[1] {
		t.Errorf("the page after the first event: %v, %v", eventIDs(page), err)
	}
}

func testOutboxFailure(t *testing.T, h Harness) {
	ctx := context.Background()
	l, clk := open(t, h)
	ids := addEvents(t, l, "test.event", 1)
	if _, err := l.LeaseEvents(ctx, "replica-a", 1, time.Minute); err != nil {
		t.Fatal(err)
	}
	reason := "HTTP 503 \x00 from the receiver " + string([]byte{0xff}) + string(make([]byte, 2*ledger.MaxEventError))
	if err := l.EventFailed(ctx, ids[0], "replica-a", sec(30), reason); err != nil {
		t.Fatal(err)
	}
	es, _ := l.Events(ctx, ledger.EventFilter{})
	if e := es[0]; !e.NextAttemptAt.Equal(storedTime(sec(30))) || e.LeaseOwner != "" || e.Attempts != 1 || len(e.LastError) > ledger.MaxEventError || e.LastError[:8] != "HTTP 503" {
		t.Errorf("after a failed attempt: next %v, owner %q, attempts %d, %d bytes of error", e.NextAttemptAt, e.LeaseOwner, e.Attempts, len(e.LastError))
	}
	clk.Set(sec(29))
	if got, _ := l.LeaseEvents(ctx, "replica-a", 1, time.Minute); len(got) != 0 {
		t.Error("an event was leased before its next attempt was due")
	}
	clk.Set(sec(30))
	if got, _ := l.LeaseEvents(ctx, "replica-b", 1, time.Minute); len(got) != 1 || got[0].Attempts != 2 || got[0].ID != ids[0] {
		t.Errorf("at its next attempt: %+v", got)
	}
}

func testOutboxPrune(t *testing.T, h Harness) {
	ctx := context.Background()
	l, clk := open(t, h)
	ids := addEvents(t, l, "test.event", 3)
	if _, err := l.LeaseEvents(ctx, "r", 2, time.Minute); err != nil {
		t.Fatal(err)
	}
	if err := l.EventDelivered(ctx, ids[0], "r"); err != nil {
		t.Fatal(err)
	}
	clk.Set(sec(3600))
	if err := l.EventDelivered(ctx, ids[1], "r"); !errors.Is(err, ledger.ErrConflict) {
		t.Fatalf("an outcome an hour after the lease ended: %v", err)
	}
	n, err := l.PruneEvents(ctx, time.Minute)
	if err != nil || n != 1 {
		t.Fatalf("PruneEvents = %d, %v; want 1", n, err)
	}
	es, _ := l.Events(ctx, ledger.EventFilter{})
	if fmt.Sprint(eventIDs(es)) != fmt.Sprint(ids[1:]) {
		t.Errorf("left %v, want the undelivered %v", eventIDs(es), ids[1:])
	}

	// Prune's cut-off takes the events of that age too, delivered or not,
	// so that a ledger without a sender does not keep them forever; a
	// newer event stays.
	var fresh string
	if err := l.WithTx(ctx, func(tx *ledger.Tx) error {
		e, err := tx.AddEvent(ledger.EventBody{Event: "test.event"}) // at the clock: an hour after the others
		if e != nil {
			fresh = e.ID
		}
		return err
	}); err != nil {
		t.Fatal(err)
	}
	if _, err := l.Prune(ctx, ledger.PruneOptions{OlderThan: 30 * time.Minute}); err != nil {
		t.Fatal(err)
	}
	es, _ = l.Events(ctx, ledger.EventFilter{})
	if fmt.Sprint(eventIDs(es)) != fmt.Sprint([]string{fresh}) {
		t.Errorf("after Prune: %v, want only the newer event %s", eventIDs(es), fresh)
	}
}

// testOutboxConcurrentLeases leases from two handles on one ledger (as two
// replicas on one PostgreSQL schema) in several goroutines each, with
// leases that outlive the test: every event is leased exactly once.
func testOutboxConcurrentLeases(t *testing.T, h Harness) {
	if h.OpenSecond == nil {
		t.Skip("the harness opens no second handle")
	}
	ctx := ctxFor(t)
	l, clk := open(t, h)
	l2 := second(t, h, l)
	const events = 60
	ids := addEvents(t, l, "test.event", events)
	clk.Set(sec(1))
	var mu sync.Mutex
	leased := map[string]string{}
	var wg sync.WaitGroup
	for worker := range 6 {
		wg.Go(func() {
			owner := fmt.Sprintf("replica-%d", worker)
			lg := []*ledger.Ledger{l, l2}[worker%2]
			for {
				got, err := lg.LeaseEvents(ctx, owner, 3, time.Hour)
				if err != nil {
					t.Error(err)
					return
				}
				if len(got) == 0 {
					return
				}
				mu.Lock()
				for _, e := range got {
					if prev, dup := leased[e.ID]; dup {
						t.Errorf("event %s leased by %s while %s held it", e.ID, owner, prev)
					}
					leased[e.ID] = owner
				}
				mu.Unlock()
				for _, e := range got {
					if err := lg.EventDelivered(ctx, e.ID, owner); err != nil {
						t.Error(err)
					}
				}
			}
		})
	}
	wg.Wait()
	if len(leased) != events {
		t.Errorf("%d of %d events leased", len(leased), len(ids))
	}
	if left, err := l.Events(ctx, ledger.EventFilter{Undelivered: true}); err != nil || len(left) != 0 {
		t.Errorf("undelivered after the run: %d, %v", len(left), err)
	}
}
