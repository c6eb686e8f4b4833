// Command todo is an MCP server with an in-memory todo list whose three
// writes, create_todo, update_todo and delete_todo, are guarded.
//
// It shows operations that create and delete things. A create's id is
// reserved at preview time and stored in the payload, so the change is
// fully known before it is applied: its diff, its resource ("todo:3") and
// its undo all name the same id, and ids never collide whatever order
// previews are applied in. The undo of a delete puts the todo back under
// the same id. Each change is bound to its todo through Observe.
//
//	MCP_CHANGESET_WRITE_MODE=guarded go run ./examples/todo
//
// Tools: preview_create_todo, preview_update_todo, preview_delete_todo,
// apply_change, undo_change, get_change_status, list_todos. See --help for
// the flags every example shares. The list lives in memory and starts
// empty on every start; the ledger keeps the history.
package main

import (
	"context"
	"fmt"
	"log/slog"
	"strconv"
	"strings"
	"unicode"

	changeset "github.com/mcp-changeset/changeset-go"
	_ "github.com/mcp-changeset/changeset-go/ledger/postgres" // --ledger postgres://…
	"github.com/mcp-changeset/changeset-go/serve"
	"github.com/modelcontextprotocol/go-sdk/mcp"
)

func main() {
	s := newStore()
	serve.Main(serve.Program{
		Name: "todo",
		About: `An MCP server with an in-memory todo list (empty at start). Every write is
previewed first and applied only with the preview's confirmation token.
Tools: preview_create_todo, preview_update_todo, preview_delete_todo,
apply_change, undo_change, get_change_status, list_todos.`,
		Setup: func(server *mcp.Server, guard *changeset.Guard, _ *slog.Logger) error {
			register(server, guard, s)
			return nil
		},
	})
}

// maxTitleBytes bounds a title.
const maxTitleBytes = 200

// checkTitle refuses empty, overlong and multi-line titles.
func checkTitle(title string) error {
	if strings.TrimSpace(title) == "" {
		return changeset.Refuse("the title is empty")
	}
	if len(title) > maxTitleBytes {
		return changeset.Refuse("the title is %d bytes; at most %d are allowed", len(title), maxTitleBytes)
	}
	for _, r := range title {
		if unicode.IsControl(r) {
			return changeset.Refuse("the title holds a control character (%U); a title is one line", r)
		}
	}
	return nil
}

// The tools' inputs, the stored payloads and what Apply returns.
type (
	createInput struct {
		Title string `json:"title" jsonschema:"what is to be done"`
	}
	updateInput struct {
		ID    int     `json:"id" jsonschema:"the todo's id (see list_todos)"`
		Title *string `json:"title,omitempty" jsonschema:"the new title; leave out to keep it"`
		Done  *bool   `json:"done,omitempty" jsonschema:"whether it is done; leave out to keep it"`
	}
	idInput struct {
		ID int `json:"id" jsonschema:"the todo's id (see list_todos)"`
	}
	// createPayload holds the id reserved at preview.
	createPayload struct {
		ID    int    `json:"id"`
		Title string `json:"title"`
	}
	// changePayload is an update's or a delete's: the todo as the preview
	// saw it, and as it is to be (nil for a delete).
	changePayload struct {
		ID     int     `json:"id"`
		Before fields  `json:"before"`
		After  *fields `json:"after,omitempty"`
	}
	created struct {
		ID int `json:"id"`
	}
	// previous is what an update or delete replaced; Undo puts it back.
	previous struct {
		Previous todo `json:"previous"`
	}
)

func resource(id int) string { return "todo:" + strconv.Itoa(id) }

// lookup finds the todo an update or delete names.
func lookup(s *store, id int) (todo, error) {
	t, ok := s.get(id)
	if !ok {
		return todo{}, changeset.Refuse("todo %d not found; list_todos shows the ids", id)
	}
	return t, nil
}

