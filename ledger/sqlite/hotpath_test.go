package sqlite_test

import (
	"context"
	"path/filepath"
	"testing"

	changeset "github.com/mcp-changeset/changeset-go"
	"github.com/mcp-changeset/changeset-go/ledger/driver"
	"github.com/mcp-changeset/changeset-go/ledger/sqlite"
	"github.com/modelcontextprotocol/go-sdk/mcp"
)

// TestHotPath_EveryStatementInATransactionIsPrepared drives previews,
// applies and undos through a Guard, over MCP (so that previews join a
// session run) and through the Go API, and checks that no statement the
// ledger ran inside those transactions had to be parsed again: parsing
// cost about a quarter of a cycle's CPU before the hot statements were
// prepared once (prepared.go).
func TestHotPath_EveryStatementInATransactionIsPrepared(t *testing.T) {
	ctx := context.Background()
	t.Setenv(changeset.DefaultWriteModeEnv, changeset.WriteGuarded)
	server := mcp.NewServer(&mcp.Implementation{Name: "hot", Version: "1"}, nil)
	g, err := changeset.New(server, changeset.Options{LedgerPath: filepath.Join(t.TempDir(), "hot.db")})
	if err != nil {
		t.Fatal(err)
	}
	defer g.Close()
	values := map[string]string{}
	type in struct {
		Key   string `json:"key"`
		Value string `json:"value"`
	}
	type out struct {
		Previous string `json:"previous"`
	}
	op := changeset.Operation[in, in, out]{
		Preview: func(ctx context.Context, p in) (*changeset.Proposal[in], error) {
			return &changeset.Proposal[in]{Payload: p, Summary: "set " + p.Key, Resource: "key:" + p.Key}, nil
		},
		Apply: func(ctx context.Context, p in) (out, error) {
			old := values[p.Key]
			values[p.Key] = p.Value
			return out{old}, nil
		},
		Undo: func(ctx context.Context, p in, r out) error { values[p.Key] = r.Previous; return nil },
	}
	op.AllowEmptyDiff = true // the statements are what the test is about
	changeset.Register(g, &mcp.Tool{Name: "set"}, op)

	st, ct := mcp.NewInMemoryTransports()
	ss, err := server.Connect(ctx, st, nil)
	if err != nil {
		t.Fatal(err)
	}
	defer ss.Close()
	cs, err := mcp.NewClient(&mcp.Implementation{Name: "hot-client", Version: "1"}, nil).Connect(ctx, ct, nil)
	if err != nil {
		t.Fatal(err)
	}
	defer cs.Close()
	call := func(name string, args map[string]any) map[string]any {
		t.Helper()
		res, err := cs.CallTool(ctx, &mcp.CallToolParams{Name: name, Arguments: args})
		if err != nil || res.IsError {
			t.Fatalf("%s: %v %+v", name, err, res)
		}
		return res.StructuredContent.(map[string]any)
	}
	for i := range 3 {
		p := call("preview_set", map[string]any{"key": "k", "value": string(rune('a' + i))})
		a := call("apply_change", map[string]any{"change_id": p["change_id"], "confirmation_token": p["confirmation_token"]})
		call("undo_change", map[string]any{"change_id": p["change_id"], "undo_token": a["undo_token"]})
	}
	for range 3 {
		p, err := g.Preview(ctx, "set", in{Key: "g", Value: "v"})
		if err != nil {
			t.Fatal(err)
		}
		a, err := g.Apply(ctx, p.ChangeID, p.ConfirmationToken)
		if err != nil {
			t.Fatal(err)
		}
		if _, err := g.Undo(ctx, p.ChangeID, a.UndoToken); err != nil {
			t.Fatal(err)
		}
	}
	b, ok := driver.BackendOf(g.Ledger()).(*sqlite.Backend)
	if !ok {
		t.Fatalf("backend is %T", driver.BackendOf(g.Ledger()))
	}
	if n := sqlite.UnpreparedInTx(b); n != 0 {
		t.Errorf("%d statements ran unprepared inside the cycles' transactions", n)
	}
	if values["k"] != "" || values["g"] != "" {
		t.Errorf("undo left %q", values)
	}
}
