package changeset_test

import (
	"context"
	"encoding/base64"
	"encoding/json"
	"errors"
	"fmt"
	"path/filepath"
	"strings"
	"testing"
	"time"

	changeset "github.com/mcp-changeset/changeset-go"
	"github.com/mcp-changeset/changeset-go/internal/canonjson"
	"github.com/mcp-changeset/changeset-go/internal/pgtest"
	"github.com/mcp-changeset/changeset-go/ledger"
	_ "github.com/mcp-changeset/changeset-go/ledger/postgres" // postgres:// ledgers
	"github.com/modelcontextprotocol/go-sdk/mcp"
)

// What is stored is what runs: a payload edited in the ledger behind the
// library's back is never applied or undone, on either backend, on the
// token path and on the user-approval path; and a proposal whose text is
// not valid UTF-8 is never stored.

// integrityBackend is a ledger backend the tamper tests run on.
type integrityBackend struct {
	name string
	// open returns the option that points every Guard of one test at the
	// same fresh ledger of this backend.
	open func(t *testing.T) func(*changeset.Options)
	// placeholder is the n-th (from 1) bind parameter in raw SQL.
	placeholder func(n int) string
}

var integrityBackends = []integrityBackend{
	{
		name: "sqlite",
		open: func(t *testing.T) func(*changeset.Options) {
			path := filepath.Join(t.TempDir(), "ledger.db")
			return func(o *changeset.Options) { o.LedgerPath = path }
		},
		placeholder: func(int) string { return "?" },
	},
	{
		name: "postgres",
		open: func(t *testing.T) func(*changeset.Options) {
			dsn := pgtest.DSN(t)
			l, err := ledger.Open(context.Background(), dsn, ledger.OpenOptions{Create: true})
			if err != nil {
				t.Fatalf("open the PostgreSQL ledger: %v", err)
			}
			t.Cleanup(func() { l.Close() })
			return func(o *changeset.Options) { o.Ledger = l }
		},
		placeholder: func(n int) string { return fmt.Sprintf("$%d", n) },
	},
}

// storedPayload is a change's payload column and its hash, as the ledger
// holds them.
type storedPayload struct{ payload, hash string }

// tamperer edits the payload of changes with raw SQL on a Guard's ledger
// database, as someone with write access to the ledger could.
type tamperer struct {
	t *testing.T
	g *changeset.Guard
	b integrityBackend
}

// stored reads the payload and hash of change id.
func (tm tamperer) stored(id string) storedPayload {
	tm.t.Helper()
	c, err := tm.g.Record(context.Background(), id)
	if err != nil {
		tm.t.Fatalf("Record(%s): %v", id, err)
	}
	return storedPayload{string(c.Payload), string(c.PayloadHash)}
}

// edit writes payload into change id's payload column, and with withHash
// also its hash as the library computes it (SHA-256 of the canonical
// JSON, hex). It returns what was stored before.
func (tm tamperer) edit(id, payload string, withHash bool) storedPayload {
	tm.t.Helper()
	before := tm.stored(id)
	next := storedPayload{payload: payload, hash: before.hash}
	if withHash {
		next.hash = canonjson.Hash([]byte(payload))
	}
	tm.write(id, next)
	return before
}

// write sets the payload and payload_hash columns of change id.
func (tm tamperer) write(id string, p storedPayload) {
	tm.t.Helper()
	ph := tm.b.placeholder
	q := fmt.Sprintf("UPDATE changes SET payload = %s, payload_hash = %s WHERE id = %s", ph(1), ph(2), ph(3))
	res, err := tm.g.Ledger().DB().Exec(q, p.payload, p.hash, id)
	if err != nil {
		tm.t.Fatalf("tamper with %s: %v", id, err)
	}
	if n, _ := res.RowsAffected(); n != 1 {
		tm.t.Fatalf("tamper with %s: %d rows updated", id, n)
	}
	if got := tm.stored(id); got != p {
		tm.t.Fatalf("tamper with %s: the ledger holds %+v, want %+v", id, got, p)
	}
}

func TestIntegrity_TamperedPayloadIsNeverApplied(t *testing.T) {
	for _, b := range integrityBackends {
		t.Run(b.name, func(t *testing.T) {
			shared := b.open(t)
			tf := newFixture(t, shared)
			af := newApprovalFixture(t, shared)
			t.Run("token/payload", func(t *testing.T) { tamperTokenApply(t, tf, b, false) })
			t.Run("token/payload and hash", func(t *testing.T) { tamperTokenApply(t, tf, b, true) })
			t.Run("approval/payload", func(t *testing.T) { tamperApproval(t, af, b, false) })
			t.Run("approval/payload and hash", func(t *testing.T) { tamperApproval(t, af, b, true) })
			t.Run("undo/payload", func(t *testing.T) { tamperUndo(t, tf, b, false) })
			t.Run("undo/payload and hash", func(t *testing.T) { tamperUndo(t, tf, b, true) })
		})
	}
}

