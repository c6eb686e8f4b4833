package notify_test

import (
	"context"
	"encoding/json"
	"io"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/mcp-changeset/changeset-go/ledger"
	_ "github.com/mcp-changeset/changeset-go/ledger/sqlite"
	"github.com/mcp-changeset/changeset-go/notify"
)

var secret = []byte("0123456789abcdef0123456789abcdef")

// receiver is a real HTTP server on loopback that records what it gets
// and answers with the status its fail function chooses.
type receiver struct {
	srv  *httptest.Server
	mu   sync.Mutex
	got  []delivery
	fail func(n int) int // status for the n-th request (0-based)
}

type delivery struct {
	event, id, signature string
	body                 []byte
}

func newReceiver(t *testing.T, fail func(n int) int) *receiver {
	r := &receiver{fail: fail}
	r.srv = httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, req *http.Request) {
		body, _ := io.ReadAll(req.Body)
		r.mu.Lock()
		n := len(r.got)
		r.got = append(r.got, delivery{req.Header.Get(notify.HeaderEvent), req.Header.Get(notify.HeaderDelivery), req.Header.Get(notify.HeaderSignature), body})
		r.mu.Unlock()
		status := http.StatusNoContent
		if r.fail != nil {
			status = r.fail(n)
		}
		w.WriteHeader(status)
	}))
	t.Cleanup(r.srv.Close)
	return r
}

func (r *receiver) deliveries() []delivery {
	r.mu.Lock()
	defer r.mu.Unlock()
	return append([]delivery(nil), r.got...)
}

// clock is a test clock shared by the ledger and the webhook.
type clock struct {
	mu sync.Mutex
	t  time.Time
}

func (c *clock) Now() time.Time { c.mu.Lock(); defer c.mu.Unlock(); return c.t }
func (c *clock) Advance(d time.Duration) {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.t = c.t.Add(d)
}

func openLedger(t *testing.T, path string, clk *clock) *ledger.Ledger {
	t.Helper()
	l, err := ledger.Open(context.Background(), path, ledger.OpenOptions{Create: true, Clock: clk.Now})
	if err != nil {
		t.Fatal(err)
	}
	return l
}

