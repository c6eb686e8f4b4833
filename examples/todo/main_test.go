package main

import (
	"os/exec"
	"strings"
	"testing"

	"github.com/mcp-changeset/changeset-go/examples/internal/exampletest"
)

func TestMain(m *testing.M) { exampletest.Main(m) }

func startTodo(t *testing.T) *exampletest.Client {
	t.Helper()
	return exampletest.Start(t, "todo", nil, exampletest.Guarded)
}

// todos returns list_todos.
func todos(t *testing.T, c *exampletest.Client) []todo {
	t.Helper()
	var out listOutput
	exampletest.Decode(t, c.Must("list_todos", nil), &out)
	if out.Todos == nil {
		t.Fatal("list_todos returned null, want a list")
	}
	return out.Todos
}

func wantTodos(t *testing.T, c *exampletest.Client, want ...todo) {
	t.Helper()
	got := todos(t, c)
	if len(got) != len(want) {
		t.Fatalf("todos = %+v, want %+v", got, want)
	}
	for i := range got {
		if got[i] != want[i] {
			t.Fatalf("todos = %+v, want %+v", got, want)
		}
	}
}

func TestTodo_CreateUpdateDeleteAndUndoEach(t *testing.T) {
	c := startTodo(t)
	c.HasTools("preview_create_todo", "preview_update_todo", "preview_delete_todo", "list_todos")
	wantTodos(t, c)

	// Ids are reserved at preview: applying in the other order keeps them.
	milk := c.Preview("create_todo", map[string]any{"title": "buy milk"})
	eggs := c.Preview("create_todo", map[string]any{"title": "buy eggs"})
	if milk.Summary != `Create todo 1: "buy milk"` || eggs.Summary != `Create todo 2: "buy eggs"` {
		t.Fatalf("summaries %q, %q", milk.Summary, eggs.Summary)
	}
	var id created
	eggsApplied := c.ApplyResult(eggs, &id)
	if id.ID != 2 {
		t.Fatalf("eggs got id %d", id.ID)
	}
	milkApplied := c.Apply(milk)
	wantTodos(t, c, todo{1, "buy milk", false}, todo{2, "buy eggs", false})

	done := c.Apply(c.Preview("update_todo", map[string]any{"id": 1, "done": true}))
	wantTodos(t, c, todo{1, "buy milk", true}, todo{2, "buy eggs", false})
	renamed := c.Apply(c.Preview("update_todo", map[string]any{"id": 2, "title": "buy 12 eggs"}))
	wantTodos(t, c, todo{1, "buy milk", true}, todo{2, "buy 12 eggs", false})

	c.Undo(renamed)
	c.Undo(done)
	wantTodos(t, c, todo{1, "buy milk", false}, todo{2, "buy eggs", false})
	c.Undo(milkApplied)
	c.Undo(eggsApplied)
	wantTodos(t, c)
}

func TestTodo_UndoOfADeleteRestoresTheSameID(t *testing.T) {
	c := startTodo(t)
	for _, title := range []string{"one", "two", "three"} {
		c.Apply(c.Preview("create_todo", map[string]any{"title": title}))
	}
	c.Apply(c.Preview("update_todo", map[string]any{"id": 2, "done": true}))
	del := c.Preview("delete_todo", map[string]any{"id": 2})
	if del.Diff[0].Field != "done" || del.Diff[0].After != nil {
		t.Fatalf("delete diff = %+v", del.Diff)
	}
	deleted := c.Apply(del)
	c.Apply(c.Preview("create_todo", map[string]any{"title": "four"}))
	wantTodos(t, c, todo{1, "one", false}, todo{3, "three", false}, todo{4, "four", false})

	c.Undo(deleted)
	wantTodos(t, c, todo{1, "one", false}, todo{2, "two", true}, todo{3, "three", false}, todo{4, "four", false})
}

