package main

import (
	"context"
	"io"
	"net/http"
	"net/http/cookiejar"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/mcp-changeset/changeset-go/examples/internal/exampletest"
	"github.com/mcp-changeset/changeset-go/ledger"
)

func TestMain(m *testing.M) { exampletest.Main(m) }

func settings(t *testing.T, c *exampletest.Client) map[string]any {
	t.Helper()
	return c.Must("get_settings", nil)["settings"].(map[string]any)
}

func TestStdio_PreviewApplyReplayUndo(t *testing.T) {
	path := filepath.Join(t.TempDir(), "settings.db")
	c := exampletest.Start(t, "settings", []string{"--ledger", path}, exampletest.Guarded)

	init := c.Session.InitializeResult()
	if !strings.Contains(init.Instructions, "Show every diff to the user") {
		t.Errorf("instructions = %q", init.Instructions)
	}
	c.HasTools("apply_change", "get_change_status", "get_settings", "preview_set_setting", "undo_change")

	prev := c.Preview("set_setting", map[string]any{"key": "theme", "value": "dark"})
	if settings(t, c)["theme"] != "light" {
		t.Fatal("preview wrote")
	}
	applied := c.Apply(prev)
	if settings(t, c)["theme"] != "dark" {
		t.Fatal("apply did not write")
	}
	if text := c.ApplyRefused(prev, "cannot be applied"); text != "change "+prev.ChangeID+" cannot be applied (status: applied)" {
		t.Fatalf("replay: %q", text)
	}
	c.Undo(applied)
	if settings(t, c)["theme"] != "light" {
		t.Fatal("undo did not restore")
	}
	c.Refused("preview_set_setting", map[string]any{"key": "colour", "value": "red"}, `unknown setting "colour"`)
	c.Session.Close()

	// The ledger file outlives the process and holds the whole history.
	l, err := ledger.Open(context.Background(), path, ledger.OpenOptions{})
	if err != nil {
		t.Fatal(err)
	}
	defer l.Close()
	ch, err := l.Change(context.Background(), prev.ChangeID)
	if err != nil || ch.Status != ledger.Undone || ch.PreviewedBy != "agent:exampletest" || ch.AppliedBy != "agent:exampletest" || ch.UndoneBy != "agent:exampletest" {
		t.Fatalf("ledger row: %+v %v", ch, err)
	}
}

func TestStdio_WritesOffByDefault(t *testing.T) {
	c := exampletest.Start(t, "settings", nil)
	prev := c.Preview("set_setting", map[string]any{"key": "theme", "value": "dark"})
	if prev.WritesEnabled {
		t.Fatal("writes enabled by default")
	}
	c.ApplyRefused(prev, "MCP_CHANGESET_WRITE_MODE=guarded")
	if settings(t, c)["theme"] != "light" {
		t.Fatal("wrote with writes off")
	}
}

func TestHelp(t *testing.T) {
	out, err := exec.Command(exampletest.Build(t, "settings"), "--help").CombinedOutput()
	if err != nil || !strings.Contains(string(out), "Usage: settings [flags]") || !strings.Contains(string(out), "--auth-token-file file") {
		t.Fatalf("--help: %v\n%s", err, out)
	}
}

// TestDashboard_FlagServesTheDashboardAndPrintsItsLoginURL starts the
// server with --dashboard and signs in with the URL it prints.
func TestDashboard_FlagServesTheDashboardAndPrintsItsLoginURL(t *testing.T) {
	c := exampletest.Start(t, "settings", []string{"--dashboard", "127.0.0.1:0"}, exampletest.Guarded)
	c.Apply(c.Preview("set_setting", map[string]any{"key": "theme", "value": "dark"}))
	login := strings.TrimSpace(c.Stderr.WaitLine(t, "settings: dashboard: ", 10*time.Second))
	jar, _ := cookiejar.New(nil)
	client := &http.Client{Jar: jar}
	resp, err := client.Get(login)
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	if resp.StatusCode != http.StatusOK || resp.Request.URL.Path != "/" {
		t.Fatalf("login: %s at %s", resp.Status, resp.Request.URL)
	}
	resp, err = client.Get(strings.Split(login, "/login")[0] + "/changes")
	if err != nil {
		t.Fatal(err)
	}
	body, _ := io.ReadAll(resp.Body)
	resp.Body.Close()
	if resp.StatusCode != http.StatusOK || !strings.Contains(string(body), "set_setting") {
		t.Fatalf("changes page: %s\n%s", resp.Status, body)
	}
	anon, err := http.Get(strings.Split(login, "/login")[0] + "/changes")
	if err != nil {
		t.Fatal(err)
	}
	anon.Body.Close()
	if anon.StatusCode != http.StatusUnauthorized {
		t.Fatalf("without the login: %s", anon.Status)
	}
}
