package main

import (
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"github.com/mcp-changeset/changeset-go/examples/internal/exampletest"
)

func TestMain(m *testing.M) { exampletest.Main(m) }

// startNotes starts the notes server over stdio on a fresh directory with
// writes enabled.
func startNotes(t *testing.T) (*exampletest.Client, string) {
	t.Helper()
	dir := t.TempDir()
	return exampletest.Start(t, "notes", []string{"--root", dir}, exampletest.Guarded), dir
}

func readFile(t *testing.T, path string) string {
	t.Helper()
	b, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	return string(b)
}

func writeFile(t *testing.T, path, content string) {
	t.Helper()
	if err := os.WriteFile(path, []byte(content), 0o644); err != nil {
		t.Fatal(err)
	}
}

// dirNames lists a directory, hidden files included.
func dirNames(t *testing.T, dir string) []string {
	t.Helper()
	entries, err := os.ReadDir(dir)
	if err != nil {
		t.Fatal(err)
	}
	names := []string{}
	for _, e := range entries {
		names = append(names, e.Name())
	}
	return names
}

func TestNotes_CreateReplaceUndo(t *testing.T) {
	c, dir := startNotes(t)
	c.HasTools("preview_write_note", "preview_delete_note", "list_notes", "read_note", "apply_change", "undo_change")
	path := filepath.Join(dir, "todo.txt")

	create := c.Preview("write_note", map[string]any{"name": "todo.txt", "content": "milk"})
	if len(create.Diff) != 1 || create.Diff[0].Field != "content" || create.Diff[0].Before != nil || create.Diff[0].After != "milk" {
		t.Fatalf("create diff = %+v", create.Diff)
	}
	if _, err := os.Lstat(path); !os.IsNotExist(err) {
		t.Fatal("the preview wrote")
	}
	var r previous
	created := c.ApplyResult(create, &r)
	if r.Existed || readFile(t, path) != "milk" {
		t.Fatalf("after create: result %+v, file %q", r, readFile(t, path))
	}
	c.ApplyRefused(create, "cannot be applied (status: applied)")

	replace := c.Preview("write_note", map[string]any{"name": "todo.txt", "content": "milk\neggs"})
	if replace.Diff[0].Before != "milk" || replace.Diff[0].After != "milk\neggs" {
		t.Fatalf("replace diff = %+v", replace.Diff)
	}
	replaced := c.ApplyResult(replace, &r)
	if !r.Existed || r.Content != "milk" || readFile(t, path) != "milk\neggs" {
		t.Fatalf("after replace: result %+v, file %q", r, readFile(t, path))
	}

	var list listOutput
	exampletest.Decode(t, c.Must("list_notes", nil), &list)
	if len(list.Notes) != 1 || list.Notes[0] != (noteInfo{Name: "todo.txt", Size: 9, SHA256: digest([]byte("milk\neggs"))}) {
		t.Fatalf("list_notes = %+v", list)
	}
	var note readOutput
	exampletest.Decode(t, c.Must("read_note", map[string]any{"name": "todo.txt"}), &note)
	if note.Content != "milk\neggs" || note.SHA256 != list.Notes[0].SHA256 {
		t.Fatalf("read_note = %+v", note)
	}

	c.Undo(replaced)
	if readFile(t, path) != "milk" {
		t.Fatalf("undo of the replace left %q", readFile(t, path))
	}
	c.Undo(created)
	if _, err := os.Lstat(path); !os.IsNotExist(err) {
		t.Fatal("undo of the create left the file")
	}
	// Only the directory's lock file stays: no temporary file is left.
	if names := dirNames(t, dir); len(names) != 1 || names[0] != lockFile {
		t.Fatalf("left behind: %v", names)
	}
}

func TestNotes_DeleteAndUndoRestoresContent(t *testing.T) {
	c, dir := startNotes(t)
	path := filepath.Join(dir, "plan.md")
	writeFile(t, path, "# Plan\n")

	del := c.Preview("delete_note", map[string]any{"name": "plan.md"})
	if del.Diff[0].Before != "# Plan\n" || del.Diff[0].After != nil {
		t.Fatalf("delete diff = %+v", del.Diff)
	}
	applied := c.Apply(del)
	if _, err := os.Lstat(path); !os.IsNotExist(err) {
		t.Fatal("apply did not delete")
	}
	c.Undo(applied)
	if readFile(t, path) != "# Plan\n" {
		t.Fatal("undo did not restore the content")
	}
	c.Refused("preview_delete_note", map[string]any{"name": "nothing.md"}, `the note "nothing.md" does not exist`)
	var list listOutput
	exampletest.Decode(t, c.Must("list_notes", nil), &list)
	if list.Notes == nil || len(list.Notes) != 1 {
		t.Fatalf("list_notes = %+v", list)
	}
}

