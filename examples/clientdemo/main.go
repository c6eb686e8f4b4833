// Command clientdemo shows changeset-go working end to end: a real MCP
// client starts the notes example server as a subprocess over stdio, in a
// temporary directory with its own ledger, and walks through what an agent
// does, printing every result it receives:
//
//  1. preview a note, apply it, replay the same token (refused), undo it;
//  2. start a run, write three notes in it, let a person edit one of them
//     directly on disk, show the run's undo dry run (the edited note is
//     skipped), and undo the run.
//
// It exits with status 1 if any step does not behave as promised, so it
// doubles as a smoke test.
//
//	go run ./examples/clientdemo
package main

import (
	"context"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"time"

	"github.com/modelcontextprotocol/go-sdk/mcp"
)

func main() {
	quiet := flag.Bool("quiet", false, "print only the step titles and the verdict")
	flag.Usage = func() {
		fmt.Fprintf(flag.CommandLine.Output(), "Usage: clientdemo [--quiet]\n\n"+
			"Starts the notes example over stdio in a temporary directory and walks an\n"+
			"agent's preview → apply → replay → undo, then a run with a person's edit\n"+
			"in between, its undo dry run and its undo. Exits 1 if a promise breaks.\n")
	}
	flag.Parse()
	d := &demo{out: os.Stdout, verbose: !*quiet}
	if err := d.run(context.Background()); err != nil {
		fmt.Fprintf(os.Stdout, "\n✗ %v\n", err)
		os.Exit(1)
	}
	fmt.Fprintln(os.Stdout, "\n✓ every step behaved as promised")
}

// demo drives the notes server and narrates.
type demo struct {
	out     io.Writer
	verbose bool
	cs      *mcp.ClientSession
	root    string // the notes directory
	step    int
}

func (d *demo) run(ctx context.Context) error {
	dir, err := os.MkdirTemp("", "changeset-clientdemo-")
	if err != nil {
		return err
	}
	defer os.RemoveAll(dir)
	d.root = filepath.Join(dir, "notes")
	if err := os.Mkdir(d.root, 0o700); err != nil {
		return err
	}

	d.title("Build the notes server and start it over stdio")
	bin := filepath.Join(dir, "notes-server")
	build := exec.Command("go", "build", "-o", bin, "github.com/mcp-changeset/changeset-go/examples/notes")
	build.Stderr = os.Stderr
	if err := build.Run(); err != nil {
		return fmt.Errorf("build the notes server: %w", err)
	}
	cmd := exec.Command(bin, "--root", d.root, "--ledger", filepath.Join(dir, "ledger.db"))
	cmd.Env = append(os.Environ(), "MCP_CHANGESET_WRITE_MODE=guarded", "MCP_CHANGESET_LEDGER=")
	client := mcp.NewClient(&mcp.Implementation{Name: "clientdemo", Version: "1.0.0"}, nil)
	cctx, cancel := context.WithTimeout(ctx, 30*time.Second)
	defer cancel()
	d.cs, err = client.Connect(cctx, &mcp.CommandTransport{Command: cmd}, nil)
	if err != nil {
		return fmt.Errorf("connect to the notes server: %w", err)
	}
	defer d.cs.Close()
	tools, err := d.cs.ListTools(ctx, nil)
	if err != nil {
		return err
	}
	var names []string
	for _, t := range tools.Tools {
		names = append(names, t.Name)
	}
	d.say("tools: %s", strings.Join(names, ", "))

	if err := d.single(ctx); err != nil {
		return err
	}
	return d.runUndo(ctx)
}

// single walks one change: preview, apply, replay, undo.
func (d *demo) single(ctx context.Context) error {
	d.title("Preview a new note (nothing is written yet)")
	prev, err := d.call(ctx, "preview_write_note", map[string]any{"name": "todo.txt", "content": "buy milk\n"})
	if err != nil {
		return err
	}
	if _, err := os.Stat(filepath.Join(d.root, "todo.txt")); err == nil {
		return errors.New("the preview wrote the note")
	}

	d.title("Apply it with the confirmation token")
	applied, err := d.call(ctx, "apply_change", map[string]any{"change_id": prev["change_id"], "confirmation_token": prev["confirmation_token"]})
	if err != nil {
		return err
	}
	if err := d.expectFile("todo.txt", "buy milk\n"); err != nil {
		return err
	}

	d.title("Replay the same token (must be refused)")
	if err := d.refused(ctx, "apply_change", map[string]any{"change_id": prev["change_id"], "confirmation_token": prev["confirmation_token"]},
		"cannot be applied (status: applied)"); err != nil {
		return err
	}

	d.title("Undo it with the undo token")
	if _, err := d.call(ctx, "undo_change", map[string]any{"change_id": prev["change_id"], "undo_token": applied["undo_token"]}); err != nil {
		return err
	}
	if _, err := os.Stat(filepath.Join(d.root, "todo.txt")); !errors.Is(err, os.ErrNotExist) {
		return errors.New("the undo did not remove the note")
	}
	return nil
}

