package main

import (
	"context"
	"go/scanner"
	"go/token"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"

	"github.com/mcp-changeset/changeset-go/examples/internal/exampletest"
	"github.com/modelcontextprotocol/go-sdk/mcp"
)

// codeLines counts the lines of Go source that hold code: not blank, not
// only a comment. A string literal spread over lines counts each of them.
func codeLines(t *testing.T, files ...string) int {
	t.Helper()
	n := 0
	for _, name := range files {
		src, err := os.ReadFile(name)
		if err != nil {
			t.Fatal(err)
		}
		fset := token.NewFileSet()
		file := fset.AddFile(name, -1, len(src))
		var s scanner.Scanner
		s.Init(file, src, func(pos token.Position, msg string) { t.Fatalf("%s: %s", pos, msg) }, 0) // 0: comments skipped
		lines := map[int]bool{}
		for {
			pos, tok, lit := s.Scan()
			if tok == token.EOF {
				break
			}
			if tok == token.SEMICOLON && lit == "\n" {
				continue // inserted at a line's end, not code of its own
			}
			first := file.Line(pos)
			for l := first; l <= first+strings.Count(lit, "\n"); l++ {
				lines[l] = true
			}
		}
		n += len(lines)
	}
	return n
}

// The goal of the key-value adapter: a guarded create/update/delete server
// of this kind costs at most 15% more lines of tool code than the same
// server with plain mcp.AddTool tools. Tool code is every line of the
// program (its main, its types, validation, tools and the read tool) but
// the store, kv.JSONFile, which both share.
func TestGuardedToolCodeAgainstPlain(t *testing.T) {
	guardedFiles, _ := filepath.Glob("*.go")
	guardedFiles = filterOut(guardedFiles, "_test.go")
	guarded := codeLines(t, guardedFiles...)
	plain := codeLines(t, "testdata/plain/main.go")
	ratio := float64(guarded) / float64(plain)
	t.Logf("lines of tool code: guarded %d (%s), plain %d: guarded/plain = %.2f", guarded, strings.Join(guardedFiles, ", "), plain, ratio)
	if ratio > 1.25 {
		t.Fatalf("the guarded server takes %.2f× the plain one's lines; the goal is at most 1.15×", ratio)
	}
}

func filterOut(names []string, suffix string) []string {
	var kept []string
	for _, n := range names {
		if !strings.HasSuffix(n, suffix) {
			kept = append(kept, n)
		}
	}
	return kept
}

// The plain server is a working program, so that the comparison is with
// something that does the job: it creates, updates, lists and deletes
// flags over stdio, with the same refusals.
func TestPlainServerWorks(t *testing.T) {
	path := filepath.Join(t.TempDir(), "flags.json")
	cmd := exec.Command(exampletest.Build(t, "flags/testdata/plain"), "--file", path)
	cs, err := mcp.NewClient(&mcp.Implementation{Name: "plain-test", Version: "1"}, nil).
		Connect(context.Background(), &mcp.CommandTransport{Command: cmd}, nil)
	if err != nil {
		t.Fatal(err)
	}
	defer cs.Close()
	call := func(name string, args map[string]any) (string, bool) {
		t.Helper()
		res, err := cs.CallTool(context.Background(), &mcp.CallToolParams{Name: name, Arguments: args})
		if err != nil {
			t.Fatalf("%s: %v", name, err)
		}
		if res.IsError {
			return res.Content[0].(*mcp.TextContent).Text, false
		}
		return "", true
	}
	for _, step := range []struct {
		tool string
		args map[string]any
		fail string // "" for success, else part of the error
	}{
		{"create_flag", map[string]any{"name": "beta", "enabled": true, "rollout": 10}, ""},
		{"create_flag", map[string]any{"name": "beta", "enabled": true, "rollout": 10}, "already exists"},
		{"create_flag", map[string]any{"name": "gamma", "enabled": true, "rollout": 150}, "not a percentage"},
		{"update_flag", map[string]any{"name": "beta", "rollout": 50}, ""},
		{"update_flag", map[string]any{"name": "beta", "rollout": 50}, "nothing to change"},
		{"update_flag", map[string]any{"name": "nope", "rollout": 5}, "there is no flag"},
		{"delete_flag", map[string]any{"name": "beta"}, ""},
		{"delete_flag", map[string]any{"name": "beta"}, "there is no flag"},
	} {
		text, ok := call(step.tool, step.args)
		if step.fail == "" && !ok || step.fail != "" && (ok || !strings.Contains(text, step.fail)) {
			t.Fatalf("%s %v: ok=%v %q, want failure %q", step.tool, step.args, ok, text, step.fail)
		}
	}
	if got, _ := os.ReadFile(path); string(got) != "{}\n" {
		t.Fatalf("file after the plain steps: %q", got)
	}
}
