package copytest_test

import (
	"bytes"
	"context"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/modelcontextprotocol/go-sdk/mcp"
)

// goPrograms returns the fenced Go blocks of a Markdown file that are
// whole programs (they start with "package main").
func goPrograms(t *testing.T, path string) []string {
	t.Helper()
	data, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	var progs []string
	rest := string(data)
	for {
		_, after, ok := strings.Cut(rest, "```go\n")
		if !ok {
			return progs
		}
		block, tail, ok := strings.Cut(after, "```")
		if !ok {
			t.Fatalf("%s: a ```go block is not closed", path)
		}
		if strings.HasPrefix(block, "package main\n") {
			progs = append(progs, block)
		}
		rest = tail
	}
}

// TestREADMEQuickstart_BuildsAndServes: the program the README shows a new
// user builds on its own against this checkout and, started over stdio by
// a real go-sdk client, serves a preview whose diff and token are there.
// A README that drifts from the API fails here.
func TestREADMEQuickstart_BuildsAndServes(t *testing.T) {
	if testing.Short() {
		t.Skip("builds the README's program (-short)")
	}
	root := checkout(t)
	progs := goPrograms(t, filepath.Join(root, "README.md"))
	if len(progs) != 1 {
		t.Fatalf("README.md holds %d whole Go programs, want the one quickstart", len(progs))
	}
	sum, err := os.ReadFile(filepath.Join(root, "go.sum"))
	if err != nil {
		t.Fatal(err)
	}
	dst := t.TempDir()
	writeModule(t, dst, "example.com/quickstart", root, goDirective(t, filepath.Join(root, "go.mod")), sum)
	if err := os.WriteFile(filepath.Join(dst, "main.go"), []byte(progs[0]), 0o644); err != nil {
		t.Fatal(err)
	}
	bin := filepath.Join(t.TempDir(), "quickstart")
	build := exec.Command("go", "build", "-o", bin, ".")
	build.Dir = dst
	build.Env = append(os.Environ(), "GOFLAGS=-mod=mod", "GOPROXY=off", "GOWORK=off")
	var out bytes.Buffer
	build.Stdout, build.Stderr = &out, &out
	if err := build.Run(); err != nil {
		t.Fatalf("go build of the README's program: %v\n%s", err, out.String())
	}

	ctx, cancel := context.WithTimeout(t.Context(), time.Minute)
	defer cancel()
	cmd := exec.Command(bin)
	cmd.Dir = t.TempDir() // the program writes settings-ledger.db here
	cmd.Env = append(os.Environ(), "MCP_CHANGESET_WRITE_MODE=guarded")
	client := mcp.NewClient(&mcp.Implementation{Name: "readme-test", Version: "1"}, nil)
	cs, err := client.Connect(ctx, &mcp.CommandTransport{Command: cmd}, nil)
	if err != nil {
		t.Fatalf("connect to the README's program: %v", err)
	}
	defer cs.Close()
	res, err := cs.CallTool(ctx, &mcp.CallToolParams{Name: "preview_set_setting", Arguments: map[string]any{"key": "theme", "value": "dark"}})
	if err != nil || res.IsError {
		t.Fatalf("preview_set_setting: %v %+v", err, res)
	}
	p, _ := res.StructuredContent.(map[string]any)
	diff, _ := p["diff"].([]any)
	if p["status"] != "preview" || len(diff) != 1 || p["confirmation_token"] == "" {
		t.Fatalf("preview = %v", p)
	}
	if e := diff[0].(map[string]any); e["field"] != "theme" || e["before"] != "light" || e["after"] != "dark" || e["kind"] != "changed" {
		t.Errorf("diff = %v", e)
	}
	res, err = cs.CallTool(ctx, &mcp.CallToolParams{Name: "apply_change", Arguments: map[string]any{"change_id": p["change_id"], "confirmation_token": p["confirmation_token"]}})
	if err != nil || res.IsError {
		t.Fatalf("apply_change: %v %+v", err, res)
	}
	if a, _ := res.StructuredContent.(map[string]any); a["status"] != "applied" || a["result"].(map[string]any)["previous"] != "light" {
		t.Errorf("apply = %v", a)
	}
}