func TestNotes_BadNamesAreRefusedAndNothingIsWritten(t *testing.T) {
	c, dir := startNotes(t)
	outside := filepath.Join(t.TempDir(), "outside.txt")
	for _, name := range []string{
		"../x", "a/b", `a\b`, "/etc/passwd", outside, "..", ".", ".hidden", "a..b", "",
		"a\x00b", "a\nb", "a\u202eb", strings.Repeat("n", maxNameBytes+1),
	} {
		c.Refused("preview_write_note", map[string]any{"name": name, "content": "x"}, "note name")
		c.Refused("preview_delete_note", map[string]any{"name": name}, "note name")
		c.Refused("read_note", map[string]any{"name": name}, "note name")
	}
	if names := dirNames(t, dir); len(names) != 0 {
		t.Fatalf("the directory holds %v", names)
	}
	if _, err := os.Lstat(outside); !os.IsNotExist(err) {
		t.Fatal("a file was written outside the root")
	}
}

func TestNotes_SymlinksAreRefused(t *testing.T) {
	c, dir := startNotes(t)
	target := filepath.Join(t.TempDir(), "target.txt")
	writeFile(t, target, "secret")
	if err := os.Symlink(target, filepath.Join(dir, "link.txt")); err != nil {
		t.Fatal(err)
	}
	writeFile(t, filepath.Join(dir, "inside.txt"), "inside")
	if err := os.Symlink("inside.txt", filepath.Join(dir, "alias.txt")); err != nil {
		t.Fatal(err)
	}
	for _, name := range []string{"link.txt", "alias.txt"} {
		c.Refused("preview_write_note", map[string]any{"name": name, "content": "x"}, "symbolic link")
		c.Refused("preview_delete_note", map[string]any{"name": name}, "symbolic link")
		c.Refused("read_note", map[string]any{"name": name}, "symbolic link")
	}
	var list listOutput
	exampletest.Decode(t, c.Must("list_notes", nil), &list)
	if len(list.Notes) != 1 || list.Notes[0].Name != "inside.txt" {
		t.Fatalf("list_notes = %+v", list)
	}
	if readFile(t, target) != "secret" || readFile(t, filepath.Join(dir, "inside.txt")) != "inside" {
		t.Fatal("a link target changed")
	}
}

func TestNotes_SymlinkSwappedInAfterPreviewIsNotWrittenThrough(t *testing.T) {
	c, dir := startNotes(t)
	target := filepath.Join(t.TempDir(), "target.txt")
	writeFile(t, target, "secret")
	writeFile(t, filepath.Join(dir, "a.txt"), "old")

	for _, name := range []string{"a.txt", "new.txt"} { // an existing note, and one the change would create
		p := c.Preview("write_note", map[string]any{"name": name, "content": "overwritten"})
		path := filepath.Join(dir, name)
		os.Remove(path)
		if err := os.Symlink(target, path); err != nil {
			t.Fatal(err)
		}
		c.ApplyRefused(p, "changed after the preview; nothing was written")
		if readFile(t, target) != "secret" {
			t.Fatalf("%s: the link's target was written", name)
		}
		if fi, err := os.Lstat(path); err != nil || fi.Mode()&os.ModeSymlink == 0 {
			t.Fatalf("%s: the link was replaced", name)
		}
		if got := c.Status(p.ChangeID); got != "apply_failed" {
			t.Fatalf("%s: status %s", name, got)
		}
	}
}

func TestNotes_EditBetweenPreviewAndApplyIsRefused(t *testing.T) {
	c, dir := startNotes(t)
	path := filepath.Join(dir, "a.txt")
	writeFile(t, path, "v1")
	write := c.Preview("write_note", map[string]any{"name": "a.txt", "content": "agent"})
	del := c.Preview("delete_note", map[string]any{"name": "a.txt"})
	create := c.Preview("write_note", map[string]any{"name": "b.txt", "content": "agent"})

	writeFile(t, path, "human")
	writeFile(t, filepath.Join(dir, "b.txt"), "human too")
	c.ApplyRefused(write, "changed after the preview; nothing was written")
	c.ApplyRefused(del, "changed after the preview; nothing was written")
	c.ApplyRefused(create, "changed after the preview; nothing was written")
	if readFile(t, path) != "human" || readFile(t, filepath.Join(dir, "b.txt")) != "human too" {
		t.Fatal("a refused apply wrote")
	}
	if names := dirNames(t, dir); !slices.Equal(names, []string{"a.txt", "b.txt"}) {
		t.Fatalf("the directory holds %v", names)
	}
}

