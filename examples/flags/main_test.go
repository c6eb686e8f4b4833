package main

import (
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"

	"github.com/mcp-changeset/changeset-go/examples/internal/exampletest"
)

func TestMain(m *testing.M) { exampletest.Main(m) }

// start runs the flags server on a file in a fresh directory, with writes
// enabled, and returns a client and the file's path.
func start(t *testing.T, content string) (*exampletest.Client, string) {
	t.Helper()
	path := filepath.Join(t.TempDir(), "flags.json")
	if content != "" {
		if err := os.WriteFile(path, []byte(content), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	return exampletest.Start(t, "flags", []string{"--file", path}, exampletest.Guarded), path
}

func read(t *testing.T, path string) string {
	t.Helper()
	b, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	return string(b)
}

func write(t *testing.T, path, content string) {
	t.Helper()
	if err := os.WriteFile(path, []byte(content), 0o644); err != nil {
		t.Fatal(err)
	}
}

// flags is list_flags' result, one "name enabled rollout description"
// line per flag.
func flags(t *testing.T, c *exampletest.Client) string {
	t.Helper()
	var out struct {
		Flags []listed `json:"flags"`
	}
	exampletest.Decode(t, c.Must("list_flags", nil), &out)
	var lines []string
	for _, f := range out.Flags {
		lines = append(lines, strings.Join([]string{f.Name, boolText(f.Enabled), strconv.Itoa(f.Rollout), f.Description}, " "))
	}
	return strings.Join(lines, "\n")
}

func boolText(b bool) string {
	if b {
		return "on"
	}
	return "off"
}

func TestTools(t *testing.T) {
	c, _ := start(t, "")
	c.HasTools("preview_create_flag", "preview_update_flag", "preview_delete_flag", "apply_change", "undo_change",
		"get_change_status", "list_flags", "start_run", "undo_run")
	if got := flags(t, c); got != "" {
		t.Fatalf("a missing file lists %q, want no flags", got)
	}
}

func TestCreateUpdateDeleteAndUndoEach(t *testing.T) {
	c, path := start(t, "")
	p := c.Preview("create_flag", map[string]any{"name": "beta", "enabled": true, "rollout": 10, "description": "new editor"})
	if p.Summary != "Create flag beta" || len(p.Diff) != 3 {
		t.Fatalf("create preview %q %+v", p.Summary, p.Diff)
	}
	if _, err := os.Stat(path); !os.IsNotExist(err) {
		t.Fatalf("a preview wrote the file: %v", err)
	}
	created := c.Apply(p)
	c.Apply(c.Preview("create_flag", map[string]any{"name": "alpha", "enabled": false, "rollout": 0}))
	if got := flags(t, c); got != "alpha off 0 \nbeta on 10 new editor" {
		t.Fatalf("after the creates:\n%s", got)
	}

	p = c.Preview("update_flag", map[string]any{"name": "beta", "rollout": 50})
	if p.Summary != "Update flag beta" || len(p.Diff) != 1 || p.Diff[0].Field != "rollout" || p.Diff[0].Before != 10.0 || p.Diff[0].After != 50.0 {
		t.Fatalf("update preview %q %+v", p.Summary, p.Diff)
	}
	updated := c.Apply(p)
	if got := flags(t, c); got != "alpha off 0 \nbeta on 50 new editor" {
		t.Fatalf("after the update:\n%s", got)
	}
	c.Undo(updated)
	if got := flags(t, c); got != "alpha off 0 \nbeta on 10 new editor" {
		t.Fatalf("after the update's undo:\n%s", got)
	}

	c.Undo(created)
	if got := flags(t, c); got != "alpha off 0 " {
		t.Fatalf("after the create's undo:\n%s", got)
	}
	if got := read(t, path); got != "{\n  \"alpha\": {\n    \"description\": \"\",\n    \"enabled\": false,\n    \"rollout\": 0\n  }\n}\n" {
		t.Fatalf("file:\n%s", got)
	}
}

// A person's flag, written by hand with a field the server does not know
// and their own spacing: an update keeps the field, and the undo of a
// delete puts the whole flag back; the other flags keep their exact bytes.
func TestUndoOfADeleteRestoresAHandWrittenFlagExactly(t *testing.T) {
	other := `{"enabled":true, "rollout":5, "description":"kept as typed"}`
	c, path := start(t, "{\n  \"beta\": {\"enabled\": false, \"rollout\": 10, \"description\": \"x\", \"owner\": \"ana\"},\n  \"other\": "+other+"\n}\n")
	c.Apply(c.Preview("update_flag", map[string]any{"name": "beta", "enabled": true}))
	afterUpdate := read(t, path)
	if !strings.Contains(afterUpdate, `"owner": "ana"`) || !strings.Contains(afterUpdate, `"enabled": true`) {
		t.Fatalf("the update lost the hand-written field:\n%s", afterUpdate)
	}
	p := c.Preview("delete_flag", map[string]any{"name": "beta"})
	if p.Summary != "Delete flag beta" || len(p.Diff) != 4 {
		t.Fatalf("delete preview %q %+v", p.Summary, p.Diff)
	}
	deleted := c.Apply(p)
	if got := flags(t, c); got != "other on 5 kept as typed" {
		t.Fatalf("after the delete:\n%s", got)
	}
	c.Undo(deleted)
	if got := read(t, path); got != afterUpdate {
		t.Fatalf("after the delete's undo:\n%s\nwant, as before the delete:\n%s", got, afterUpdate)
	}
	if !strings.Contains(afterUpdate, `"other": `+other) {
		t.Fatalf("the other flag's bytes changed:\n%s", afterUpdate)
	}
}

// A hand edit between the preview and the apply: the apply is refused and
// the file is left byte for byte as the person saved it.
func TestHandEditBetweenPreviewAndApplyIsRefused(t *testing.T) {
	c, path := start(t, `{"beta": {"enabled": false, "rollout": 10, "description": ""}}`)
	p := c.Preview("update_flag", map[string]any{"name": "beta", "enabled": true})
	edited := `{"beta": {"enabled": false, "rollout": 20, "description": "edited by hand"}}`
	write(t, path, edited)
	c.ApplyRefused(p, "changed after the preview; nothing was written")
	if got := read(t, path); got != edited {
		t.Fatalf("file after the refused apply:\n%s", got)
	}
	if s := c.Status(p.ChangeID); s != "apply_failed" {
		t.Errorf("status %q, want apply_failed", s)
	}

	// A delete previewed before the person removed the flag is refused
	// too, as is a create previewed before the person added one.
	p = c.Preview("delete_flag", map[string]any{"name": "beta"})
	pc := c.Preview("create_flag", map[string]any{"name": "gamma", "enabled": false, "rollout": 1})
	edited = `{"gamma": {"enabled": true, "rollout": 100, "description": ""}}`
	write(t, path, edited)
	c.ApplyRefused(p, "nothing was written")
	c.ApplyRefused(pc, "nothing was written")
	if got := read(t, path); got != edited {
		t.Fatalf("file after the refused apply:\n%s", got)
	}
}

// A hand edit after the apply: the run's undo skips the change and shows
// the drift; the person's edit stays.
func TestHandEditBeforeARunsUndoIsSkippedWithDrift(t *testing.T) {
	c, path := start(t, `{"beta": {"enabled": false, "rollout": 10, "description": ""}}`)
	run := c.StartRun("flags")
	p, _ := c.PreviewRun("update_flag", map[string]any{"name": "beta", "rollout": 50, "run_id": run})
	c.Apply(p)
	pc, _ := c.PreviewRun("create_flag", map[string]any{"name": "gamma", "enabled": false, "rollout": 1, "run_id": run})
	c.Apply(pc)
	edited := strings.Replace(read(t, path), `"rollout": 50`, `"rollout": 75`, 1)
	write(t, path, edited)

	dry := c.DryRun(run)
	note, ok := exampletest.SkippedNote(dry, p.ChangeID)
	if !ok || len(note.Drift) != 1 || note.Drift[0].Field != "rollout" || string(note.Drift[0].Expected) != "50" || string(note.Drift[0].Found) != "75" {
		t.Fatalf("dry run: %+v, want the update skipped with rollout 50 → 75", dry)
	}
	report := c.UndoRun(run, dry.ConfirmationToken)
	if _, ok := exampletest.SkippedNote(report, p.ChangeID); !ok || len(report.Undone) != 1 || report.Undone[0].ChangeID != pc.ChangeID {
		t.Fatalf("undo_run: %+v, want the create undone and the update skipped", report)
	}
	if got := flags(t, c); got != "beta off 75 " {
		t.Fatalf("after the run's undo:\n%s", got)
	}
}

func TestRefusals(t *testing.T) {
	c, path := start(t, `{"beta": {"enabled": false, "rollout": 10, "description": ""}}`)
	before := read(t, path)
	for _, r := range []struct {
		tool string
		args map[string]any
		want string
	}{
		{"preview_create_flag", map[string]any{"name": "beta", "enabled": true, "rollout": 1}, `flag "beta" already exists`},
		{"preview_update_flag", map[string]any{"name": "nope", "enabled": true}, `there is no flag "nope"`},
		{"preview_delete_flag", map[string]any{"name": "nope"}, `there is no flag "nope"`},
		{"preview_update_flag", map[string]any{"name": "beta", "rollout": 10}, "nothing to change"},
		{"preview_update_flag", map[string]any{"name": "beta"}, "nothing to change"},
		{"preview_create_flag", map[string]any{"name": "gamma", "enabled": true, "rollout": 150}, "rollout 150 is not a percentage"},
		{"preview_update_flag", map[string]any{"name": "beta", "rollout": -1}, "rollout -1 is not a percentage"},
		{"preview_create_flag", map[string]any{"name": "Bad Name", "enabled": true, "rollout": 1}, `the flag name "Bad Name" is not valid`},
		{"preview_create_flag", map[string]any{"name": "", "enabled": true, "rollout": 1}, `the flag name "" is not valid`},
		{"preview_create_flag", map[string]any{"name": "gamma", "enabled": true, "rollout": 1, "colour": "red"}, "colour"},
		{"preview_create_flag", map[string]any{"name": "gamma", "enabled": true, "rollout": "ten"}, "rollout"},
		{"preview_delete_flag", map[string]any{}, "name"},
		{"preview_create_flag", map[string]any{"name": "gamma"}, "missing properties"},
	} {
		c.Refused(r.tool, r.args, r.want)
	}
	if got := read(t, path); got != before {
		t.Fatalf("a refusal wrote the file:\n%s", got)
	}
}

// A file that is not a JSON object of flags is reported, to the agent by
// its kind only, and never written.
func TestMalformedFileIsReportedAndLeftAlone(t *testing.T) {
	bad := "{\n  \"beta\": {\"enabled\": false,}\n}\n"
	c, path := start(t, bad)
	text := c.Refused("preview_create_flag", map[string]any{"name": "gamma", "enabled": true, "rollout": 1}, "kv.MalformedFileError")
	if strings.Contains(text, path) {
		t.Errorf("the agent was told the file's path: %s", text)
	}
	c.Refused("list_flags", nil, "the flags file cannot be read")
	if !strings.Contains(c.Stderr.String(), "line 2") {
		t.Errorf("the server's log does not say where the file is malformed:\n%s", c.Stderr)
	}

	// Fixed by hand after a preview... and broken again before the apply.
	write(t, path, `{}`)
	p := c.Preview("create_flag", map[string]any{"name": "gamma", "enabled": true, "rollout": 1})
	write(t, path, bad)
	c.Refused("apply_change", map[string]any{"change_id": p.ChangeID, "confirmation_token": p.ConfirmationToken}, "was not applied")
	if got := read(t, path); got != bad {
		t.Fatalf("the malformed file was written:\n%s", got)
	}
}