// addEvent writes one event to the outbox as a transition would.
func addEvent(t *testing.T, l *ledger.Ledger, name, approvalID string) string {
	t.Helper()
	var id string
	err := l.WithTx(context.Background(), func(tx *ledger.Tx) error {
		e, err := tx.AddEvent(ledger.EventBody{Event: name, ApprovalID: approvalID, ChangeID: "chg_00000000000000000001",
			Action: "set_setting", Summary: "Set theme to dark", RequestedBy: "agent:ana"})
		if err != nil {
			return err
		}
		id = e.ID
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	return id
}

func TestWebhook_DeliversSignedEventsWithTheirLink(t *testing.T) {
	t.Parallel()
	clk := &clock{t: time.Date(2026, 12, 1, 9, 0, 0, 0, time.UTC)}
	l := openLedger(t, filepath.Join(t.TempDir(), "ledger.db"), clk)
	defer l.Close()
	rcv := newReceiver(t, nil)
	id := addEvent(t, l, ledger.EventApprovalRequested, "apr_00000000000000000001")
	w := &notify.Webhook{URL: rcv.srv.URL, Secret: secret, Now: clk.Now,
		Link: func(b ledger.EventBody) string { return "https://dash.example/approvals/" + b.ApprovalID }}
	n, err := w.Deliver(context.Background(), l)
	if err != nil || n != 1 {
		t.Fatalf("Deliver = %d, %v; want 1 delivered", n, err)
	}
	got := rcv.deliveries()
	if len(got) != 1 {
		t.Fatalf("receiver got %d requests", len(got))
	}
	d := got[0]
	if d.event != ledger.EventApprovalRequested || d.id != id {
		t.Errorf("headers: event %q delivery %q; want %q %q", d.event, d.id, ledger.EventApprovalRequested, id)
	}
	if !notify.Verify(secret, d.body, d.signature) {
		t.Errorf("signature %q does not verify", d.signature)
	}
	if notify.Verify([]byte("another secret, as long as 32 b"), d.body, d.signature) {
		t.Error("the signature verifies under another secret")
	}
	var body map[string]any
	if err := json.Unmarshal(d.body, &body); err != nil {
		t.Fatal(err)
	}
	for _, k := range []string{"id", "event", "at", "approval_id", "change_id", "run_id", "action", "summary", "requested_by", "decided_by", "url"} {
		if _, ok := body[k]; !ok {
			t.Errorf("body has no %q: %s", k, d.body)
		}
	}
	if body["id"] != id || body["url"] != "https://dash.example/approvals/apr_00000000000000000001" {
		t.Errorf("body = %s", d.body)
	}
	// Delivered: the next round sends nothing.
	if n, err := w.Deliver(context.Background(), l); err != nil || n != 0 || len(rcv.deliveries()) != 1 {
		t.Fatalf("second round: %d, %v, %d requests", n, err, len(rcv.deliveries()))
	}
}

// A receiver that fails gets the same event again, with the same delivery
// ID and body, after the backoff, even when the sender's process restarts
// in between (a new ledger handle and a new Webhook on the same file).
func TestWebhook_RetriesWithTheSameDeliveryIDAcrossARestart(t *testing.T) {
	t.Parallel()
	clk := &clock{t: time.Date(2026, 12, 1, 9, 0, 0, 0, time.UTC)}
	path := filepath.Join(t.TempDir(), "ledger.db")
	l := openLedger(t, path, clk)
	rcv := newReceiver(t, func(n int) int {
		if n < 2 {
			return http.StatusServiceUnavailable
		}
		return http.StatusOK
	})
	id := addEvent(t, l, ledger.EventChangeFailed, "")
	w := &notify.Webhook{URL: rcv.srv.URL, Secret: secret, Now: clk.Now}
	if n, err := w.Deliver(context.Background(), l); err != nil || n != 0 {
		t.Fatalf("first attempt: %d, %v; want a failure", n, err)
	}
	// Not due before the backoff, which is under 30 s the first time.
	if n, _ := w.Deliver(context.Background(), l); n != 0 || len(rcv.deliveries()) != 1 {
		t.Fatalf("retried before the backoff: %d requests", len(rcv.deliveries()))
	}
	if notify.Backoff(1) > 30*time.Second {
		t.Fatalf("first retry after %v; the contract says within 30 s", notify.Backoff(1))
	}
	clk.Advance(notify.Backoff(1))
	if n, _ := w.Deliver(context.Background(), l); n != 0 || len(rcv.deliveries()) != 2 {
		t.Fatalf("second attempt: %d delivered, %d requests", n, len(rcv.deliveries()))
	}
	l.Close()

	// The process restarts: a new handle, a new sender with another name.
	l = openLedger(t, path, clk)
	defer l.Close()
	w = &notify.Webhook{URL: rcv.srv.URL, Secret: secret, Now: clk.Now}
	clk.Advance(notify.Backoff(2))
	if n, err := w.Deliver(context.Background(), l); err != nil || n != 1 {
		t.Fatalf("third attempt after the restart: %d, %v", n, err)
	}
	got := rcv.deliveries()
	for i, d := range got {
		if d.id != id || string(d.body) != string(got[0].body) || d.signature != got[0].signature {
			t.Errorf("attempt %d: delivery %q, body %s; want the first attempt's", i+1, d.id, d.body)
		}
	}
	events, err := l.Events(context.Background(), ledger.EventFilter{})
	if err != nil || len(events) != 1 || events[0].DeliveredAt.IsZero() || events[0].Attempts != 3 {
		t.Fatalf("outbox after delivery: %+v, %v", events, err)
	}
}

// Retries go on for at least an hour: the attempts the backoff schedules
// within the first hour, and at least one after it.
func TestBackoff_RetriesForMoreThanAnHour(t *testing.T) {
	var at time.Duration
	n := 1
	for ; at < 2*time.Hour; n++ {
		d := notify.Backoff(n)
		if d <= 0 || d > time.Hour {
			t.Fatalf("Backoff(%d) = %v", n, d)
		}
		at += d
	}
	if n < 6 {
		t.Fatalf("only %d attempts in two hours", n)
	}
}

func TestWebhook_RefusesAURLOrSecretItCannotUse(t *testing.T) {
	for _, w := range []notify.Webhook{
		{URL: "ftp://example.com/hook", Secret: secret},
		{URL: "example.com/hook", Secret: secret},
		{URL: "https://example.com/hook"},
	} {
		if err := w.Run(context.Background(), nil); err == nil {
			t.Errorf("Run(%+v) = nil; want an error", w.URL)
		}
	}
}

func TestReadSecretFile_TrimsAndRefusesShortSecrets(t *testing.T) {
	dir := t.TempDir()
	write := func(name, content string) string {
		p := filepath.Join(dir, name)
		if err := writeFile(p, content); err != nil {
			t.Fatal(err)
		}
		return p
	}
	s, err := notify.ReadSecretFile(write("ok", "  "+string(secret)+"\n"))
	if err != nil || string(s) != string(secret) {
		t.Fatalf("ReadSecretFile = %q, %v", s, err)
	}
	if _, err := notify.ReadSecretFile(write("short", "abc\n")); err == nil || strings.Contains(err.Error(), "abc") {
		t.Fatalf("short secret: %v (must fail without quoting it)", err)
	}
}

func writeFile(path, content string) error { return os.WriteFile(path, []byte(content), 0o600) }

// A receiver that answers with a redirect has not taken the event: the
// sender does not follow it (a moved webhook must be configured again),
// and the event waits for its retry.
func TestWebhook_DoesNotFollowARedirect(t *testing.T) {
	t.Parallel()
	clk := &clock{t: time.Date(2026, 12, 1, 9, 0, 0, 0, time.UTC)}
	l := openLedger(t, filepath.Join(t.TempDir(), "ledger.db"), clk)
	defer l.Close()
	elsewhere := newReceiver(t, nil)
	moved := httptest.NewServer(http.RedirectHandler(elsewhere.srv.URL, http.StatusTemporaryRedirect))
	defer moved.Close()
	addEvent(t, l, ledger.EventChangeFailed, "")
	w := &notify.Webhook{URL: moved.URL, Secret: secret, Now: clk.Now}
	if n, err := w.Deliver(context.Background(), l); err != nil || n != 0 {
		t.Fatalf("Deliver = %d, %v; want the attempt to fail", n, err)
	}
	if got := elsewhere.deliveries(); len(got) != 0 {
		t.Fatalf("the redirect was followed: %d requests reached its target", len(got))
	}
	events, err := l.Events(context.Background(), ledger.EventFilter{Undelivered: true})
	if err != nil || len(events) != 1 || !strings.Contains(events[0].LastError, "307") {
		t.Fatalf("the event after a redirect: %+v, %v; want it undelivered with the status recorded", events, err)
	}
}