func TestNotes_UndoAfterALaterEditIsRefused(t *testing.T) {
	c, dir := startNotes(t)
	path := filepath.Join(dir, "a.txt")
	writeFile(t, path, "v1")
	applied := c.Apply(c.Preview("write_note", map[string]any{"name": "a.txt", "content": "v2"}))
	writeFile(t, path, "v3 by a person")
	c.UndoRefused(applied, "would overwrite that later edit")
	if readFile(t, path) != "v3 by a person" {
		t.Fatal("the undo overwrote a later edit")
	}

	created := c.Apply(c.Preview("write_note", map[string]any{"name": "b.txt", "content": "b"}))
	writeFile(t, filepath.Join(dir, "b.txt"), "edited")
	c.UndoRefused(created, "would overwrite that later edit")
	if readFile(t, filepath.Join(dir, "b.txt")) != "edited" {
		t.Fatal("the undo removed an edited note")
	}
}

func TestNotes_LargeContentIsRefused(t *testing.T) {
	c, dir := startNotes(t)
	c.Refused("preview_write_note", map[string]any{"name": "big.txt", "content": strings.Repeat("x", maxContentBytes+1)},
		"a note holds at most 32768 bytes (32 KiB)")
	writeFile(t, filepath.Join(dir, "huge.txt"), strings.Repeat("x", maxContentBytes+1))
	c.Refused("preview_write_note", map[string]any{"name": "huge.txt", "content": "small"}, "over the limit of 32768")
	c.Refused("preview_delete_note", map[string]any{"name": "huge.txt"}, "over the limit of 32768")
	// A proposal carries the new content twice (payload and diff) and the
	// old content once, within the ledger's 64 KiB: a 30 000-byte note can
	// be created, but not replaced by another of that size.
	c.Apply(c.Preview("write_note", map[string]any{"name": "max.txt", "content": strings.Repeat("y", 30000)}))
	if len(readFile(t, filepath.Join(dir, "max.txt"))) != 30000 {
		t.Fatal("the note was not written")
	}
	c.Refused("preview_write_note", map[string]any{"name": "max.txt", "content": strings.Repeat("z", 30000)}, "over the limit of 65536; nothing was stored")
}

func TestNotes_HelpAndFlagErrors(t *testing.T) {
	bin := exampletest.Build(t, "notes")
	out, err := exec.Command(bin, "--help").CombinedOutput()
	if err != nil {
		t.Fatalf("--help: %v\n%s", err, out)
	}
	for _, want := range []string{"Usage: notes --root DIR", "--root directory", "--ledger file", "--http addr", "--auth-token-file file", "--allow-remote", "MCP_CHANGESET_WRITE_MODE=guarded"} {
		if !strings.Contains(string(out), want) {
			t.Errorf("--help lacks %q:\n%s", want, out)
		}
	}
	dir := t.TempDir()
	for _, tc := range []struct {
		args []string
		want string
	}{
		{[]string{"--ledger", filepath.Join(dir, "l.db")}, "--root is required"},
		{[]string{"--root", filepath.Join(dir, "missing"), "--ledger", filepath.Join(dir, "l.db")}, "is not a directory"},
		{[]string{"--root", dir, "--ledger", filepath.Join(dir, "l.db")}, "lies inside --root"},
		{[]string{"--root", dir, "--ledger", filepath.Join(t.TempDir(), "l.db"), "--http", "127.0.0.1:0"}, "--http needs --auth-token-file"},
	} {
		cmd := exec.Command(bin, tc.args...)
		out, err := cmd.CombinedOutput()
		if ee, ok := err.(*exec.ExitError); !ok || ee.ExitCode() != 2 || !strings.Contains(string(out), tc.want) {
			t.Errorf("%v: %v, output %q; want exit status 2 and %q", tc.args, err, out, tc.want)
		}
	}
}
