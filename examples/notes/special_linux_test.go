package main

import (
	"net"
	"os"
	"path/filepath"
	"testing"
	"time"

	"github.com/mcp-changeset/changeset-go/examples/internal/exampletest"
)

// quickly fails the test unless f, a tool call, returns within a second.
func quickly(t *testing.T, what string, f func()) {
	t.Helper()
	start := time.Now()
	f()
	if d := time.Since(start); d >= time.Second {
		t.Fatalf("%s took %v", what, d)
	}
}

// serving checks that the server still does its work: a note can be
// written and read back.
func serving(t *testing.T, c *exampletest.Client, dir string) {
	t.Helper()
	c.Apply(c.Preview("write_note", map[string]any{"name": "alive.txt", "content": "yes"}))
	var note readOutput
	exampletest.Decode(t, c.Must("read_note", map[string]any{"name": "alive.txt"}), &note)
	if note.Content != "yes" || readFile(t, filepath.Join(dir, "alive.txt")) != "yes" {
		t.Fatalf("read_note = %+v", note)
	}
	os.Remove(filepath.Join(dir, "alive.txt"))
}

func TestNotes_FIFOsSocketsAndDevicesAreRefusedWithoutHanging(t *testing.T) {
	c, dir := startNotes(t)
	mkfifo(t, filepath.Join(dir, "pipe.txt"))
	ln, err := net.Listen("unix", filepath.Join(dir, "sock.txt"))
	if err != nil {
		t.Fatal(err)
	}
	defer ln.Close()
	if err := os.Symlink("/dev/zero", filepath.Join(dir, "zero.txt")); err != nil {
		t.Fatal(err)
	}
	for name, want := range map[string]string{
		"pipe.txt": "is a named pipe (FIFO), not a regular file",
		"sock.txt": "is a socket, not a regular file",
		"zero.txt": "is a symbolic link",
	} {
		quickly(t, "the tools on "+name, func() {
			c.Refused("preview_write_note", map[string]any{"name": name, "content": "x"}, want)
			c.Refused("preview_delete_note", map[string]any{"name": name}, want)
			c.Refused("read_note", map[string]any{"name": name}, want)
		})
	}
	quickly(t, "list_notes", func() {
		var list listOutput
		exampletest.Decode(t, c.Must("list_notes", nil), &list)
		if len(list.Notes) != 0 {
			t.Errorf("list_notes = %+v", list)
		}
	})
	serving(t, c, dir)
}

// A FIFO put in place of a note after the preview: the apply is refused at
// once, nothing is written, and the server goes on. The same after an
// apply, for the undo.
func TestNotes_FIFOSwappedInBeforeApplyOrUndoIsRefusedAtOnce(t *testing.T) {
	c, dir := startNotes(t)
	path := filepath.Join(dir, "a.txt")
	writeFile(t, path, "old")
	write := c.Preview("write_note", map[string]any{"name": "a.txt", "content": "new"})
	del := c.Preview("delete_note", map[string]any{"name": "a.txt"})
	os.Remove(path)
	mkfifo(t, path)
	quickly(t, "apply_change", func() {
		c.ApplyRefused(write, "changed after the preview; nothing was written")
		c.ApplyRefused(del, "changed after the preview; nothing was written")
	})
	if fi, err := os.Lstat(path); err != nil || fi.Mode()&os.ModeNamedPipe == 0 {
		t.Fatalf("the FIFO was replaced: %v %v", fi, err)
	}
	if got := c.Status(write.ChangeID); got != "apply_failed" {
		t.Fatalf("status %s", got)
	}
	os.Remove(path)

	applied := c.Apply(c.Preview("write_note", map[string]any{"name": "b.txt", "content": "b"}))
	os.Remove(filepath.Join(dir, "b.txt"))
	mkfifo(t, filepath.Join(dir, "b.txt"))
	quickly(t, "undo_change", func() {
		c.UndoRefused(applied, "would overwrite that later edit")
	})
	serving(t, c, dir)
}
