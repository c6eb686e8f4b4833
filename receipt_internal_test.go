package changeset

import (
	"bytes"
	"context"
	"log/slog"
	"path/filepath"
	"strings"
	"testing"

	"github.com/mcp-changeset/changeset-go/ledger"
	"github.com/modelcontextprotocol/go-sdk/mcp"
)

// TestReceipt_UnreadableHistoryCostsTheReceiptNotTheStep: receiptOf
// returns nil, and logs why, for a move the change never made and for a
// ledger that can no longer be read; a step that happened is never
// reported as failed for its receipt's sake.
func TestReceipt_UnreadableHistoryCostsTheReceiptNotTheStep(t *testing.T) {
	ctx := context.Background()
	l, err := ledger.Open(ctx, filepath.Join(t.TempDir(), "l.db"), ledger.OpenOptions{Create: true})
	if err != nil {
		t.Fatal(err)
	}
	var logs bytes.Buffer
	g, err := New(nil, Options{Ledger: l, WriteMode: WriteGuarded, Logger: slog.New(slog.NewTextHandler(&logs, nil))})
	if err != nil {
		t.Fatal(err)
	}
	defer g.Close()
	Register(g, &mcp.Tool{Name: "bump"}, Operation[struct{ N int }, int, int]{
		AllowEmptyDiff: true,
		Preview: func(_ context.Context, in struct{ N int }) (*Proposal[int], error) {
			return &Proposal[int]{Payload: in.N, Summary: "bump"}, nil
		},
		Apply: func(_ context.Context, n int) (int, error) { return n, nil },
	})
	p, err := g.Preview(ctx, "bump", map[string]any{"N": 1})
	if err != nil {
		t.Fatal(err)
	}
	res, err := g.Apply(ctx, p.ChangeID, p.ConfirmationToken)
	if err != nil || res.Receipt == nil {
		t.Fatalf("Apply: %+v, %v", res, err)
	}
	if r := g.receiptOf(ctx, p.ChangeID, ledger.Undone); r != nil {
		t.Fatalf("a receipt %+v of an undo that never happened", r)
	}
	if !strings.Contains(logs.String(), "receipt not found") {
		t.Fatalf("the missing receipt was not logged: %s", logs.String())
	}
	l.Close()
	if r := g.receiptOf(ctx, p.ChangeID, ledger.Applied); r != nil {
		t.Fatalf("a receipt %+v read from a closed ledger", r)
	}
	if !strings.Contains(logs.String(), "receipt not read") {
		t.Fatalf("the unreadable receipt was not logged: %s", logs.String())
	}
}
