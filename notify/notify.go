// Package notify delivers a ledger's events to a webhook, so that the
// people behind an agent hear when something waits for them (an approval
// requested) or went wrong (a change failed), without watching the
// dashboard.
//
// The ledger writes each event into its outbox in the same transaction as
// the transition that causes it (see [ledger.Event]); a [Webhook] leases
// due events, POSTs each as JSON, and marks it delivered or failed. An
// event that fails, or whose sender dies before marking it, is sent again
// later, with the same delivery ID, until a receiver answers 2xx: delivery
// is at least once, and a receiver drops duplicates by the ID. Several
// replicas on one ledger share the work: a leased event is not leased
// again while its lease runs, so in the normal case each event is
// delivered by one replica, once.
//
// Every request carries three headers:
//
//	X-Changeset-Event: approval.requested
//	X-Changeset-Delivery: evt_5f0c…   (the body's "id"; the same on every retry)
//	X-Changeset-Signature: sha256=<hex HMAC-SHA256 of the body under the secret>
//
// A receiver checks the signature with [Verify] before it trusts the
// body. Events never carry a token or a payload: a summary, IDs, who asked
// and who decided, and a link to the dashboard.
package notify

import (
	"bytes"
	"context"
	"crypto/hmac"
	"crypto/rand"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net/http"
	"os"
	"strings"
	"time"

	"github.com/mcp-changeset/changeset-go/ledger"
)

// Headers of every delivery.
const (
	HeaderEvent     = "X-Changeset-Event"
	HeaderDelivery  = "X-Changeset-Delivery"
	HeaderSignature = "X-Changeset-Signature"
)

// Defaults of a Webhook's zero fields.
const (
	// DefaultPoll is how often a Webhook looks for due events: the first
	// attempt at an event goes out within this long of its transition
	// (the contract allows 10 seconds).
	DefaultPoll = 2 * time.Second
	// DefaultTimeout bounds one delivery: connecting, sending and reading
	// the answer's status.
	DefaultTimeout = 10 * time.Second
	// batch is how many events one round leases.
	batch = 10
)

// Outbox is the part of a ledger a Webhook uses; *ledger.Ledger has it.
type Outbox interface {
	LeaseEvents(ctx context.Context, owner string, limit int, d time.Duration) ([]*ledger.Event, error)
	EventDelivered(ctx context.Context, id, owner string) error
	EventFailed(ctx context.Context, id, owner string, next time.Time, reason string) error
}

// Webhook delivers events to one URL. Set URL and Secret; the other
// fields have defaults. Run it with [Webhook.Run].
type Webhook struct {
	// URL receives a POST per event. http and https URLs only.
	URL string
	// Secret signs every body (HMAC-SHA256). Use at least 32 random
	// bytes; [ReadSecretFile] reads one from a file.
	Secret []byte
	// Link, when set, returns the dashboard link an event's "url" field
	// carries: the approval's page for an approval's events, else the
	// change's or the run's. Without it "url" is empty.
	Link func(e ledger.EventBody) string
	// Client sends the requests (default: an http.Client with
	// DefaultTimeout that follows no redirects).
	Client *http.Client
	// Owner names this replica in the outbox's leases (default: a random
	// name per Webhook). Two replicas must not share one.
	Owner string
	// Poll is how often to look for due events (default DefaultPoll).
	Poll time.Duration
	// Timeout bounds one delivery (default DefaultTimeout).
	Timeout time.Duration
	// Logger receives a record per failed attempt and per delivery after
	// a failure. Never a secret or a body. Nil discards.
	Logger *slog.Logger
	// Now replaces time.Now for the backoff (tests).
	Now func() time.Time
}

// Check reports what is wrong with w's URL and secret, if anything.
func (w *Webhook) Check() error {
	switch {
	case !strings.HasPrefix(w.URL, "http://") && !strings.HasPrefix(w.URL, "https://"):
		return fmt.Errorf("notify: the webhook URL %q must start with http:// or https://", w.URL)
	case len(w.Secret) == 0:
		return errors.New("notify: the webhook needs a secret to sign its events (give a secret file)")
	}
	return nil
}

// Run delivers due events until ctx ends, looking every Poll. Errors of
// the outbox (a busy or closed ledger) are logged and retried at the next
// round; Run returns only when ctx ends, or at once when w is not valid
// (see Check).
func (w *Webhook) Run(ctx context.Context, out Outbox) error {
	if err := w.Check(); err != nil {
		return err
	}
	w.owner() // named once, before any round
	poll := w.Poll
	if poll <= 0 {
		poll = DefaultPoll
	}
	t := time.NewTicker(poll)
	defer t.Stop()
	for {
		if _, err := w.Deliver(ctx, out); err != nil && ctx.Err() == nil {
			w.logger().Warn("webhook: could not read the outbox; trying again", "err", err)
		}
		select {
		case <-ctx.Done():
			return nil
		case <-t.C:
		}
	}
}

