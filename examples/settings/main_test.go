package main

import (
	"context"
	"encoding/json"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"

	"github.com/mcp-changeset/changeset-go/internal/testbin"
	"github.com/mcp-changeset/changeset-go/ledger"
	"github.com/modelcontextprotocol/go-sdk/mcp"
)

func TestMain(m *testing.M) {
	code := m.Run()
	testbin.Cleanup()
	os.Exit(code)
}

// startServer builds the settings server and connects a go-sdk client to it
// over stdio.
func startServer(t *testing.T, ledgerPath string, env ...string) *mcp.ClientSession {
	t.Helper()
	bin := testbin.Build(t, "github.com/mcp-changeset/changeset-go/examples/settings")
	cmd := exec.Command(bin, "--ledger", ledgerPath)
	cmd.Env = append(os.Environ(), env...)
	client := mcp.NewClient(&mcp.Implementation{Name: "settings-test", Version: "1"}, nil)
	cs, err := client.Connect(context.Background(), &mcp.CommandTransport{Command: cmd}, nil)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { cs.Close() })
	return cs
}

func callTool(t *testing.T, cs *mcp.ClientSession, name string, args map[string]any) (map[string]any, string) {
	t.Helper()
	res, err := cs.CallTool(context.Background(), &mcp.CallToolParams{Name: name, Arguments: args})
	if err != nil {
		t.Fatalf("%s: %v", name, err)
	}
	if res.IsError {
		return nil, res.Content[0].(*mcp.TextContent).Text
	}
	var out map[string]any
	raw, _ := json.Marshal(res.StructuredContent)
	_ = json.Unmarshal(raw, &out)
	return out, ""
}

func settings(t *testing.T, cs *mcp.ClientSession) map[string]any {
	out, errText := callTool(t, cs, "get_settings", nil)
	if errText != "" {
		t.Fatal(errText)
	}
	return out["settings"].(map[string]any)
}

func TestStdio_PreviewApplyReplayUndo(t *testing.T) {
	path := filepath.Join(t.TempDir(), "settings.db")
	cs := startServer(t, path, "MCP_CHANGESET_WRITE_MODE=guarded")

	init := cs.InitializeResult()
	if !strings.Contains(init.Instructions, "Show every diff to the user") {
		t.Errorf("instructions = %q", init.Instructions)
	}
	tools, err := cs.ListTools(context.Background(), nil)
	if err != nil {
		t.Fatal(err)
	}
	var names []string
	for _, tool := range tools.Tools {
		names = append(names, tool.Name)
	}
	if got := strings.Join(names, ","); got != "apply_change,get_change_status,get_run,get_settings,list_runs,preview_set_setting,start_run,undo_change,undo_run" {
		t.Fatalf("tools = %s", got)
	}

	prev, errText := callTool(t, cs, "preview_set_setting", map[string]any{"key": "theme", "value": "dark"})
	if errText != "" {
		t.Fatal(errText)
	}
	id, token := prev["change_id"].(string), prev["confirmation_token"].(string)
	if settings(t, cs)["theme"] != "light" {
		t.Fatal("preview wrote")
	}
	applied, errText := callTool(t, cs, "apply_change", map[string]any{"change_id": id, "confirmation_token": token})
	if errText != "" {
		t.Fatal(errText)
	}
	if settings(t, cs)["theme"] != "dark" {
		t.Fatal("apply did not write")
	}
	if _, errText := callTool(t, cs, "apply_change", map[string]any{"change_id": id, "confirmation_token": token}); errText != "change "+id+" cannot be applied (status: applied)" {
		t.Fatalf("replay: %q", errText)
	}
	if _, errText := callTool(t, cs, "undo_change", map[string]any{"change_id": id, "undo_token": applied["undo_token"]}); errText != "" {
		t.Fatal(errText)
	}
	if settings(t, cs)["theme"] != "light" {
		t.Fatal("undo did not restore")
	}
	if _, errText := callTool(t, cs, "preview_set_setting", map[string]any{"key": "colour", "value": "red"}); !strings.Contains(errText, `unknown setting "colour"`) {
		t.Fatalf("unknown key: %q", errText)
	}
	cs.Close()

	// The ledger file outlives the process and holds the whole history.
	l, err := ledger.Open(path, false)
	if err != nil {
		t.Fatal(err)
	}
	defer l.Close()
	c, err := l.Get(context.Background(), id)
	if err != nil || c.Status != ledger.Undone || c.AppliedBy != "agent" {
		t.Fatalf("ledger row: %+v %v", c, err)
	}
}

func TestStdio_WritesOffByDefault(t *testing.T) {
	cs := startServer(t, filepath.Join(t.TempDir(), "settings.db"), "MCP_CHANGESET_WRITE_MODE=")
	prev, _ := callTool(t, cs, "preview_set_setting", map[string]any{"key": "theme", "value": "dark"})
	if prev["writes_enabled"] != false {
		t.Fatalf("writes enabled by default: %v", prev)
	}
	_, errText := callTool(t, cs, "apply_change", map[string]any{"change_id": prev["change_id"], "confirmation_token": prev["confirmation_token"]})
	if !strings.Contains(errText, "MCP_CHANGESET_WRITE_MODE=guarded") {
		t.Fatalf("apply with writes off: %q", errText)
	}
	if settings(t, cs)["theme"] != "light" {
		t.Fatal("wrote with writes off")
	}
}
