package clients

// The TypeScript client test: DESIGN.md's external contract says every
// tool's input and output schema must be accepted by clients built on the
// official TypeScript SDK. A schema that SDK rejects (a Go `any` field
// inferred as the schema `true`, an array output schema) makes tools/list
// fail for EVERY tool, so a go-sdk client alone cannot catch it. This test
// runs typescript/client.mjs, which uses the real SDK (pinned in
// typescript/package.json), against the notes, tickets and settings
// examples.

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"maps"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/mcp-changeset/changeset-go/internal/testkit"

	"github.com/mcp-changeset/changeset-go/examples/internal/exampletest"
)

// envRequireNode, set to 1 (as CI does), turns the skip without node and
// npm into a failure.
const envRequireNode = "CHANGESET_REQUIRE_NODE"

// tsDir holds client.mjs, package.json and package-lock.json.
const tsDir = "typescript"

// sharedTools are the Guard's tools every example serves.
var sharedTools = []string{"apply_change", "undo_change", "get_change_status", "start_run", "get_run", "list_runs", "undo_run"}

// tsReport is the JSON document client.mjs prints.
type tsReport struct {
	Server *struct {
		Name    string `json:"name"`
		Version string `json:"version"`
	} `json:"server"`
	Tools []struct {
		Name            string `json:"name"`
		HasOutputSchema bool   `json:"hasOutputSchema"`
	} `json:"tools"`
	Steps    []tsStep `json:"steps"`
	Uncalled []string `json:"uncalled"`
	Error    *string  `json:"error"`
	// RawTools names the tools by index when tools/list was rejected.
	RawTools []string `json:"rawTools"`
}

// tsStep is one tool call of the flow.
type tsStep struct {
	Label             string         `json:"label"`
	Tool              string         `json:"tool"`
	StructuredContent map[string]any `json:"structuredContent"`
	Validated         bool           `json:"validated"`
	IsError           bool           `json:"isError"`
	Error             string         `json:"error"`
	Thrown            string         `json:"thrown"`
}

func (r *tsReport) step(t *testing.T, label string) map[string]any {
	t.Helper()
	for _, s := range r.Steps {
		if s.Label == label {
			if s.StructuredContent == nil {
				t.Fatalf("step %s (%s): no structuredContent (error %q)", label, s.Tool, s.Error)
			}
			return s.StructuredContent
		}
	}
	t.Fatalf("step %s did not run", label)
	return nil
}

// TestTypeScriptClient_AcceptsEverySchemaAndResult lists the tools of the
// notes, tickets and settings examples with the TypeScript SDK's Client (it
// checks every inputSchema and outputSchema) and runs a flow on each that
// calls every tool at least once (the SDK checks each structuredContent
// against the tool's outputSchema).
func TestTypeScriptClient_AcceptsEverySchemaAndResult(t *testing.T) {
	node := requireNode(t)
	dir, err := filepath.Abs(tsDir)
	if err != nil {
		t.Fatal(err)
	}
	testkit.NpmCI(t, dir)

	listed, called := map[string]bool{}, map[string]bool{}
	for _, tc := range []struct {
		name  string
		tools []string
		args  func(t *testing.T) []string
		check func(t *testing.T, r *tsReport, args []string)
	}{
		{"settings", []string{"preview_set_setting", "get_settings"}, nil, checkSettings},
		{"notes", []string{"preview_write_note", "preview_delete_note", "list_notes", "read_note"},
			func(t *testing.T) []string { return []string{"--root", t.TempDir()} }, checkNotes},
		{"tickets", []string{"preview_create_ticket", "preview_update_ticket", "preview_delete_ticket", "list_tickets"}, nil, checkTickets},
	} {
		t.Run(tc.name, func(t *testing.T) {
			args := []string{"--ledger", filepath.Join(t.TempDir(), "ledger.db")}
			if tc.args != nil {
				args = append(args, tc.args(t)...)
			}
			r := runTSClient(t, node, dir, tc.name, args)
			if r.Server == nil || r.Server.Name != tc.name {
				t.Errorf("server = %+v, want %s", r.Server, tc.name)
			}
			names := map[string]bool{}
			for _, tool := range r.Tools {
				names[tool.Name], listed[tool.Name] = true, true
				if !tool.HasOutputSchema {
					t.Errorf("tool %s has no outputSchema: the TypeScript client cannot check its results", tool.Name)
				}
			}
			for _, want := range append(slices.Clone(sharedTools), tc.tools...) {
				if !names[want] {
					t.Errorf("tools/list lacks %s (listed: %v)", want, slices.Sorted(maps.Keys(names)))
				}
			}
			for _, s := range r.Steps {
				if s.StructuredContent != nil {
					called[s.Tool] = true
					if !s.Validated {
						t.Errorf("step %s: the TypeScript client did not validate the result of %s", s.Label, s.Tool)
					}
				}
			}
			tc.check(t, r, args)
		})
	}
	// The shared tools' results need checking once, on any example.
	if t.Failed() {
		return
	}
	for name := range listed {
		if !called[name] {
			t.Errorf("no flow called %s successfully: its outputSchema was never checked against a result", name)
		}
	}
}