func TestTodo_UnknownIDsAndBadTitlesAreRefused(t *testing.T) {
	c := startTodo(t)
	c.Apply(c.Preview("create_todo", map[string]any{"title": "one"}))
	for _, id := range []int{0, -1, 2, 99} {
		c.Refused("preview_update_todo", map[string]any{"id": id, "done": true}, "not found; list_todos shows the ids")
		c.Refused("preview_delete_todo", map[string]any{"id": id}, "not found; list_todos shows the ids")
	}
	c.Refused("preview_update_todo", map[string]any{"id": 1}, "already looks like that")
	c.Refused("preview_update_todo", map[string]any{"id": 1, "title": "one", "done": false}, "already looks like that")
	c.Refused("preview_create_todo", map[string]any{"title": "  "}, "the title is empty")
	c.Refused("preview_create_todo", map[string]any{"title": "a\nb"}, "control character")
	c.Refused("preview_create_todo", map[string]any{"title": strings.Repeat("x", maxTitleBytes+1)}, "at most 200")
	c.Refused("preview_update_todo", map[string]any{"id": 1, "title": ""}, "the title is empty")
	c.Refused("preview_create_todo", map[string]any{"title": "x", "owner": "me"}, "owner")
	wantTodos(t, c, todo{1, "one", false})
}

func TestTodo_AChangeBetweenPreviewAndApplyIsRefused(t *testing.T) {
	c := startTodo(t)
	c.Apply(c.Preview("create_todo", map[string]any{"title": "one"}))
	rename := c.Preview("update_todo", map[string]any{"id": 1, "title": "uno"})
	del := c.Preview("delete_todo", map[string]any{"id": 1})
	c.Apply(c.Preview("update_todo", map[string]any{"id": 1, "done": true}))

	c.ApplyRefused(rename, "changed after the preview; nothing was written")
	c.ApplyRefused(del, "changed after the preview; nothing was written")
	wantTodos(t, c, todo{1, "one", true})
}

func TestTodo_UndoAfterALaterChangeIsRefused(t *testing.T) {
	c := startTodo(t)
	create := c.Apply(c.Preview("create_todo", map[string]any{"title": "one"}))
	c.Apply(c.Preview("update_todo", map[string]any{"id": 1, "done": true}))
	c.UndoRefused(create, "would overwrite that later edit")
	wantTodos(t, c, todo{1, "one", true})
}

func TestTodo_Help(t *testing.T) {
	out, err := exec.Command(exampletest.Build(t, "todo"), "--help").CombinedOutput()
	if err != nil || !strings.Contains(string(out), "Usage: todo [flags]") || !strings.Contains(string(out), "--http addr") {
		t.Fatalf("--help: %v\n%s", err, out)
	}
}

// A run's undo relates changes by resource. A create's id is reserved at
// preview, so its resource ("todo:2") is known before the apply, and a
// todo created and deleted within the run needs no write at all.
func TestTodo_UndoOfARun(t *testing.T) {
	c := startTodo(t)
	runID := c.Must("start_run", map[string]any{"label": "plan the week"})["run_id"].(string)
	inRun := func(op string, a map[string]any) exampletest.Applied {
		a["run_id"] = runID
		return c.Apply(c.Preview(op, a))
	}
	inRun("create_todo", map[string]any{"title": "a"})                 // todo 1
	inRun("update_todo", map[string]any{"id": 1, "done": true})        // todo 1
	inRun("create_todo", map[string]any{"title": "b"})                 // todo 2
	inRun("delete_todo", map[string]any{"id": 2})                      // todo 2
	c.Apply(c.Preview("create_todo", map[string]any{"title": "mine"})) // todo 3, outside the run

	var plan struct {
		WillUndo          []struct{ Action string } `json:"will_undo"`
		NoNetChange       []struct{ Action string } `json:"no_net_change"`
		Skipped           []any                     `json:"skipped"`
		ConfirmationToken string                    `json:"confirmation_token"`
	}
	exampletest.Decode(t, c.Must("undo_run", map[string]any{"run_id": runID}), &plan)
	if len(plan.WillUndo) != 2 || plan.WillUndo[0].Action != "update_todo" || len(plan.NoNetChange) != 2 || len(plan.Skipped) != 0 {
		t.Fatalf("dry run = %+v", plan)
	}
	wantTodos(t, c, todo{1, "a", true}, todo{3, "mine", false})

	c.Must("undo_run", map[string]any{"run_id": runID, "dry_run": false, "confirmation_token": plan.ConfirmationToken})
	wantTodos(t, c, todo{3, "mine", false})
}