// tamperTokenApply edits a pending change's payload (and its hash) and
// applies with the right token through the agent's tool and the Go API.
func tamperTokenApply(t *testing.T, f *fixture, b integrityBackend, withHash bool) {
	f.t = t
	ctx := context.Background()
	tm := tamperer{t, f.guard, b}
	key := "theme"
	if withHash {
		key = "language"
	}
	before := f.store.get(key)
	applies := f.store.applies.Load()
	id, token := f.preview("set", key, "dark")
	orig := tm.edit(id, `{"key":"`+key+`","value":"pwned"}`, withHash)

	args := map[string]any{"change_id": id, "confirmation_token": token}
	if withHash {
		// The token binds the hash it was issued with: it no longer matches.
		mustFail(t, f.session, "apply_change", args, "invalid confirmation token for change "+id+"; nothing was spent")
		if _, err := f.guard.Apply(ctx, id, token); !errors.Is(err, changeset.ErrInvalidToken) {
			t.Fatalf("Apply after the payload and its hash were edited: %v, want ErrInvalidToken", err)
		}
	} else {
		mustFail(t, f.session, "apply_change", args, "its stored payload does not match the payload that was previewed")
		if _, err := f.guard.Apply(ctx, id, token); !errors.Is(err, ledger.ErrCorrupt) {
			t.Fatalf("Apply after the payload was edited: %v, want ledger.ErrCorrupt", err)
		}
	}
	if n := f.store.applies.Load() - applies; n != 0 || f.store.get(key) != before {
		t.Fatalf("the edited payload ran: %d applies, %s = %q", n, key, f.store.get(key))
	}
	if s := f.status(id); s != ledger.Pending {
		t.Fatalf("status %s after the refusals, want pending", s)
	}
	// Nothing was spent: with the stored bytes put back, the same token
	// applies what was previewed.
	tm.write(id, orig)
	f.apply(id, token)
	if f.store.get(key) != "dark" {
		t.Fatalf("%s = %q after the apply of the restored payload", key, f.store.get(key))
	}
}

// tamperApproval edits the payload (and its hash) of a change the user is
// being asked about, then answers yes; and edits another before the
// question is asked.
func tamperApproval(t *testing.T, f *approvalFixture, b integrityBackend, withHash bool) {
	f.t = t
	tm := tamperer{t, f.guard, b}
	applies := f.store.applies.Load()
	key := "theme"
	if withHash {
		key = "language"
	}
	before := f.store.get(key)
	cs := f.connect(clientOptions{protocol: protoMRTR, user: says(yes), manual: true})
	id := f.preview(cs, key, "dark")
	args := map[string]any{"change_id": id}
	state, _ := question(t, cs, "apply_change", args)
	orig := tm.edit(id, `{"key":"`+key+`","value":"pwned"}`, withHash)

	_, errText := answer(t, cs, "apply_change", args, state, yes)
	want := "its stored payload does not match the payload that was previewed"
	if withHash {
		// The user was asked about the payload hash that the state seals.
		want = "did not issue for this call"
	}
	if !strings.Contains(errText, want) {
		t.Fatalf("a yes to an edited change: %q, want a refusal containing %q", errText, want)
	}
	if n := f.store.applies.Load() - applies; n != 0 || f.store.get(key) != before {
		t.Fatalf("the edited payload ran: %d applies, %s = %q", n, key, f.store.get(key))
	}
	if s := f.status(id); s != "pending" {
		t.Fatalf("status %s after the refusal, want pending", s)
	}
	tm.write(id, orig)
	state, _ = question(t, cs, "apply_change", args)
	if out, errText := answer(t, cs, "apply_change", args, state, yes); errText != "" || out["status"] != "applied" {
		t.Fatalf("apply of the restored payload: %v %s", out, errText)
	}
	if f.store.get(key) != "dark" {
		t.Fatalf("%s = %q after the apply of the restored payload", key, f.store.get(key))
	}

	if withHash {
		return // before the question: see TestIntegrity_ApprovalConsistentEditBeforeTheQuestion
	}
	// Edited before the question: the user is not even asked.
	u := says(yes)
	legacy := f.connect(clientOptions{protocol: protoLegacy, user: u})
	id = f.preview(legacy, "colour", "red")
	tm.edit(id, `{"key":"colour","value":"pwned"}`, false)
	mustFail(t, legacy, "apply_change", map[string]any{"change_id": id}, want)
	if n, _ := u.asked(); n != 0 {
		t.Fatalf("the user was asked %d times about an edited change", n)
	}
	if f.store.get("colour") != "" || f.status(id) != "pending" {
		t.Fatalf("colour = %q, status %s", f.store.get("colour"), f.status(id))
	}
}

