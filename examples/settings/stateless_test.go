package main

import (
	"bufio"
	"encoding/json"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/mcp-changeset/changeset-go/examples/internal/exampletest"
)

const (
	aliceToken = "alice-0123456789abcdef0123456789"
	bobToken   = "bob-0123456789abcdef0123456789ab"
)

// startStateless starts the example over stateless Streamable HTTP on a
// free loopback port, with a token for alice and one for bob.
func startStateless(t *testing.T, extra ...string) *exampletest.Process {
	t.Helper()
	tokens := filepath.Join(t.TempDir(), "tokens")
	if err := os.WriteFile(tokens, []byte(aliceToken+" alice\n"+bobToken+" bob\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	args := append([]string{"--http", "127.0.0.1:0", "--auth-token-file", tokens}, extra...)
	return exampletest.StartHTTP(t, "settings", args, exampletest.Guarded)
}

// post sends one JSON-RPC tools/call as a request of its own, with no
// initialize before it and no session ID, as a replica behind a load
// balancer would get it, and returns the HTTP status, the session ID the
// server handed out (none when stateless) and the tool's structured result
// ({"error": text} for a tool error, {"rpc_error": message} for a JSON-RPC
// error).
func post(t *testing.T, url, token, tool string, args map[string]any) (status int, sessionID string, out map[string]any) {
	t.Helper()
	body, err := json.Marshal(map[string]any{"jsonrpc": "2.0", "id": 1, "method": "tools/call",
		"params": map[string]any{"name": tool, "arguments": args}})
	if err != nil {
		t.Fatal(err)
	}
	req, err := http.NewRequest("POST", url, strings.NewReader(string(body)))
	if err != nil {
		t.Fatal(err)
	}
	req.Header.Set("Content-Type", "application/json")
	req.Header.Set("Accept", "application/json, text/event-stream")
	resp, err := exampletest.BearerClient(token).Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		return resp.StatusCode, resp.Header.Get("Mcp-Session-Id"), nil
	}
	var msg struct {
		Result struct {
			IsError           bool           `json:"isError"`
			StructuredContent map[string]any `json:"structuredContent"`
			Content           []struct {
				Text string `json:"text"`
			} `json:"content"`
		} `json:"result"`
		Error *struct{ Message string } `json:"error"`
	}
	// The answer is JSON or an event stream whose data line holds it.
	sc := bufio.NewScanner(resp.Body)
	sc.Buffer(nil, 1<<20)
	for sc.Scan() {
		line := strings.TrimPrefix(sc.Text(), "data: ")
		if strings.HasPrefix(line, "{") {
			if err := json.Unmarshal([]byte(line), &msg); err != nil {
				t.Fatalf("%s: %v: %s", tool, err, line)
			}
			break
		}
	}
	if msg.Error != nil {
		return resp.StatusCode, resp.Header.Get("Mcp-Session-Id"), map[string]any{"rpc_error": msg.Error.Message}
	}
	if msg.Result.IsError {
		text := ""
		for _, c := range msg.Result.Content {
			text += c.Text
		}
		return resp.StatusCode, resp.Header.Get("Mcp-Session-Id"), map[string]any{"error": text}
	}
	return resp.StatusCode, resp.Header.Get("Mcp-Session-Id"), msg.Result.StructuredContent
}

// With --stateless each request stands alone: a preview sent in one bare
// POST applies in another, with no session between them, as it must when
// a load balancer sends them to different replicas. Stateful HTTP refuses
// such a request, which shows the flag took effect.
func TestStatelessHTTP_PreviewAndApplyInSeparateRequests(t *testing.T) {
	p := startStateless(t, "--stateless")

	status, sid, prev := post(t, p.URL, aliceToken, "preview_set_setting", map[string]any{"key": "theme", "value": "dark"})
	if status != http.StatusOK || sid != "" || prev["change_id"] == nil || prev["confirmation_token"] == nil {
		t.Fatalf("preview: status %d, session %q, result %v", status, sid, prev)
	}
	apply := map[string]any{"change_id": prev["change_id"], "confirmation_token": prev["confirmation_token"]}
	// Bob sends alice's change ID and token: the change is not his to see.
	if _, _, got := post(t, p.URL, bobToken, "apply_change", apply); !strings.Contains(got["error"].(string), "not found") {
		t.Fatalf("bob's apply of alice's change = %v, want not found", got)
	}
	if _, _, got := post(t, p.URL, aliceToken, "apply_change", apply); got["status"] != "applied" {
		t.Fatalf("alice's apply in a request of its own = %v", got)
	}
	if _, _, got := post(t, p.URL, aliceToken, "get_settings", nil); got["settings"].(map[string]any)["theme"] != "dark" {
		t.Fatalf("after the apply, settings = %v", got)
	}

	// A go-sdk client: its preview and its apply are two POSTs, and a
	// second client of the same identity applies what the first previewed.
	first, second := p.ConnectStateless(t, aliceToken), p.ConnectStateless(t, aliceToken)
	pv := first.Must("preview_set_setting", map[string]any{"key": "language", "value": "fr"})
	again := first.Must("preview_set_setting", map[string]any{"key": "theme", "value": "light"})
	if pv["run_id"] == nil || pv["run_id"] != again["run_id"] {
		t.Errorf("run_id of two previews by alice = %v, %v; want one session run, keyed by the principal", pv["run_id"], again["run_id"])
	}
	got := second.Must("apply_change", map[string]any{"change_id": pv["change_id"], "confirmation_token": pv["confirmation_token"]})
	if got["status"] != "applied" {
		t.Fatalf("apply by the second client = %v", got)
	}
	if s := second.Must("get_settings", nil)["settings"].(map[string]any); s["language"] != "fr" {
		t.Fatalf("settings = %v", s)
	}
	if err := p.Stop(t, 10*time.Second); err != nil {
		t.Fatalf("exit after SIGTERM: %v", err)
	}
}

func TestStatefulHTTP_RefusesARequestWithoutASession(t *testing.T) {
	p := startStateless(t) // no --stateless
	status, _, got := post(t, p.URL, aliceToken, "get_settings", nil)
	if status == http.StatusOK && got["rpc_error"] == nil {
		t.Fatalf("a stateful server answered a tools/call outside any session: %v", got)
	}
}

func TestStateless_NeedsHTTP(t *testing.T) {
	cmd, stderr := exampletest.Command(t, "settings", []string{"--stateless"})
	err := cmd.Run()
	if code := cmd.ProcessState.ExitCode(); code != 2 || !strings.Contains(stderr.String(), "only make sense with --http") {
		t.Fatalf("--stateless without --http: %v, exit %d, stderr %s", err, code, stderr)
	}
}
