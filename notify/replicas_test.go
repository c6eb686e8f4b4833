package notify_test

import (
	"context"
	"os"
	"sync"
	"testing"
	"time"

	"github.com/mcp-changeset/changeset-go/internal/pgtest"
	"github.com/mcp-changeset/changeset-go/ledger"
	_ "github.com/mcp-changeset/changeset-go/ledger/postgres"
	"github.com/mcp-changeset/changeset-go/notify"
)

func TestMain(m *testing.M) {
	code := m.Run()
	pgtest.Stop()
	os.Exit(code)
}

// Two replicas of a server share one PostgreSQL ledger, each with a
// webhook sender of its own, both polling at once: every event reaches
// the receiver, and none twice.
func TestWebhook_TwoReplicasOnOnePostgresLedgerDeliverEachEventOnce(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	dsn := pgtest.DSN(t)
	open := func() *ledger.Ledger {
		l, err := ledger.Open(ctx, dsn, ledger.OpenOptions{Create: true})
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { l.Close() })
		return l
	}
	a, b := open(), open()
	rcv := newReceiver(t, nil)
	const events = 60
	want := map[string]bool{}
	for i := range events {
		l := a
		if i%2 == 1 {
			l = b
		}
		want[addEvent(t, l, ledger.EventApprovalRequested, "")] = true
	}
	var wg sync.WaitGroup
	for _, l := range []*ledger.Ledger{a, b} {
		w := &notify.Webhook{URL: rcv.srv.URL, Secret: secret}
		wg.Go(func() {
			deadline := time.Now().Add(time.Minute)
			for time.Now().Before(deadline) && len(rcv.deliveries()) < events {
				if _, err := w.Deliver(ctx, l); err != nil {
					t.Error(err)
					return
				}
			}
		})
	}
	wg.Wait()
	seen := map[string]int{}
	for _, d := range rcv.deliveries() {
		seen[d.id]++
	}
	for id := range want {
		if seen[id] != 1 {
			t.Errorf("event %s delivered %d times, want once", id, seen[id])
		}
	}
	if len(seen) != events {
		t.Errorf("%d distinct deliveries, want %d", len(seen), events)
	}
}