// tamperUndo edits an applied change's payload (and its hash) and undoes
// with the right undo token.
func tamperUndo(t *testing.T, f *fixture, b integrityBackend, withHash bool) {
	f.t = t
	ctx := context.Background()
	tm := tamperer{t, f.guard, b}
	key := "font"
	if withHash {
		key = "size"
	}
	id, token := f.preview("set", key, "big")
	undoToken := f.apply(id, token)
	undos := f.store.undos.Load()
	orig := tm.edit(id, `{"key":"`+key+`","value":"pwned"}`, withHash)

	args := map[string]any{"change_id": id, "undo_token": undoToken}
	if withHash {
		mustFail(t, f.session, "undo_change", args, "invalid undo token for change "+id+"; nothing was spent")
		if _, err := f.guard.Undo(ctx, id, undoToken); !errors.Is(err, changeset.ErrInvalidToken) {
			t.Fatalf("Undo after the payload and its hash were edited: %v, want ErrInvalidToken", err)
		}
	} else {
		mustFail(t, f.session, "undo_change", args, "its stored payload does not match the payload that was previewed")
		if _, err := f.guard.Undo(ctx, id, undoToken); !errors.Is(err, ledger.ErrCorrupt) {
			t.Fatalf("Undo after the payload was edited: %v, want ledger.ErrCorrupt", err)
		}
	}
	if n := f.store.undos.Load() - undos; n != 0 || f.store.get(key) != "big" {
		t.Fatalf("the undo of an edited payload ran: %d undos, %s = %q", n, key, f.store.get(key))
	}
	if s := f.status(id); s != ledger.Applied {
		t.Fatalf("status %s after the refusals, want applied", s)
	}
	tm.write(id, orig)
	mustCall(t, f.session, "undo_change", args)
	if f.store.get(key) != "" || f.store.undos.Load()-undos != 1 {
		t.Fatalf("%s = %q after the undo of the restored payload", key, f.store.get(key))
	}
}

// On the user-approval path no token exists outside the ledger: the
// confirmation token's digest is of a random token nobody holds, and the
// claim is trusted. An edit of the payload together with its hash made
// before the question is asked is therefore consistent with the row, the
// user is shown the stored diff, and a yes applies the edited payload.
// DESIGN ("Exactness") says such an edit is never applied on the approval
// path; closing it needs a binding made with a key the ledger does not hold
// (e.g. a MAC of the payload hash under Options.ApprovalKey), a design
// decision for the lead. Unskip this test when it is made.
func TestIntegrity_ApprovalConsistentEditBeforeTheQuestion(t *testing.T) {
	f := newApprovalFixture(t)
	u := says(yes)
	cs := f.connect(clientOptions{protocol: protoLegacy, user: u})
	id := f.preview(cs, "theme", "dark")
	tamperer{t, f.guard, integrityBackends[0]}.edit(id, `{"key":"theme","value":"pwned"}`, true)
	_, errText := call(t, cs, "apply_change", map[string]any{"change_id": id})
	if errText == "" || f.store.get("theme") == "pwned" {
		t.Fatalf("an edited payload was applied after the user approved the stored diff: theme = %q", f.store.get("theme"))
	}
}

// A pre-2026 client's own inputResponses and requestState reach the
// handler unchanged. A state that is the sealed fields in plain JSON,
// however exactly it mirrors them, is not sealed and approves nothing.
func TestIntegrity_ForgedPlainStateRefused(t *testing.T) {
	f := newApprovalFixture(t)
	u := says(yes)
	cs := f.connect(clientOptions{protocol: protoLegacy, user: u})
	id := f.preview(cs, "theme", "dark")
	c, err := f.guard.Record(context.Background(), id)
	if err != nil {
		t.Fatal(err)
	}
	plain, err := json.Marshal(map[string]any{
		"tool": "apply_change", "id": id, "purpose": "apply",
		"hash": c.PayloadHash, "scope": c.ScopeHash,
		"exp": f.clock.Now().Add(5 * time.Minute).Unix(),
	})
	if err != nil {
		t.Fatal(err)
	}
	versioned := append([]byte{1}, plain...)
	framed := append(append([]byte{1}, make([]byte, 12)...), plain...) // version, a zero nonce, no tag
	forged := map[string]string{
		"base64url":           base64.RawURLEncoding.EncodeToString(plain),
		"base64url+version":   base64.RawURLEncoding.EncodeToString(versioned),
		"base64url+frame":     base64.RawURLEncoding.EncodeToString(framed),
		"base64 std, padded":  base64.StdEncoding.EncodeToString(plain),
		"base64 url, padded":  base64.URLEncoding.EncodeToString(versioned),
		"the JSON itself":     string(plain),
		"the JSON, versioned": string(versioned),
	}
	args := map[string]any{"change_id": id}
	for name, state := range forged {
		_, errText := answer(t, cs, "apply_change", args, state, yes)
		if !strings.Contains(errText, "did not issue for this call") {
			t.Errorf("forged state (%s): %q, want a refusal", name, errText)
		}
	}
	if n, _ := u.asked(); n != 0 {
		t.Errorf("the user was asked %d times through forged calls", n)
	}
	if f.status(id) != "pending" || f.store.applies.Load() != 0 || f.store.get("theme") != "light" {
		t.Fatalf("a forged state applied the change: status %s, %d applies", f.status(id), f.store.applies.Load())
	}
}