func register(server *mcp.Server, guard *changeset.Guard, s *store) {
	changeset.Register(guard, &mcp.Tool{Name: "create_todo", Description: "Add a todo. Its id is chosen by the preview."},
		changeset.Operation[createInput, createPayload, created]{
			Preview: func(ctx context.Context, in createInput) (*changeset.Proposal[createPayload], error) {
				if err := checkTitle(in.Title); err != nil {
					return nil, err
				}
				if s.count() >= maxTodos {
					return nil, changeset.Refuse("the list is full (%d todos); delete some first", maxTodos)
				}
				id := s.reserve()
				return &changeset.Proposal[createPayload]{
					Payload:  createPayload{ID: id, Title: in.Title},
					Diff:     changeset.DiffFields(nil, map[string]any{"id": id, "title": in.Title, "done": false}),
					Summary:  fmt.Sprintf("Create todo %d: %s", id, changeset.Quote(in.Title)),
					Resource: resource(id),
				}, nil
			},
			Apply: func(ctx context.Context, p createPayload) (created, error) {
				return created{ID: p.ID}, s.swap(p.ID, nil, &fields{Title: p.Title})
			},
			Undo: func(ctx context.Context, p createPayload, _ created) error {
				return s.swap(p.ID, &fields{Title: p.Title}, nil)
			},
			Observe: func(ctx context.Context, p createPayload) (any, error) { return s.state(p.ID), nil },
		})

	changeset.Register(guard, &mcp.Tool{Name: "update_todo", Description: "Change a todo's title or mark it done or not done."},
		changeset.Operation[updateInput, changePayload, previous]{
			Preview: func(ctx context.Context, in updateInput) (*changeset.Proposal[changePayload], error) {
				cur, err := lookup(s, in.ID)
				if err != nil {
					return nil, err
				}
				after := cur.fields()
				if in.Title != nil {
					if err := checkTitle(*in.Title); err != nil {
						return nil, err
					}
					after.Title = *in.Title
				}
				if in.Done != nil {
					after.Done = *in.Done
				}
				if after == cur.fields() {
					return nil, changeset.Refuse("todo %d already looks like that; nothing to change", in.ID)
				}
				return &changeset.Proposal[changePayload]{
					Payload: changePayload{ID: in.ID, Before: cur.fields(), After: &after},
					Diff: changeset.DiffFields(map[string]any{"title": cur.Title, "done": cur.Done},
						map[string]any{"title": after.Title, "done": after.Done}),
					Summary:  fmt.Sprintf("Update todo %d: %s", in.ID, changeset.Quote(after.Title)),
					Resource: resource(in.ID),
				}, nil
			},
			Apply: func(ctx context.Context, p changePayload) (previous, error) {
				return previous{todo{ID: p.ID, Title: p.Before.Title, Done: p.Before.Done}}, s.swap(p.ID, &p.Before, p.After)
			},
			Undo: func(ctx context.Context, p changePayload, r previous) error {
				return s.swap(p.ID, p.After, &fields{Title: r.Previous.Title, Done: r.Previous.Done})
			},
			Observe: func(ctx context.Context, p changePayload) (any, error) { return s.state(p.ID), nil },
		})

	changeset.Register(guard, &mcp.Tool{Name: "delete_todo", Description: "Delete a todo. Its undo restores it under the same id."},
		changeset.Operation[idInput, changePayload, previous]{
			Preview: func(ctx context.Context, in idInput) (*changeset.Proposal[changePayload], error) {
				cur, err := lookup(s, in.ID)
				if err != nil {
					return nil, err
				}
				return &changeset.Proposal[changePayload]{
					Payload:  changePayload{ID: in.ID, Before: cur.fields()},
					Diff:     changeset.DiffFields(map[string]any{"id": cur.ID, "title": cur.Title, "done": cur.Done}, nil),
					Summary:  fmt.Sprintf("Delete todo %d: %s", in.ID, changeset.Quote(cur.Title)),
					Resource: resource(in.ID),
				}, nil
			},
			Apply: func(ctx context.Context, p changePayload) (previous, error) {
				return previous{todo{ID: p.ID, Title: p.Before.Title, Done: p.Before.Done}}, s.swap(p.ID, &p.Before, nil)
			},
			Undo: func(ctx context.Context, p changePayload, r previous) error {
				return s.swap(p.ID, nil, &fields{Title: r.Previous.Title, Done: r.Previous.Done})
			},
			Observe: func(ctx context.Context, p changePayload) (any, error) { return s.state(p.ID), nil },
		})

	mcp.AddTool(server, &mcp.Tool{
		Name:        "list_todos",
		Description: "List the todos by id.",
		Annotations: &mcp.ToolAnnotations{ReadOnlyHint: true},
	}, func(ctx context.Context, req *mcp.CallToolRequest, _ struct{}) (*mcp.CallToolResult, listOutput, error) {
		return nil, listOutput{Todos: s.list()}, nil
	})
}

type listOutput struct {
	Todos []todo `json:"todos"`
}