// TestTypeScriptClient_StatelessHTTP runs the settings flow with the
// TypeScript SDK's Streamable HTTP client against the example serving
// --stateless on loopback, a bearer token presented: every call is a
// request of its own, as behind a load balancer.
func TestTypeScriptClient_StatelessHTTP(t *testing.T) {
	node := requireNode(t)
	dir, err := filepath.Abs(tsDir)
	if err != nil {
		t.Fatal(err)
	}
	testkit.NpmCI(t, dir)
	const token = "ts-client-0123456789abcdef01234567"
	tokens := filepath.Join(t.TempDir(), "tokens")
	if err := os.WriteFile(tokens, []byte(token+" ts\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	p := exampletest.StartHTTP(t, "settings", []string{"--http", "127.0.0.1:0", "--stateless", "--auth-token-file", tokens}, exampletest.Guarded)
	r := runClientMJS(t, node, dir, "settings", []string{"--url", p.URL}, "MCP_BEARER_TOKEN="+token)
	if r.Server == nil || r.Server.Name != "settings" {
		t.Fatalf("server = %+v", r.Server)
	}
	checkSettings(t, r, nil)
	if err := p.Stop(t, 10*time.Second); err != nil {
		t.Fatalf("exit after SIGTERM: %v", err)
	}
}

func checkSettings(t *testing.T, r *tsReport, _ []string) {
	p := r.step(t, "preview")
	if p["status"] != "preview" || p["writes_enabled"] != true {
		t.Errorf("preview = %v", p)
	}
	id := p["change_id"]
	if a := r.step(t, "apply"); a["status"] != "applied" || a["change_id"] != id || !nonEmpty(a["undo_token"]) {
		t.Errorf("apply = %v", a)
	}
	if s := r.step(t, "settings_applied")["settings"].(map[string]any); s["theme"] != "dark" {
		t.Errorf("settings after apply = %v", s)
	}
	for _, s := range r.Steps {
		if s.Label == "replay" && (!s.IsError || s.Error != fmt.Sprintf("change %s cannot be applied (status: applied)", id)) {
			t.Errorf("replayed apply_change: isError=%v %q", s.IsError, s.Error)
		}
	}
	if s := r.step(t, "status_applied"); s["status"] != "applied" {
		t.Errorf("status after apply = %v", s)
	}
	if u := r.step(t, "undo"); u["status"] != "undone" || u["change_id"] != id {
		t.Errorf("undo = %v", u)
	}
	if s := r.step(t, "status_undone"); s["status"] != "undone" {
		t.Errorf("status after undo = %v", s)
	}

	run := r.step(t, "start_run")
	runID := run["run_id"]
	if run["status"] != "open" || !nonEmpty(runID) {
		t.Errorf("start_run = %v", run)
	}
	if p := r.step(t, "run_preview"); p["status"] != "preview" || p["run_id"] != runID {
		t.Errorf("preview in the run = %v", p)
	}
	if a := r.step(t, "run_apply"); a["status"] != "applied" {
		t.Errorf("apply in the run = %v", a)
	}
	if s := r.step(t, "settings_run_applied")["settings"].(map[string]any); s["language"] != "fr" {
		t.Errorf("settings after the run's apply = %v", s)
	}
	dry := r.step(t, "undo_run_dry")
	if dry["dry_run"] != true || !nonEmpty(dry["confirmation_token"]) || len(list(dry["will_undo"])) != 1 {
		t.Errorf("undo_run dry run = %v", dry)
	}
	rep := r.step(t, "undo_run")
	if rep["status"] != "undone" || rep["dry_run"] != false || len(list(rep["undone"])) != 1 || len(list(rep["skipped"])) != 0 {
		t.Errorf("undo_run = %v", rep)
	}
	got := r.step(t, "get_run")
	changes := list(got["changes"])
	if got["status"] != "undone" || len(changes) != 1 || changes[0].(map[string]any)["status"] != "undone" {
		t.Errorf("get_run = %v", got)
	}
	// The task run, and the session run that the previews made without
	// run_id joined.
	runs := list(r.step(t, "list_runs")["runs"])
	var task, session int
	for _, e := range runs {
		run := e.(map[string]any)
		switch {
		case run["run_id"] == runID && run["status"] == "undone" && run["kind"] == "task":
			task++
		case run["kind"] == "session" && strings.Contains(run["label"].(string), "changeset-go-typescript-test"):
			session++
		}
	}
	if task != 1 || len(runs) > 2 || session > 1 {
		t.Errorf("list_runs = %v", runs)
	}
	if s := r.step(t, "settings_after")["settings"].(map[string]any); s["theme"] != "light" || s["language"] != "en" {
		t.Errorf("settings at the end = %v, want theme light and language en", s)
	}
}

func checkNotes(t *testing.T, r *tsReport, args []string) {
	if n := list(r.step(t, "list_before")["notes"]); len(n) != 0 {
		t.Errorf("notes before = %v", n)
	}
	p := r.step(t, "preview")
	if p["status"] != "preview" {
		t.Errorf("preview = %v", p)
	}
	if a := r.step(t, "apply"); a["status"] != "applied" || !nonEmpty(a["undo_token"]) {
		t.Errorf("apply = %v", a)
	}
	if n := r.step(t, "read"); n["content"] != "milk\n" {
		t.Errorf("read_note after apply = %v", n)
	}
	if d := r.step(t, "preview_delete"); d["status"] != "preview" {
		t.Errorf("preview_delete_note = %v", d)
	}
	if u := r.step(t, "undo"); u["status"] != "undone" {
		t.Errorf("undo = %v", u)
	}
	if s := r.step(t, "status_undone"); s["status"] != "undone" || s["change_id"] != p["change_id"] {
		t.Errorf("status after undo = %v", s)
	}
	if n := list(r.step(t, "list_after")["notes"]); len(n) != 0 {
		t.Errorf("notes after undo = %v", n)
	}
	root := args[slices.Index(args, "--root")+1]
	if _, err := os.Stat(filepath.Join(root, "todo.txt")); !os.IsNotExist(err) {
		t.Errorf("todo.txt after undo: %v", err)
	}
}

func checkTickets(t *testing.T, r *tsReport, _ []string) {
	p := r.step(t, "preview")
	if p["status"] != "preview" {
		t.Errorf("preview = %v", p)
	}
	a := r.step(t, "apply")
	result, _ := a["result"].(map[string]any)
	if a["status"] != "applied" || result["title"] != "from TypeScript" {
		t.Errorf("apply = %v", a)
	}
	tickets := list(r.step(t, "list")["tickets"])
	if len(tickets) != 1 || tickets[0].(map[string]any)["title"] != "from TypeScript" {
		t.Errorf("list_tickets = %v", tickets)
	}
	for _, label := range []string{"preview_update", "preview_delete"} {
		if s := r.step(t, label); s["status"] != "preview" {
			t.Errorf("%s = %v", label, s)
		}
	}
	if s := r.step(t, "status_applied"); s["status"] != "applied" {
		t.Errorf("status = %v", s)
	}
}

// list returns a JSON array, or nil.
func list(v any) []any { l, _ := v.([]any); return l }

// nonEmpty reports whether v is a non-empty JSON string.
func nonEmpty(v any) bool { s, _ := v.(string); return s != "" }

// requireNode returns node's path, or skips the test (fails it under
// CHANGESET_REQUIRE_NODE=1) when node or npm is missing or node is older
// than the SDK supports.
func requireNode(t *testing.T) string {
	t.Helper()
	var missing []string
	node, err := exec.LookPath("node")
	if err != nil {
		missing = append(missing, "node")
	}
	if _, err := exec.LookPath("npm"); err != nil {
		missing = append(missing, "npm")
	}
	problem := ""
	if len(missing) > 0 {
		problem = strings.Join(missing, " and ") + " not on PATH"
	} else if out, err := exec.Command(node, "--version").Output(); err != nil {
		problem = fmt.Sprintf("node --version: %v", err)
	} else if v := strings.TrimSpace(string(out)); nodeMajor(v) < 18 {
		problem = fmt.Sprintf("node %s is too old (the MCP TypeScript SDK needs 18 or newer)", v)
	}
	if problem == "" {
		return node
	}
	if os.Getenv(envRequireNode) == "1" {
		t.Fatalf("%s=1 but %s (apt-get install nodejs npm)", envRequireNode, problem)
	}
	t.Skipf("SKIPPING TypeScript client test: %s; the tool schemas are NOT checked against the TypeScript SDK "+
		"(apt-get install nodejs npm; set %s=1 to make this a failure)", problem, envRequireNode)
	return ""
}

// nodeMajor returns the major version of "v20.1.2", or 0.
func nodeMajor(v string) int {
	major, _, _ := strings.Cut(strings.TrimPrefix(v, "v"), ".")
	n, _ := strconv.Atoi(major)
	return n
}

// runTSClient builds the example name and runs client.mjs on it with args,
// writes enabled. It fails the test, with the client's error and the
// server's stderr, when the client reports an error.
func runTSClient(t *testing.T, node, dir, name string, args []string) *tsReport {
	t.Helper()
	bin := exampletest.Build(t, name)
	return runClientMJS(t, node, dir, name, append([]string{bin}, args...))
}

// runClientMJS runs node client.mjs with clientArgs (and env) and returns
// its report; see runTSClient.
func runClientMJS(t *testing.T, node, dir, name string, clientArgs []string, env ...string) *tsReport {
	t.Helper()
	ctx, cancel := context.WithTimeout(t.Context(), 2*time.Minute)
	defer cancel()
	cmd := exec.CommandContext(ctx, node, append([]string{"client.mjs"}, clientArgs...)...)
	cmd.Dir = dir
	cmd.Env = append(os.Environ(), "MCP_CHANGESET_LEDGER=", exampletest.Guarded)
	cmd.Env = append(cmd.Env, env...)
	var stdout, stderr bytes.Buffer
	cmd.Stdout, cmd.Stderr = &stdout, &stderr
	cmd.WaitDelay = 5 * time.Second
	start := time.Now()
	runErr := cmd.Run()
	t.Logf("node client.mjs %s: %v", name, time.Since(start).Round(time.Millisecond))

	var r tsReport
	if err := json.Unmarshal(stdout.Bytes(), &r); err != nil {
		t.Fatalf("node client.mjs %s: %v; output is not JSON (%v):\n%s\nstderr:\n%s", name, runErr, err, stdout.Bytes(), stderr.Bytes())
	}
	if runErr != nil || r.Error != nil {
		failed := "in connect or tools/list"
		if n := len(r.Steps); n > 0 {
			failed = fmt.Sprintf("at step %s (tool %s)", r.Steps[n-1].Label, r.Steps[n-1].Tool)
		}
		msg := "<none>"
		if r.Error != nil {
			msg = *r.Error
		}
		if len(r.RawTools) > 0 {
			msg += "\nthe tools, by index: " + strings.Join(r.RawTools, ", ")
		}
		t.Fatalf("the TypeScript SDK client failed on %s %s: %v\nerror: %s\nserver and client stderr:\n%s", name, failed, runErr, msg, stderr.Bytes())
	}
	return &r
}