type badTextIn struct {
	Field string `json:"field"`
}

// registerBadText registers "badtext": its proposal carries a byte that is
// not UTF-8 in the part its input names ("none" for a valid proposal).
func registerBadText(g *changeset.Guard) {
	changeset.Register(g, &mcp.Tool{Name: "badtext"}, changeset.Operation[badTextIn, map[string]string, struct{}]{
		Preview: func(ctx context.Context, in badTextIn) (*changeset.Proposal[map[string]string], error) {
			const bad = "caf\xe9" // Latin-1, not UTF-8
			p := changeset.Proposal[map[string]string]{
				Payload:   map[string]string{"name": "cafe"},
				Diff:      changeset.DiffFields(nil, map[string]any{"name": "cafe"}),
				Summary:   "Name it cafe",
				Resource:  "shop:cafe",
				Warnings:  []string{"the old name is not kept"},
				DependsOn: []string{"street:main"},
			}
			switch in.Field {
			case "summary":
				p.Summary = "Name it " + bad
			case "resource":
				p.Resource = "shop:" + bad
			case "warning":
				p.Warnings = append(p.Warnings, "the sign says "+bad)
			case "depends_on":
				p.DependsOn = append(p.DependsOn, "street:"+bad)
			case "payload":
				p.Payload["name"] = bad
			case "diff":
				p.Diff = changeset.DiffFields(nil, map[string]any{"name": bad})
			case "diff field":
				p.Diff = changeset.DiffFields(nil, map[string]any{bad: "cafe"})
			}
			return &p, nil
		},
		Apply: func(ctx context.Context, p map[string]string) (struct{}, error) { return struct{}{}, nil },
	})
}

func TestIntegrity_InvalidUTF8RefusedAtPreview(t *testing.T) {
	f := newFixture(t)
	registerBadText(f.guard)
	ctx := context.Background()
	for _, field := range []string{"summary", "resource", "warning", "depends_on", "payload", "diff", "diff field"} {
		if _, err := f.guard.Preview(ctx, "badtext", badTextIn{Field: field}); err == nil || !strings.Contains(err.Error(), "UTF-8") {
			t.Errorf("Preview with invalid UTF-8 in its %s: %v, want a refusal naming UTF-8", field, err)
		}
		if _, errText := call(t, f.session, "preview_badtext", map[string]any{"field": field}); !strings.Contains(errText, "UTF-8") {
			t.Errorf("preview_badtext with invalid UTF-8 in its %s: %q, want a refusal naming UTF-8", field, errText)
		}
	}
	if n := countStoredChanges(t, f.guard); n != 0 {
		t.Fatalf("%d changes stored from refused previews", n)
	}
	// The same proposal with valid text is stored.
	if _, err := f.guard.Preview(ctx, "badtext", badTextIn{Field: "none"}); err != nil {
		t.Fatalf("valid proposal: %v", err)
	}
	if n := countStoredChanges(t, f.guard); n != 1 {
		t.Fatalf("%d changes stored, want 1", n)
	}
}

// countStoredChanges counts every change in g's ledger.
func countStoredChanges(t *testing.T, g *changeset.Guard) int {
	t.Helper()
	all, err := g.Ledger().Changes(context.Background(), ledger.ChangeFilter{})
	if err != nil {
		t.Fatalf("List: %v", err)
	}
	return len(all)
}

// newApprovalFixture is an approval fixture on a fresh SQLite file that
// edit may replace with another ledger.
func newApprovalFixture(t *testing.T, edit ...func(*changeset.Options)) *approvalFixture {
	t.Helper()
	return buildApprovalFixture(t, changeset.Options{LedgerPath: filepath.Join(t.TempDir(), "ledger.db")}, edit)
}
