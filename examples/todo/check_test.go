package main

import (
	"encoding/json"
	"testing"

	changeset "github.com/mcp-changeset/changeset-go"
	"github.com/mcp-changeset/changeset-go/changesettest"
)

// TestCheckOperation_Todos checks create_todo, update_todo and
// delete_todo in process, registered by the example's own register
// function.
func TestCheckOperation_Todos(t *testing.T) {
	s := newStore()
	id := s.reserve()
	if err := s.swap(id, nil, &fields{Title: "buy milk"}); err != nil {
		t.Fatal(err)
	}
	g := changesettest.NewGuard(t, changeset.Options{})
	register(g.Server, g.Guard, s)

	// create_todo's preview reserves a new id each time, so applying one
	// preview does not touch what another saw: Mutate writes the todo
	// under the preview's id, as another client would.
	changesettest.CheckOperation(t, g, "create_todo", changesettest.Input{
		Args: createInput{Title: "call the plumber"},
		Mutate: func(payload json.RawMessage) error {
			var p createPayload
			if err := json.Unmarshal(payload, &p); err != nil {
				return err
			}
			return s.swap(p.ID, nil, &fields{Title: "written by someone else"})
		},
	})
	done, title := true, "buy oat milk"
	changesettest.CheckOperation(t, g, "update_todo",
		updateInput{ID: id, Done: &done},
		updateInput{ID: id, Title: &title},
	)
	changesettest.CheckOperation(t, g, "delete_todo", idInput{ID: id})

	if got, ok := s.get(id); !ok || got.Title != "buy milk" || got.Done {
		t.Errorf("after the checks todo %d is %+v (found %v), want it as it was", id, got, ok)
	}
}
