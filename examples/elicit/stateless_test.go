package main

import (
	"context"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/mcp-changeset/changeset-go/examples/internal/exampletest"
	"github.com/modelcontextprotocol/go-sdk/mcp"
)

const aliceToken = "alice-0123456789abcdef0123456789"

// startStateless runs the server over stateless HTTP and connects a
// client speaking protocol whose user is p.
func startStateless(t *testing.T, protocol string, p *person) (*mcp.ClientSession, *exampletest.Process) {
	t.Helper()
	tokens := filepath.Join(t.TempDir(), "tokens")
	if err := os.WriteFile(tokens, []byte(aliceToken+" alice\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	proc := exampletest.StartHTTP(t, "elicit", []string{"--http", "127.0.0.1:0", "--stateless", "--auth-token-file", tokens}, exampletest.Guarded)
	client := mcp.NewClient(&mcp.Implementation{Name: "elicit-test", Version: "1"}, &mcp.ClientOptions{ElicitationHandler: p.handle})
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	cs, err := client.Connect(ctx, &mcp.StreamableClientTransport{Endpoint: proc.URL, HTTPClient: exampletest.BearerClient(aliceToken),
		DisableStandaloneSSE: true, MaxRetries: -1}, &mcp.ClientSessionOptions{ProtocolVersion: protocol})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { cs.Close() })
	return cs, proc
}

// Over stateless HTTP the server cannot send the client a request, so the
// user is asked only by a client on protocol 2026-07-28, which answers
// inside the tool call: the approval state travels with the call, sealed,
// instead of waiting in a session. An older client cannot be asked, and
// nothing is spent.
func TestStateless_UserApprovalInsideTheToolCall(t *testing.T) {
	p := &person{answer: &mcp.ElicitResult{Action: "accept", Content: map[string]any{"approve": true}}}
	cs, _ := startStateless(t, "", p)
	prev, errText := call(t, cs, "preview_set_setting", map[string]any{"key": "theme", "value": "dark"})
	if errText != "" {
		t.Fatalf("preview: %s", errText)
	}
	out, errText := call(t, cs, "apply_change", map[string]any{"change_id": prev["change_id"]})
	if errText != "" || out["status"] != "applied" || theme(t, cs) != "dark" {
		t.Fatalf("apply = %v %q, theme %v", out, errText, theme(t, cs))
	}
	if len(p.messages) != 1 || !strings.Contains(p.messages[0], `theme: "light" → "dark"`) {
		t.Fatalf("the user saw %q", p.messages)
	}
}

func TestStateless_AnOlderClientCannotBeAsked(t *testing.T) {
	p := &person{answer: &mcp.ElicitResult{Action: "accept", Content: map[string]any{"approve": true}}}
	cs, proc := startStateless(t, "2025-06-18", p)
	prev, _ := call(t, cs, "preview_set_setting", map[string]any{"key": "theme", "value": "dark"})
	_, errText := call(t, cs, "apply_change", map[string]any{"change_id": prev["change_id"]})
	if !strings.Contains(errText, "was not applied") || !strings.Contains(errText, "nothing was spent") || len(p.messages) != 0 || theme(t, cs) != "light" {
		t.Fatalf("apply = %q, asked %q, theme %v", errText, p.messages, theme(t, cs))
	}
	if !strings.Contains(proc.Stderr.String(), "user approval over stateless HTTP") {
		t.Errorf("no warning at startup; stderr:\n%s", proc.Stderr)
	}
}
