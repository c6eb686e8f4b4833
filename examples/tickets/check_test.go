package main

import (
	"context"
	"encoding/json"
	"testing"

	changeset "github.com/mcp-changeset/changeset-go"
	"github.com/mcp-changeset/changeset-go/changesettest"
)

// TestCheckOperation_Tickets checks create_ticket, update_ticket and
// delete_ticket in process, registered by the example's own register
// method on the ledger's database (a temporary SQLite file), where its
// tables live.
func TestCheckOperation_Tickets(t *testing.T) {
	ctx := context.Background()
	g := changesettest.NewGuard(t, changeset.Options{})
	tr := &tracker{db: g.Guard.Ledger().DB()}
	if err := tr.migrate(ctx); err != nil {
		t.Fatal(err)
	}
	tr.register(g.Server, g.Guard)

	// A ticket made as the tracker's own application would, straight in
	// the database.
	id, err := tr.reserveID(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := tr.db.Exec(`INSERT INTO tickets (id, title, status, version, created_at) VALUES (?, 'The login page is slow', 'open', 1, '2025-01-01T00:00:00Z')`, id); err != nil {
		t.Fatal(err)
	}
	before, err := tr.list(ctx)
	if err != nil {
		t.Fatal(err)
	}

	// create_ticket's preview reserves a new ticket number each time, so
	// applying one preview does not touch what another saw: Mutate
	// inserts a ticket under the preview's number, as another writer
	// would.
	changesettest.CheckOperation(t, g, "create_ticket", changesettest.Input{
		Args: createIn{Title: "Add a dark theme"},
		Mutate: func(payload json.RawMessage) error {
			var p createPayload
			if err := json.Unmarshal(payload, &p); err != nil {
				return err
			}
			_, err := tr.db.Exec(`INSERT INTO tickets (id, title, status, version, created_at) VALUES (?, 'written by someone else', 'open', 1, '2025-01-02T00:00:00Z')`, p.ID)
			return err
		},
	})
	changesettest.CheckOperation(t, g, "update_ticket",
		updateIn{ID: id, Title: "The login page is slow", Status: "in_progress"},
		updateIn{ID: id, Title: "The login page takes 5 s to load", Status: "open"},
		updateIn{ID: id, Title: "Login: slow", Status: "closed"},
	)
	changesettest.CheckOperation(t, g, "delete_ticket", deleteIn{ID: id})

	var out ticketsOutput
	if err := g.Call("list_tickets", nil, &out); err != nil {
		t.Fatal(err)
	}
	var kept []Ticket
	for _, tk := range out.Tickets {
		if tk.Title != "written by someone else" {
			kept = append(kept, tk)
		}
	}
	if len(kept) != 1 || kept[0] != before[0] || len(out.Tickets) != 2 {
		t.Errorf("after the checks list_tickets gives %+v, want %+v (version included) and the ticket Mutate inserted", out.Tickets, before)
	}
}