// runUndo walks a run with a person's edit in between.
func (d *demo) runUndo(ctx context.Context) error {
	d.title("Start a run for a task of several changes")
	run, err := d.call(ctx, "start_run", map[string]any{"label": "Write meeting notes"})
	if err != nil {
		return err
	}
	runID := run["run_id"]
	for _, n := range []struct{ name, content string }{
		{"agenda.txt", "1. budget\n2. hiring\n"},
		{"minutes.txt", "draft\n"},
		{"actions.txt", "- send the budget\n"},
	} {
		d.title("In the run: write " + n.name)
		prev, err := d.call(ctx, "preview_write_note", map[string]any{"name": n.name, "content": n.content, "run_id": runID})
		if err != nil {
			return err
		}
		if _, err := d.call(ctx, "apply_change", map[string]any{"change_id": prev["change_id"], "confirmation_token": prev["confirmation_token"]}); err != nil {
			return err
		}
	}

	d.title("A person edits minutes.txt directly, outside the run")
	const edited = "final minutes, written by a person\n"
	if err := os.WriteFile(filepath.Join(d.root, "minutes.txt"), []byte(edited), 0o600); err != nil {
		return err
	}
	d.say("wrote %q", edited)

	d.title("Dry run of undoing the run (nothing changes)")
	dry, err := d.call(ctx, "undo_run", map[string]any{"run_id": runID})
	if err != nil {
		return err
	}
	if n := len(list(dry["will_undo"])); n != 2 {
		return fmt.Errorf("the dry run would undo %d changes, want 2", n)
	}
	skipped := list(dry["skipped"])
	if len(skipped) != 1 || !strings.Contains(fmt.Sprint(skipped[0]), "changed after") {
		return fmt.Errorf("the dry run should skip the person's edit: %v", skipped)
	}
	if err := d.expectFile("agenda.txt", "1. budget\n2. hiring\n"); err != nil {
		return errors.New("the dry run changed a note")
	}

	d.title("Undo the run with the dry run's token")
	rep, err := d.call(ctx, "undo_run", map[string]any{"run_id": runID, "dry_run": false, "confirmation_token": dry["confirmation_token"]})
	if err != nil {
		return err
	}
	if rep["status"] != "partially_undone" {
		return fmt.Errorf("run status %v, want partially_undone", rep["status"])
	}
	for _, gone := range []string{"agenda.txt", "actions.txt"} {
		if _, err := os.Stat(filepath.Join(d.root, gone)); !errors.Is(err, os.ErrNotExist) {
			return fmt.Errorf("%s should be gone after the undo", gone)
		}
	}
	if err := d.expectFile("minutes.txt", edited); err != nil {
		return fmt.Errorf("the person's edit was not kept: %w", err)
	}
	d.say("agenda.txt and actions.txt are gone; minutes.txt keeps the person's edit")
	return nil
}

func (d *demo) title(s string) {
	d.step++
	fmt.Fprintf(d.out, "\n== %d. %s\n", d.step, s)
}

func (d *demo) say(format string, args ...any) {
	if d.verbose {
		fmt.Fprintf(d.out, "   "+format+"\n", args...)
	}
}

// call calls a tool that must succeed and prints its structured result.
func (d *demo) call(ctx context.Context, name string, args map[string]any) (map[string]any, error) {
	d.say("→ %s %s", name, compact(args))
	res, err := d.cs.CallTool(ctx, &mcp.CallToolParams{Name: name, Arguments: args})
	if err != nil {
		return nil, fmt.Errorf("%s: %w", name, err)
	}
	if res.IsError {
		return nil, fmt.Errorf("%s was refused: %s", name, text(res))
	}
	raw, _ := json.Marshal(res.StructuredContent)
	var out map[string]any
	if err := json.Unmarshal(raw, &out); err != nil {
		return nil, fmt.Errorf("%s: %w", name, err)
	}
	pretty, _ := json.MarshalIndent(out, "   ", "  ")
	d.say("← %s", pretty)
	return out, nil
}

// refused calls a tool that must be refused with a message containing want.
func (d *demo) refused(ctx context.Context, name string, args map[string]any, want string) error {
	d.say("→ %s %s", name, compact(args))
	res, err := d.cs.CallTool(ctx, &mcp.CallToolParams{Name: name, Arguments: args})
	if err != nil {
		return fmt.Errorf("%s: %w", name, err)
	}
	if !res.IsError || !strings.Contains(text(res), want) {
		return fmt.Errorf("%s should have been refused with %q, got %s", name, want, text(res))
	}
	d.say("← refused: %s", text(res))
	return nil
}

func (d *demo) expectFile(name, want string) error {
	got, err := os.ReadFile(filepath.Join(d.root, name))
	if err != nil {
		return err
	}
	if string(got) != want {
		return fmt.Errorf("%s holds %q, want %q", name, got, want)
	}
	return nil
}

func text(res *mcp.CallToolResult) string {
	var parts []string
	for _, c := range res.Content {
		if t, ok := c.(*mcp.TextContent); ok {
			parts = append(parts, t.Text)
		}
	}
	return strings.Join(parts, " ")
}

func compact(v any) string {
	b, _ := json.Marshal(v)
	return string(b)
}

func list(v any) []any {
	l, _ := v.([]any)
	return l
}
