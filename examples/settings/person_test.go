package main

import (
	"context"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/mcp-changeset/changeset-go/examples/internal/exampletest"
	"github.com/mcp-changeset/changeset-go/ledger"
	"github.com/modelcontextprotocol/go-sdk/mcp"
)

// Person approval over stdio, with a client that declares no
// elicitation: the preview names the approval and its link; the apply
// waits, sending progress, while a person approves from another process
// on the same ledger (as `mcp-changeset approve` does); then it applies.
// A change a person declined is refused with who and why.
func TestPerson_OverStdioAPersonApprovesMeanwhile(t *testing.T) {
	ledgerPath := filepath.Join(t.TempDir(), "ledger.db")
	cmd, stderr := exampletest.Command(t, "settings",
		[]string{"--ledger", ledgerPath, "--approval", "person", "--dashboard-url", "https://changes.example.com"}, exampletest.Guarded)
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	l, err := ledger.Open(ctx, ledgerPath, ledger.OpenOptions{Create: true})
	if err != nil {
		t.Fatal(err)
	}
	defer l.Close()

	var (
		once     sync.Once
		approval string
		decided  = make(chan error, 1)
	)
	progress := func(context.Context, *mcp.ProgressNotificationClientRequest) {
		once.Do(func() { // a person, in another process, while the apply waits
			go func() {
				_, err := l.Decide(context.Background(), ledger.Decision{ApprovalID: approval, Person: "person:alice", Verdict: ledger.Approve})
				decided <- err
			}()
		})
	}
	client := mcp.NewClient(&mcp.Implementation{Name: "no-elicitation", Version: "1"}, &mcp.ClientOptions{ProgressNotificationHandler: progress})
	cs, err := client.Connect(ctx, &mcp.CommandTransport{Command: cmd}, nil)
	if err != nil {
		t.Fatalf("connect: %v\n%s", err, stderr)
	}
	defer cs.Close()

	preview := func(value string) map[string]any {
		res, err := cs.CallTool(ctx, &mcp.CallToolParams{Name: "preview_set_setting", Arguments: map[string]any{"key": "theme", "value": value}})
		if err != nil || res.IsError {
			t.Fatalf("preview: %v %+v", err, res)
		}
		out := res.StructuredContent.(map[string]any)
		return out
	}
	out := preview("dark")
	a, _ := out["approval"].(map[string]any)
	approval, _ = a["id"].(string)
	if !strings.HasPrefix(approval, "apr_") || a["url"] != "https://changes.example.com/approvals/"+approval {
		t.Fatalf("the preview's approval: %v", out)
	}
	params := &mcp.CallToolParams{Name: "apply_change", Arguments: map[string]any{"change_id": out["change_id"], "confirmation_token": out["confirmation_token"]}}
	params.SetProgressToken("apply")
	res, err := cs.CallTool(ctx, params)
	if err != nil || res.IsError {
		t.Fatalf("the waiting apply: %v %+v", err, res)
	}
	if err := <-decided; err != nil {
		t.Fatal(err)
	}
	if got := res.StructuredContent.(map[string]any)["status"]; got != "applied" {
		t.Fatalf("apply: %v", res.StructuredContent)
	}

	out = preview("light")
	a, _ = out["approval"].(map[string]any)
	if _, err := l.Decide(ctx, ledger.Decision{ApprovalID: a["id"].(string), Person: "person:bob", Verdict: ledger.Decline, Note: "keep it dark"}); err != nil {
		t.Fatal(err)
	}
	res, err = cs.CallTool(ctx, &mcp.CallToolParams{Name: "apply_change", Arguments: map[string]any{"change_id": out["change_id"], "confirmation_token": out["confirmation_token"]}})
	if err != nil || !res.IsError {
		t.Fatalf("apply of a declined change: %v %+v", err, res)
	}
	if text := res.Content[0].(*mcp.TextContent).Text; !strings.Contains(text, `"person:bob" declined it`) || !strings.Contains(text, `"keep it dark"`) {
		t.Fatalf("the decline reads %q", text)
	}
	c2, err := l.Change(ctx, out["change_id"].(string))
	if err != nil || c2.Status != ledger.Declined {
		t.Fatalf("the declined change: %v, %v", c2.Status, err)
	}
}
