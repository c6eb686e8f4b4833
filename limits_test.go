package changeset_test

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"testing"

	changeset "github.com/mcp-changeset/changeset-go"
	"github.com/mcp-changeset/changeset-go/internal/canonjson"
	"github.com/mcp-changeset/changeset-go/ledger"
	"github.com/modelcontextprotocol/go-sdk/mcp"
)

// The bounds hold exactly: a proposal or result of exactly the limit is
// accepted and one byte more is refused; previews beyond the pending quota
// are refused before anything is stored.

type sizedIn struct {
	Payload string `json:"payload"`
	Diff    string `json:"diff"`
	Summary string `json:"summary"`
}

func (in sizedIn) args() map[string]any {
	return map[string]any{"payload": in.Payload, "diff": in.Diff, "summary": in.Summary}
}

// sizedDiff is the diff "sized" proposes: one created field holding v.
func sizedDiff(v string) []changeset.DiffEntry {
	return changeset.DiffFields(nil, map[string]any{"v": v})
}

// registerSized registers "sized", whose payload, diff and summary are
// each set by its input, so that a test controls the proposal's size.
func registerSized(g *changeset.Guard) {
	changeset.Register(g, &mcp.Tool{Name: "sized"}, changeset.Operation[sizedIn, string, struct{}]{
		Preview: func(ctx context.Context, in sizedIn) (*changeset.Proposal[string], error) {
			return &changeset.Proposal[string]{Payload: in.Payload, Diff: sizedDiff(in.Diff), Summary: in.Summary}, nil
		},
		Apply: func(ctx context.Context, p string) (struct{}, error) { return struct{}{}, nil },
	})
}

// canonicalLen is the length of v's canonical JSON.
func canonicalLen(t *testing.T, v any) int {
	t.Helper()
	b, err := canonjson.Marshal(v)
	if err != nil {
		t.Fatal(err)
	}
	return len(b)
}

func TestLimits_ProposalOfExactlyMaxPayloadBytes(t *testing.T) {
	base := sizedIn{Payload: strings.Repeat("p", 100), Diff: strings.Repeat("d", 50), Summary: strings.Repeat("s", 30)}
	// The limit counts the canonical JSON of the payload and the diff, and
	// the summary's bytes.
	limit := canonicalLen(t, base.Payload) + canonicalLen(t, sizedDiff(base.Diff)) + len(base.Summary)
	f := newFixture(t, func(o *changeset.Options) { o.MaxPayloadBytes = limit })
	registerSized(f.guard)
	ctx := context.Background()

	out := mustCall(t, f.session, "preview_sized", base.args())
	c, err := f.guard.Record(ctx, out["change_id"].(string))
	if err != nil {
		t.Fatal(err)
	}
	if got := len(c.Payload) + len(c.Diff) + len(c.Summary); got != limit {
		t.Fatalf("the stored proposal is %d bytes, the test computed %d", got, limit)
	}

	over := map[string]sizedIn{
		"payload": {base.Payload + "p", base.Diff, base.Summary},
		"diff":    {base.Payload, base.Diff + "d", base.Summary},
		"summary": {base.Payload, base.Diff, base.Summary + "s"},
	}
	want := fmt.Sprintf("is %d bytes of canonical JSON, over the limit of %d; nothing was stored", limit+1, limit)
	for part, in := range over {
		if _, errText := call(t, f.session, "preview_sized", in.args()); !strings.Contains(errText, want) {
			t.Errorf("one byte more in the %s: %q, want a refusal containing %q", part, errText, want)
		}
		if _, err := f.guard.Preview(ctx, "sized", in); !errors.Is(err, changeset.ErrQuota) {
			t.Errorf("Preview with one byte more in the %s: %v, want ErrQuota", part, err)
		}
	}
	if n := countStoredChanges(t, f.guard); n != 1 {
		t.Fatalf("%d changes stored, want only the one of exactly the limit", n)
	}
}

func TestLimits_ResultOfExactlyMaxResultBytes(t *testing.T) {
	const limit = 64
	f := newFixture(t, func(o *changeset.Options) { o.MaxResultBytes = limit })
	// "big" returns {"previous": "x" × len(value)}.
	n := limit - canonicalLen(t, setOut{})

	id, token := f.preview("big", "blob", strings.Repeat("v", n))
	if undoToken := f.apply(id, token); undoToken == "" {
		t.Fatal("a result of exactly the limit got no undo token")
	}
	c, err := f.guard.Record(context.Background(), id)
	if err != nil {
		t.Fatal(err)
	}
	if c.Status != ledger.Applied || len(c.Result) != limit {
		t.Fatalf("status %s, stored result of %d bytes; want applied, %d", c.Status, len(c.Result), limit)
	}

	applies := f.store.applies.Load()
	id, token = f.preview("big", "blob", strings.Repeat("v", n+1))
	errText := mustFail(t, f.session, "apply_change", map[string]any{"change_id": id, "confirmation_token": token},
		fmt.Sprintf("its result of %d bytes is over the limit of %d; it has no undo", limit+1, limit))
	if strings.Contains(errText, "undo_") {
		t.Fatalf("the refusal carries an undo token: %q", errText)
	}
	if f.store.applies.Load() != applies+1 {
		t.Fatal("the apply did not run") // the write happened: that is why nothing_written is absent
	}
	checkFailed(t, f, id, wantFailed{ledger.ApplyFailed, ledger.FailureResultTooLarge, false, "changeset.ChangeError",
		"result too large: the operation wrote, but its result was over the server's limit, so there is no undo"})
	mustFail(t, f.session, "undo_change", map[string]any{"change_id": id, "undo_token": "undo_" + strings.Repeat("A", 32)},
		"change "+id+" cannot be undone (status: apply_failed)")
}

func TestLimits_PendingPreviewsPerScope(t *testing.T) {
	f := newFixture(t, func(o *changeset.Options) { o.MaxPendingPerScope = 3 })
	ctx := context.Background()
	preview := func(v string) error {
		_, err := f.guard.Preview(ctx, "set", setIn{Key: "theme", Value: v})
		return err
	}
	for i := range 3 {
		if err := preview(fmt.Sprint("v", i)); err != nil {
			t.Fatalf("preview %d: %v", i+1, err)
		}
	}
	err := preview("v3")
	if !errors.Is(err, changeset.ErrQuota) || !strings.Contains(err.Error(), "3 previews are already waiting") {
		t.Fatalf("fourth preview: %v, want ErrQuota", err)
	}
	mustFail(t, f.session, "preview_set", map[string]any{"key": "theme", "value": "v3"}, "nothing was stored")
	if n := countStoredChanges(t, f.guard); n != 3 {
		t.Fatalf("%d changes stored, want 3", n)
	}

	// Previews past their expiry do not count.
	f.clock.Advance(changeset.DefaultTTL)
	for i := range 3 {
		if err := preview(fmt.Sprint("w", i)); err != nil {
			t.Fatalf("preview %d after the first three expired: %v", i+1, err)
		}
	}
	if err := preview("w3"); !errors.Is(err, changeset.ErrQuota) {
		t.Fatalf("a fourth waiting preview: %v, want ErrQuota", err)
	}
	if n := countStoredChanges(t, f.guard); n != 6 {
		t.Fatalf("%d changes stored, want 6", n)
	}
}
