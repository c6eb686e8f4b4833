package changeset_test

import (
	"context"
	"fmt"
	"testing"
	"time"

	changeset "github.com/mcp-changeset/changeset-go"
	"github.com/mcp-changeset/changeset-go/internal/testkit"
	"github.com/mcp-changeset/changeset-go/ledger"
	"github.com/modelcontextprotocol/go-sdk/mcp"
)

// TestClock_GuardsSharingALedgerKeepTheirOwnClocks puts two Guards with
// clocks years apart on one *ledger.Ledger (Options.Ledger), itself opened
// with a third clock, and interleaves their work: each Guard's rows, history
// entries, expiries and redactions carry that Guard's times, neither Guard
// changes the ledger's clock, and the ledger's own work (ExpireStale) reads
// the clock it was opened with.
func TestClock_GuardsSharingALedgerKeepTheirOwnClocks(t *testing.T) {
	for _, k := range kits {
		t.Run(k.name, func(t *testing.T) {
			t.Parallel()
			testGuardsKeepTheirClocks(t, k.start(t))
		})
	}
}

func testGuardsKeepTheirClocks(t *testing.T, kit backendKit) {
	ctx := context.Background()
	ledgerStart := time.Date(2040, 1, 1, 0, 0, 0, 0, time.UTC)
	ledgerClock := testkit.NewClock(ledgerStart)
	l, err := ledger.Open(ctx, kit.target(t), ledger.OpenOptions{Create: true, Clock: ledgerClock.Now})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { l.Close() })

	// Each Guard's clock reads within its own year, so every time the
	// ledger holds says which clock it came from.
	newGuard := func(year int) *fixture {
		f := buildFixture(t, changeset.Options{Ledger: l}, []func(*changeset.Options){func(o *changeset.Options) {
			o.Scope = fmt.Sprint("scope-", year)
		}})
		f.clock.Set(time.Date(year, 3, 1, 12, 0, 0, 0, time.UTC))
		registerSecretOp(f.guard)
		if f.guard.Ledger() != l {
			t.Fatal("the Guard does not use the ledger it was given")
		}
		return f
	}
	a := newGuard(2026)
	aPending, _ := a.preview("set", "theme", "dark") // before b exists
	aPreviewedAt := a.clock.Now()
	b := newGuard(2031)
	if got := l.Now(); !got.Equal(ledgerStart) {
		t.Fatalf("after two Guards, the ledger's clock reads %v, want %v: New changed a ledger it did not open", got, ledgerStart)
	}

	// The same flow through both Guards, interleaved step by step.
	type work struct {
		f                              *fixture
		run, applied, failed, secret   string
		expired, expiredTok, pending   string
		pendingTok                     string
		previewedAt, appliedAt, undoAt time.Time
	}
	ws := []*work{{f: a}, {f: b}}
	for _, w := range ws {
		w.previewedAt = w.f.clock.Now()
		info, err := w.f.guard.StartRun(ctx, "clock test")
		if err != nil {
			t.Fatal(err)
		}
		w.run = info.RunID
		out := mustCall(t, w.f.session, "preview_set", map[string]any{"key": "language", "value": "fr", "run_id": w.run})
		w.applied = out["change_id"].(string)
		if _, err := w.f.guard.Apply(ctx, w.applied, out["confirmation_token"].(string)); err != nil {
			t.Fatal(err)
		}
	}
	for _, w := range ws {
		w.f.clock.Advance(time.Minute)
		w.appliedAt = w.f.clock.Now()
		id, tok := w.f.preview("fail", "x", "1")
		if _, err := w.f.guard.Apply(ctx, id, tok); err == nil {
			t.Fatal("the failing operation applied")
		}
		w.failed = id
		p, err := w.f.guard.Preview(ctx, "secret", credIn{User: "ana", Password: "hunter2"})
		if err != nil {
			t.Fatal(err)
		}
		w.secret = p.ChangeID
		ap, err := w.f.guard.Apply(ctx, p.ChangeID, p.ConfirmationToken)
		if err != nil {
			t.Fatal(err)
		}
		w.f.clock.Advance(time.Minute)
		w.undoAt = w.f.clock.Now()
		if _, err := w.f.guard.Undo(ctx, p.ChangeID, ap.UndoToken); err != nil {
			t.Fatal(err)
		}
		if _, err := w.f.guard.UndoRun(ctx, w.run, false, changeset.Person("ana")); err != nil {
			t.Fatal(err)
		}
		w.expired, w.expiredTok = w.f.preview("set", "theme", "blue")
		w.pending, w.pendingTok = w.f.preview("set", "language", "de")
	}

	// a's clock passes the TTL of its previews; b's does not move. a's
	// token has expired by a's clock only: b still applies its own.
	a.clock.Advance(changeset.DefaultTTL + time.Second)
	if _, err := a.guard.Apply(ctx, ws[0].expired, ws[0].expiredTok); err == nil {
		t.Fatal("a applied a preview its own clock says has expired")
	}
	if _, err := b.guard.Apply(ctx, ws[1].expired, ws[1].expiredTok); err != nil {
		t.Fatalf("b's preview expired by a's clock: %v", err)
	}

	// Every row and history entry of each Guard holds its own times.
	for _, w := range ws {
		year := w.f.clock.Now().Year()
		rows := []string{w.applied, w.failed, w.secret, w.expired, w.pending}
		if w.f == a {
			rows = append(rows, aPending)
		}
		for _, id := range rows {
			c := w.f.record(id)
			for name, at := range map[string]time.Time{"created_at": c.CreatedAt, "updated_at": c.UpdatedAt, "expires_at": c.ExpiresAt} {
				if at.Year() != year {
					t.Errorf("change %s: %s %v, not by its Guard's clock (%d)", id, name, at, year)
				}
			}
			if !c.ExpiresAt.Equal(c.CreatedAt.Add(changeset.DefaultTTL)) {
				t.Errorf("change %s expires at %v, previewed at %v", id, c.ExpiresAt, c.CreatedAt)
			}
			h, err := l.History(ctx, ledger.HistoryFilter{ChangeID: id})
			if err != nil || len(h) == 0 {
				t.Fatalf("History(%s) = %v, %v", id, h, err)
			}
			for _, e := range h {
				if e.At.Year() != year {
					t.Errorf("change %s: history %q→%q at %v, not by its Guard's clock (%d)", id, e.From, e.To, e.At, year)
				}
			}
		}
		rh, err := l.History(ctx, ledger.HistoryFilter{RunID: w.run})
		if err != nil || len(rh) < 4 {
			t.Fatalf("History(run %s) = %v, %v", w.run, rh, err)
		}
		for _, e := range rh {
			if e.At.Year() != year {
				t.Errorf("run %s: history %q→%q of %q at %v, not by its Guard's clock (%d)", w.run, e.From, e.To, e.ChangeID, e.At, year)
			}
		}
		if r := w.f.storedRun(w.run); r.Status != ledger.RunUndone || r.UpdatedAt.Year() != year {
			t.Errorf("run %s: %s at %v", w.run, r.Status, r.UpdatedAt)
		}
		if c := w.f.record(w.applied); !c.AppliedAt.Equal(w.previewedAt) || c.UndoneAt.Year() != year {
			t.Errorf("change %s applied at %v (want %v), undone at %v", w.applied, c.AppliedAt, w.previewedAt, c.UndoneAt)
		}
		if c := w.f.record(w.failed); c.Status != ledger.ApplyFailed || !c.UpdatedAt.Equal(w.appliedAt) {
			t.Errorf("change %s: %s at %v, want apply_failed at %v", w.failed, c.Status, c.UpdatedAt, w.appliedAt)
		}
		if c := w.f.record(w.secret); c.Status != ledger.Undone || !c.RedactedAt.Equal(w.undoAt) {
			t.Errorf("change %s: %s, redacted at %v, want at %v (its undo)", w.secret, c.Status, c.RedactedAt, w.undoAt)
		}
	}
	if c := a.record(ws[0].expired); c.Status != ledger.Expired || !c.UpdatedAt.Equal(a.clock.Now()) {
		t.Errorf("a's expired change: %s at %v, want expired at %v", c.Status, c.UpdatedAt, a.clock.Now())
	}
	if c := a.record(aPending); !c.CreatedAt.Equal(aPreviewedAt) {
		t.Errorf("a's first preview created at %v, want %v", c.CreatedAt, aPreviewedAt)
	}
	if got := l.Now(); !got.Equal(ledgerStart) {
		t.Fatalf("the ledger's clock reads %v, want %v", got, ledgerStart)
	}

	// The ledger's own work reads the ledger's clock: at 2040 every
	// pending change of both Guards has expired, and the expiry says so.
	ids, err := l.ExpireStale(ctx)
	if err != nil || len(ids) != 3 {
		t.Fatalf("ExpireStale = %v, %v; want a's two and b's one pending change", ids, err)
	}
	for _, id := range ids {
		h, err := l.History(ctx, ledger.HistoryFilter{ChangeID: id})
		if err != nil || len(h) == 0 {
			t.Fatalf("History(%s) = %v, %v", id, h, err)
		}
		if last := h[len(h)-1]; last.To != string(ledger.Expired) || !last.At.Equal(ledgerStart) {
			t.Errorf("change %s: last entry %q at %v, want expired at the ledger's %v", id, last.To, last.At, ledgerStart)
		}
	}
}

// registerSecretOp registers "secret", whose password field is redacted
// once a change is terminal.
func registerSecretOp(g *changeset.Guard) {
	stored := map[string]string{}
	changeset.Register(g, &mcp.Tool{Name: "secret"}, changeset.Operation[credIn, credIn, setOut]{
		Preview: func(ctx context.Context, in credIn) (*changeset.Proposal[credIn], error) {
			return &changeset.Proposal[credIn]{Payload: in, Resource: "user:" + in.User,
				Diff: []changeset.DiffEntry{{Field: "password", Before: stored[in.User], After: in.Password}}}, nil
		},
		Apply: func(ctx context.Context, p credIn) (setOut, error) {
			old := stored[p.User]
			stored[p.User] = p.Password
			return setOut{Previous: old}, nil
		},
		Undo: func(ctx context.Context, p credIn, r setOut) error { stored[p.User] = r.Previous; return nil },
	})
}
