package ledgertest

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/mcp-changeset/changeset-go/ledger"
	"github.com/mcp-changeset/changeset-go/ledger/driver"
)

// clientCounts are the numbers of concurrent clients Benchmark measures.
var clientCounts = []int{1, 4, 16}

// Benchmark measures full change cycles on the backend that h opens, with
// 1, 4 and 16 concurrent clients (sub-benchmarks "clients=N"). One cycle
// is what a preview, an apply and an undo write to the ledger, as five
// write transactions: insert the pending change; claim it (read,
// pending → applying); record the apply (applying → applied); claim the
// undo (read, applied → undoing); record the undo (undoing → undone).
//
// Each client is one goroutine running cycles back to back until b.N
// cycles are done in all; ns/op is wall time per cycle across all
// clients, and cycles/s its inverse. A transaction that fails with
// [ledger.ErrBusy] (a lock waited for longer than the busy timeout) is
// run again, as package changeset does when it records an outcome;
// busy/op counts those retries per cycle. (b.RunParallel is not used: it
// runs a multiple of GOMAXPROCS goroutines, so it cannot run exactly one
// client on a machine with more than one CPU.)
func Benchmark(b *testing.B, h Harness) {
	for _, clients := range clientCounts {
		b.Run(fmt.Sprintf("clients=%d", clients), func(b *testing.B) {
			l := h.Open(b, nil)
			ctx := context.Background()
			var next, failed, busy atomic.Int64
			var wg sync.WaitGroup
			b.ResetTimer()
			for w := range clients {
				wg.Go(func() {
					for n := next.Add(1); n <= int64(b.N) && failed.Load() == 0; n = next.Add(1) {
						start := time.Now()
						if err := cycle(ctx, l, fmt.Sprintf("chg_%04x%016x", w, n), &busy); err != nil {
							if failed.Add(1) == 1 {
								b.Errorf("client %d, cycle %d, after %v: %v", w, n, time.Since(start), err)
							}
							return
						}
					}
				})
			}
			wg.Wait()
			b.StopTimer()
			if s := b.Elapsed().Seconds(); s > 0 {
				b.ReportMetric(float64(b.N)/s, "cycles/s")
			}
			b.ReportMetric(float64(busy.Load())/float64(b.N), "busy/op")
		})
	}
}

// cycle previews, applies and undoes one change, as five transactions,
// counting in busy the transactions it had to run again.
func cycle(ctx context.Context, l *ledger.Ledger, id string, busy *atomic.Int64) error {
	withTx := func(fn func(tx *ledger.Tx) error) error {
		for attempt := 1; ; attempt++ {
			err := l.WithTx(ctx, fn)
			if !errors.Is(err, ledger.ErrBusy) || attempt == 10 {
				return err
			}
			busy.Add(1)
		}
	}
	now := time.Now()
	c := &ledger.Change{
		ID: id, Action: "set_setting", Status: ledger.Pending, ScopeHash: "scope",
		Resource: "setting:theme", Payload: json.RawMessage(`{"key":"theme","value":"dark"}`),
		PayloadHash: "0123456789abcdef0123456789abcdef0123456789abcdef0123456789abcdef",
		Diff:        json.RawMessage(`[{"after":"dark","before":"light","field":"theme"}]`),
		Summary:     `Set theme to "dark"`, ConfirmHash: "confirm-digest", Undoable: true,
		CreatedAt: now, UpdatedAt: now, ExpiresAt: now.Add(15 * time.Minute),
	}
	if err := withTx(func(tx *ledger.Tx) error { return tx.InsertChange(c) }); err != nil {
		return err
	}
	claim := func(from, to ledger.Status, edit func(*ledger.Change)) error {
		// A claim reads the row in its transaction and writes it back.
		return withTx(func(tx *ledger.Tx) error {
			got, err := tx.Change(id)
			if err != nil {
				return err
			}
			if got.Status != from {
				return fmt.Errorf("change %s is %s, not %s", id, got.Status, from)
			}
			got.Status, got.UpdatedAt = to, time.Now()
			edit(got)
			c = got
			return tx.UpdateChange(got, from)
		})
	}
	finish := func(from, to ledger.Status, edit func(*ledger.Change)) error {
		// Recording an outcome writes back the row the claim returned.
		c.Status, c.UpdatedAt = to, time.Now()
		edit(c)
		return withTx(func(tx *ledger.Tx) error { return tx.UpdateChange(c, from) })
	}
	if err := claim(ledger.Pending, ledger.Applying, func(c *ledger.Change) { c.ConfirmHash, c.AppliedBy = "", "agent" }); err != nil {
		return err
	}
	if err := finish(ledger.Applying, ledger.Applied, func(c *ledger.Change) {
		c.AppliedAt, c.Result, c.UndoHash = time.Now(), json.RawMessage(`{"previous":"light"}`), "undo-digest"
		c.Before, c.After = json.RawMessage(`"light"`), json.RawMessage(`"dark"`)
	}); err != nil {
		return err
	}
	if err := claim(ledger.Applied, ledger.Undoing, func(c *ledger.Change) { c.UndoHash, c.UndoneBy = "", "agent" }); err != nil {
		return err
	}
	return finish(ledger.Undoing, ledger.Undone, func(c *ledger.Change) { c.UndoneAt = time.Now() })
}

