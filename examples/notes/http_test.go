package main

import (
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

// startHTTP starts the notes server over Streamable HTTP on a free
// loopback port, with a token for alice and one for bob.
func startHTTP(t *testing.T) (*exampletest.Process, string) {
	t.Helper()
	dir, tmp := t.TempDir(), t.TempDir()
	tokens := filepath.Join(tmp, "tokens")
	if err := os.WriteFile(tokens, []byte("# test tokens\n"+aliceToken+" alice\n"+bobToken+"\tbob\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	p := exampletest.StartHTTP(t, "notes", []string{"--root", dir, "--http", "127.0.0.1:0", "--auth-token-file", tokens},
		exampletest.Guarded)
	return p, dir
}

func TestHTTP_RequestsWithoutAValidBearerTokenAreRejected(t *testing.T) {
	p, _ := startHTTP(t)
	if !strings.HasPrefix(p.URL, "http://127.0.0.1:") || !strings.HasSuffix(p.URL, "/mcp") {
		t.Fatalf("URL = %s", p.URL)
	}
	body := `{"jsonrpc":"2.0","id":1,"method":"tools/list"}`
	for _, token := range []string{"", "wrong-token", aliceToken + "x", aliceToken[:10]} {
		req, _ := http.NewRequest("POST", p.URL, strings.NewReader(body))
		req.Header.Set("Content-Type", "application/json")
		req.Header.Set("Accept", "application/json, text/event-stream")
		resp, err := exampletest.BearerClient(token).Do(req)
		if err != nil {
			t.Fatal(err)
		}
		resp.Body.Close()
		if resp.StatusCode != http.StatusUnauthorized {
			t.Errorf("token %q: status %d, want 401", token, resp.StatusCode)
		}
	}
}

func TestHTTP_AChangeBelongsToTheIdentityThatPreviewedIt(t *testing.T) {
	p, dir := startHTTP(t)
	alice := p.Connect(t, aliceToken)
	bob := p.Connect(t, bobToken)

	prev := alice.Preview("write_note", map[string]any{"name": "a.txt", "content": "from alice"})
	bob.ApplyRefused(prev, "change "+prev.ChangeID+" not found")
	bob.Refused("get_change_status", map[string]any{"change_id": prev.ChangeID}, "not found")
	if _, err := os.Lstat(filepath.Join(dir, "a.txt")); !os.IsNotExist(err) {
		t.Fatal("bob's refused apply wrote")
	}
	applied := alice.Apply(prev) // bob's attempt did not spend the token
	if readFile(t, filepath.Join(dir, "a.txt")) != "from alice" {
		t.Fatal("alice's apply did not write")
	}
	bob.UndoRefused(applied, "not found")
	alice.Undo(applied)

	if err := p.Stop(t, 10*time.Second); err != nil {
		t.Fatalf("exit after SIGTERM: %v", err)
	}
	log := p.Stderr.String()
	if strings.Contains(log, aliceToken) || strings.Contains(log, bobToken) {
		t.Fatalf("a bearer token reached the log:\n%s", log)
	}
}
