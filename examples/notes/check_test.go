package main

import (
	"log/slog"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	changeset "github.com/mcp-changeset/changeset-go"
	"github.com/mcp-changeset/changeset-go/changesettest"
)

// TestCheckOperation_Notes checks write_note and delete_note in process,
// registered by the example's own register function on a notes
// directory in a temporary directory (the kit's ledger is in another).
func TestCheckOperation_Notes(t *testing.T) {
	dir := t.TempDir()
	writeFile(t, filepath.Join(dir, "todo.txt"), "milk\neggs\n")
	writeFile(t, filepath.Join(dir, "ideas.md"), "# Ideas\n")
	root, err := os.OpenRoot(dir)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { root.Close() })

	g := changesettest.NewGuard(t, changeset.Options{})
	register(g.Server, g.Guard, &store{root: root}, slog.New(slog.DiscardHandler))

	changesettest.CheckOperation(t, g, "write_note",
		writeInput{Name: "todo.txt", Content: "milk\neggs\nbread\n"}, // a replace
		writeInput{Name: "todo.txt", Content: ""},                    // emptied
		writeInput{Name: "shopping-list.txt", Content: "apples"},     // a create
		writeInput{Name: "ünïcode.txt", Content: "naïve café ☕\n" + strings.Repeat("x", 4096)},
	)
	changesettest.CheckOperation(t, g, "delete_note",
		deleteInput{Name: "todo.txt"},
		deleteInput{Name: "ideas.md"},
	)

	// A task that writes, rewrites and deletes the same notes, undone as
	// one run.
	changesettest.CheckRun(t, g,
		changesettest.Call{Op: "write_note", Args: writeInput{Name: "todo.txt", Content: "milk\n"}},
		changesettest.Call{Op: "write_note", Args: writeInput{Name: "draft.txt", Content: "first"}},
		changesettest.Call{Op: "write_note", Args: writeInput{Name: "draft.txt", Content: "second"}},
		changesettest.Call{Op: "delete_note", Args: deleteInput{Name: "draft.txt"}},
		changesettest.Call{Op: "delete_note", Args: deleteInput{Name: "ideas.md"}},
	)

	var out listOutput
	if err := g.Call("list_notes", nil, &out); err != nil {
		t.Fatal(err)
	}
	var names []string
	for _, n := range out.Notes {
		names = append(names, n.Name)
	}
	slices.Sort(names) // list_notes gives the directory's order
	if !slices.Equal(names, []string{"ideas.md", "todo.txt"}) {
		t.Errorf("after the checks the notes are %v, want ideas.md and todo.txt only", names)
	}
	if got := readFile(t, filepath.Join(dir, "todo.txt")); got != "milk\neggs\n" {
		t.Errorf("after the checks todo.txt holds %q, want it as it was", got)
	}
	if got := readFile(t, filepath.Join(dir, "ideas.md")); got != "# Ideas\n" {
		t.Errorf("after the checks ideas.md holds %q, want it as it was", got)
	}
}