// BenchmarkHistory measures what the history costs a commit: one op is a
// claim (read the pending change, pending → applying) and a finish
// (applying → applied), two write transactions, by one client. In
// "history=on" they go through ledger.Tx, which appends a history entry
// in each; in "history=off" the same statements run through the Backend
// directly, in the same transactions, appending nothing. The ratio of the
// two ns/op is the cost of the history per transition.
func BenchmarkHistory(b *testing.B, h Harness) {
	for _, on := range []bool{false, true} {
		b.Run(fmt.Sprintf("history=%v", map[bool]string{false: "off", true: "on"}[on]), func(b *testing.B) {
			l := h.Open(b, nil)
			ctx := context.Background()
			be := driver.BackendOf(l)
			update := func(tx *ledger.Tx, c *ledger.Change, from ledger.Status) error {
				if on {
					return tx.UpdateChange(c, from)
				}
				return be.UpdateChange(ctx, tx.SQL(), c, from)
			}
			now := time.Now()
			for n := range b.N {
				c := &ledger.Change{
					ID: fmt.Sprintf("chg_%020x", n), Action: "set_setting", Status: ledger.Pending, ScopeHash: "scope",
					Payload: json.RawMessage(`{"key":"theme","value":"dark"}`), ConfirmHash: "confirm-digest",
					PreviewedBy: "agent:alice", CreatedAt: now, UpdatedAt: now, ExpiresAt: now.Add(time.Hour),
				}
				if err := be.InsertChange(ctx, l.DB(), c); err != nil {
					b.Fatal(err)
				}
			}
			b.ResetTimer()
			for n := range b.N {
				id := fmt.Sprintf("chg_%020x", n)
				var c *ledger.Change
				err := l.WithTx(ctx, func(tx *ledger.Tx) error {
					got, err := tx.Change(id)
					if err != nil {
						return err
					}
					got.Status, got.ConfirmHash, got.AppliedBy, got.UpdatedAt = ledger.Applying, "", "agent:alice", time.Now()
					c = got
					return update(tx, got, ledger.Pending)
				})
				if err != nil {
					b.Fatal(err)
				}
				c.Status, c.UpdatedAt, c.AppliedAt, c.Result = ledger.Applied, time.Now(), time.Now(), json.RawMessage(`{"previous":"light"}`)
				if err := l.WithTx(ctx, func(tx *ledger.Tx) error { return update(tx, c, ledger.Applying) }); err != nil {
					b.Fatal(err)
				}
			}
		})
	}
}