// Deliver makes one round: it leases up to ten due events, sends each,
// and marks each delivered or failed. It returns how many it delivered.
func (w *Webhook) Deliver(ctx context.Context, out Outbox) (int, error) {
	timeout := w.timeout()
	// Long enough to send every event of the batch one after another,
	// with room to mark each: a lease that ran out would let another
	// replica send the same event again.
	lease := batch*timeout + time.Minute
	events, err := out.LeaseEvents(ctx, w.owner(), batch, lease)
	if err != nil {
		return 0, err
	}
	delivered := 0
	for _, e := range events {
		if ctx.Err() != nil {
			break // the lease runs out and the event is sent later
		}
		err := w.send(ctx, e)
		if err == nil {
			if err := out.EventDelivered(ctx, e.ID, w.owner()); err != nil {
				w.logger().Warn("webhook: delivered, but could not mark the event delivered; it may be sent again", "event", e.Name, "delivery", e.ID, "err", err)
				continue
			}
			if e.Attempts > 1 {
				w.logger().Info("webhook: delivered after a retry", "event", e.Name, "delivery", e.ID, "attempts", e.Attempts)
			}
			delivered++
			continue
		}
		next := w.now().Add(Backoff(e.Attempts))
		w.logger().Warn("webhook: delivery failed; will retry", "event", e.Name, "delivery", e.ID, "attempt", e.Attempts, "next_attempt", next.UTC().Format(time.RFC3339), "err", err)
		if err := out.EventFailed(ctx, e.ID, w.owner(), next, err.Error()); err != nil {
			w.logger().Warn("webhook: could not record the failed attempt", "delivery", e.ID, "err", err)
		}
	}
	return delivered, nil
}

// Backoff is how long to wait after the n-th failed attempt (n ≥ 1): 15
// seconds, then 1, 2, 5, 10 and 20 minutes, then an hour between attempts
// for as long as the event stays undelivered. The first retry comes
// within 30 seconds (15 s plus a poll), and attempts go on well past an
// hour, across restarts (the schedule lives in the outbox).
func Backoff(n int) time.Duration {
	steps := []time.Duration{15 * time.Second, time.Minute, 2 * time.Minute, 5 * time.Minute, 10 * time.Minute, 20 * time.Minute}
	if n < 1 {
		n = 1
	}
	if n <= len(steps) {
		return steps[n-1]
	}
	return time.Hour
}

// send POSTs one event and returns nil for a 2xx answer.
func (w *Webhook) send(ctx context.Context, e *ledger.Event) error {
	body, err := w.body(e)
	if err != nil {
		return err
	}
	ctx, cancel := context.WithTimeout(ctx, w.timeout())
	defer cancel()
	req, err := http.NewRequestWithContext(ctx, http.MethodPost, w.URL, bytes.NewReader(body))
	if err != nil {
		return err
	}
	req.Header.Set("Content-Type", "application/json")
	req.Header.Set("User-Agent", "changeset-go webhook")
	req.Header.Set(HeaderEvent, e.Name)
	req.Header.Set(HeaderDelivery, e.ID)
	req.Header.Set(HeaderSignature, Sign(w.Secret, body))
	resp, err := w.client().Do(req)
	if err != nil {
		return fmt.Errorf("no answer: %w", errors.Unwrap(err))
	}
	io.Copy(io.Discard, io.LimitReader(resp.Body, 64<<10))
	resp.Body.Close()
	if resp.StatusCode < 200 || resp.StatusCode > 299 {
		return fmt.Errorf("the receiver answered %s", resp.Status)
	}
	return nil
}

// body is the JSON sent for e: the stored body with its "url" set. It is
// the same on every attempt.
func (w *Webhook) body(e *ledger.Event) ([]byte, error) {
	var b ledger.EventBody
	if err := json.Unmarshal(e.Body, &b); err != nil {
		return nil, fmt.Errorf("the event's stored body is not valid: %w", err)
	}
	if w.Link != nil {
		b.URL = w.Link(b)
	}
	return json.Marshal(b)
}

// ReadSecretFile reads a webhook secret from a file: its content with
// surrounding white space trimmed, used as bytes. An empty secret is an
// error; so is one shorter than 16 bytes, which a receiver's attacker
// could guess.
func ReadSecretFile(path string) ([]byte, error) {
	b, err := os.ReadFile(path)
	if err != nil {
		return nil, fmt.Errorf("notify: webhook secret file: %w", err)
	}
	secret := bytes.TrimSpace(b)
	if len(secret) < 16 {
		return nil, fmt.Errorf("notify: the webhook secret in %s is %d bytes long; use at least 16 (e.g. openssl rand -hex 32 > %s)", path, len(secret), path)
	}
	return secret, nil
}

// Sign returns the value of the X-Changeset-Signature header for body:
// "sha256=" and the hex HMAC-SHA256 of body under secret.
func Sign(secret, body []byte) string {
	m := hmac.New(sha256.New, secret)
	m.Write(body)
	return "sha256=" + hex.EncodeToString(m.Sum(nil))
}

// Verify reports whether signature (an X-Changeset-Signature header) is
// body's under secret, comparing in constant time. A receiver calls it on
// the raw body, before decoding it.
func Verify(secret, body []byte, signature string) bool {
	return hmac.Equal([]byte(Sign(secret, body)), []byte(signature))
}

func (w *Webhook) client() *http.Client {
	if w.Client != nil {
		return w.Client
	}
	return defaultClient
}

// defaultClient follows no redirect: a webhook that moved must be
// configured again, not followed to wherever it points now.
var defaultClient = &http.Client{CheckRedirect: func(*http.Request, []*http.Request) error { return http.ErrUseLastResponse }}

func (w *Webhook) timeout() time.Duration {
	if w.Timeout > 0 {
		return w.Timeout
	}
	return DefaultTimeout
}

func (w *Webhook) owner() string {
	if w.Owner == "" {
		b := make([]byte, 8)
		rand.Read(b)
		w.Owner = "webhook-" + hex.EncodeToString(b)
	}
	return w.Owner
}

func (w *Webhook) now() time.Time {
	if w.Now != nil {
		return w.Now()
	}
	return time.Now()
}

func (w *Webhook) logger() *slog.Logger {
	if w.Logger != nil {
		return w.Logger
	}
	return slog.New(slog.DiscardHandler)
}
