package main

import (
	"context"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/mcp-changeset/changeset-go/examples/internal/exampletest"
	"github.com/modelcontextprotocol/go-sdk/mcp"
)

func TestMain(m *testing.M) { exampletest.Main(m) }

// person answers the server's questions and remembers them.
type person struct {
	mu       sync.Mutex
	answer   *mcp.ElicitResult
	messages []string
}

func (p *person) handle(_ context.Context, req *mcp.ElicitRequest) (*mcp.ElicitResult, error) {
	p.mu.Lock()
	defer p.mu.Unlock()
	p.messages = append(p.messages, req.Params.Message)
	return p.answer, nil
}

// start runs the elicit server over stdio with writes enabled and connects
// a client speaking protocol (the SDK's latest when empty) whose user is p
// (no elicitation at all when nil).
func start(t *testing.T, protocol string, p *person) *mcp.ClientSession {
	t.Helper()
	cmd, _ := exampletest.Command(t, "elicit", nil, exampletest.Guarded)
	opts := &mcp.ClientOptions{}
	if p != nil {
		opts.ElicitationHandler = p.handle
	}
	client := mcp.NewClient(&mcp.Implementation{Name: "elicit-test", Version: "1"}, opts)
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	cs, err := client.Connect(ctx, &mcp.CommandTransport{Command: cmd}, &mcp.ClientSessionOptions{ProtocolVersion: protocol})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { cs.Close() })
	return cs
}

func call(t *testing.T, cs *mcp.ClientSession, name string, args map[string]any) (map[string]any, string) {
	t.Helper()
	res, err := cs.CallTool(context.Background(), &mcp.CallToolParams{Name: name, Arguments: args})
	if err != nil {
		t.Fatalf("%s: protocol error: %v", name, err)
	}
	if res.IsError {
		return nil, res.Content[0].(*mcp.TextContent).Text
	}
	out := map[string]any{}
	exampletest.Decode(t, res.StructuredContent, &out)
	return out, ""
}

func theme(t *testing.T, cs *mcp.ClientSession) any {
	out, _ := call(t, cs, "get_settings", nil)
	return out["settings"].(map[string]any)["theme"]
}

func TestElicit_TheUserApprovesInTheClient(t *testing.T) {
	for _, protocol := range []string{"", "2025-06-18"} {
		t.Run("protocol="+protocol, func(t *testing.T) {
			p := &person{answer: &mcp.ElicitResult{Action: "decline"}}
			cs := start(t, protocol, p)
			prev, errText := call(t, cs, "preview_set_setting", map[string]any{"key": "theme", "value": "dark"})
			if errText != "" || prev["confirmation_token"] != nil {
				t.Fatalf("preview = %v %s", prev, errText)
			}
			args := map[string]any{"change_id": prev["change_id"]}
			if _, errText := call(t, cs, "apply_change", args); !strings.Contains(errText, "declined") || theme(t, cs) != "light" {
				t.Fatalf("declined apply: %q, theme %v", errText, theme(t, cs))
			}
			p.answer = &mcp.ElicitResult{Action: "accept", Content: map[string]any{"approve": true}}
			if out, errText := call(t, cs, "apply_change", args); errText != "" || out["status"] != "applied" {
				t.Fatalf("accepted apply: %v %s", out, errText)
			}
			if theme(t, cs) != "dark" {
				t.Fatalf("theme = %v after the user approved", theme(t, cs))
			}
			if len(p.messages) != 2 || !strings.Contains(p.messages[1], `theme: "light" → "dark"`) {
				t.Fatalf("the user saw %q", p.messages)
			}
		})
	}
}

func TestElicit_ClientWithoutElicitationIsToldWhatToDo(t *testing.T) {
	cs := start(t, "", nil)
	prev, _ := call(t, cs, "preview_set_setting", map[string]any{"key": "theme", "value": "dark"})
	_, errText := call(t, cs, "apply_change", map[string]any{"change_id": prev["change_id"]})
	if !strings.Contains(errText, "this client does not support it") || !strings.Contains(errText, "token approval") {
		t.Fatalf("apply without elicitation: %q", errText)
	}
}
