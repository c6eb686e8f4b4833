package changeset_test

import (
	"context"
	"strings"
	"testing"

	changeset "github.com/mcp-changeset/changeset-go"
	"github.com/mcp-changeset/changeset-go/ledger"
	"github.com/modelcontextprotocol/go-sdk/mcp"
)

type credIn struct {
	User     string `json:"user"`
	Password string `json:"password" changeset:"redact"`
}

func TestRedact_MarkedFieldsAreReplacedOnceTerminal(t *testing.T) {
	f := newFixture(t)
	stored := map[string]string{}
	changeset.Register(f.guard, &mcp.Tool{Name: "set_password"}, changeset.Operation[credIn, credIn, setOut]{
		Preview: func(ctx context.Context, in credIn) (*changeset.Proposal[credIn], error) {
			return &changeset.Proposal[credIn]{Payload: in,
				Diff: []changeset.DiffEntry{{Field: "password", Before: stored[in.User], After: in.Password}, {Field: "user", After: in.User}}}, nil
		},
		Apply: func(ctx context.Context, p credIn) (setOut, error) {
			old := stored[p.User]
			stored[p.User] = p.Password
			return setOut{Previous: old}, nil
		},
		Undo: func(ctx context.Context, p credIn, r setOut) error { stored[p.User] = r.Previous; return nil },
	})
	ctx := context.Background()
	p, err := f.guard.Preview(ctx, "set_password", credIn{User: "ana", Password: "hunter2"})
	if err != nil {
		t.Fatal(err)
	}
	a, err := f.guard.Apply(ctx, p.ChangeID, p.ConfirmationToken)
	if err != nil {
		t.Fatal(err)
	}
	rec, _ := f.guard.Record(ctx, p.ChangeID)
	if !strings.Contains(string(rec.Payload), "hunter2") || !rec.RedactedAt.IsZero() {
		t.Fatal("an applied change must keep its payload: the undo needs it")
	}
	if _, err := f.guard.Undo(ctx, p.ChangeID, a.UndoToken); err != nil {
		t.Fatal(err)
	}
	if stored["ana"] != "" {
		t.Fatal("the undo did not get the clear payload")
	}
	rec, _ = f.guard.Record(ctx, p.ChangeID)
	if strings.Contains(string(rec.Payload), "hunter2") || strings.Contains(string(rec.Diff), "hunter2") {
		t.Fatalf("terminal change still holds the secret: %s %s", rec.Payload, rec.Diff)
	}
	if !strings.Contains(string(rec.Payload), `"user":"ana"`) || !strings.Contains(string(rec.Diff), `"after":"ana"`) {
		t.Fatalf("unmarked fields were redacted: %s %s", rec.Payload, rec.Diff)
	}
	if rec.RedactedAt.IsZero() || len(rec.RedactFields) != 1 || rec.RedactFields[0] != "password" {
		t.Fatalf("redaction not recorded: %v %v", rec.RedactedAt, rec.RedactFields)
	}

	// The same secret in another change hashes to the same value (under
	// the ledger's key), so operators can compare without reading it; an
	// expired preview is redacted too.
	p2, _ := f.guard.Preview(ctx, "set_password", credIn{User: "bo", Password: "hunter2"})
	f.clock.Advance(changeset.DefaultTTL)
	if ids, err := f.guard.Ledger().ExpireStale(ctx); err != nil || len(ids) != 1 {
		t.Fatalf("ExpireStale = %v %v", ids, err)
	}
	rec2, _ := f.guard.Record(ctx, p2.ChangeID)
	if rec2.Status != ledger.Expired || strings.Contains(string(rec2.Payload), "hunter2") {
		t.Fatalf("expired change: %s %s", rec2.Status, rec2.Payload)
	}
	hashOf := func(c *ledger.Change) string {
		i := strings.Index(string(c.Payload), ledger.RedactedPrefix)
		return string(c.Payload)[i : i+len(ledger.RedactedPrefix)+64]
	}
	if hashOf(rec) != hashOf(rec2) {
		t.Fatal("equal secrets hash differently")
	}
}
