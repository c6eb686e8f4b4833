package main

import (
	"context"
	"database/sql"
	"encoding/json"
	"path/filepath"
	"testing"

	changeset "github.com/mcp-changeset/changeset-go"
	"github.com/mcp-changeset/changeset-go/changesettest"
	"github.com/mcp-changeset/changeset-go/sqltable"
)

// TestCheckOperation_Contacts checks create_contact, update_contact and
// delete_contact in process, registered by the example's own register
// function on a contacts database in a temporary directory.
func TestCheckOperation_Contacts(t *testing.T) {
	ctx := context.Background()
	db, err := sql.Open("sqlite", "file:"+filepath.Join(t.TempDir(), "contacts.db")+"?_pragma=busy_timeout(5000)&_pragma=journal_mode(WAL)")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { db.Close() })
	if _, err := db.Exec(schema); err != nil {
		t.Fatal(err)
	}
	if _, err := db.Exec(`INSERT INTO contacts (id, name, email, created_at) VALUES (7, 'Ada Lovelace', 'ada@example.com', '2025-01-01T00:00:00.000Z')`); err != nil {
		t.Fatal(err)
	}
	contacts, err := sqltable.Open(ctx, db, sqltable.Config{Table: "contacts", Kind: "contact"})
	if err != nil {
		t.Fatal(err)
	}
	before, err := contacts.List(ctx)
	if err != nil {
		t.Fatal(err)
	}

	g := changesettest.NewGuard(t, changeset.Options{})
	register(g.Server, g.Guard, contacts)

	// create_contact's preview picks a new random id each time, so
	// applying one preview does not touch what another saw: Mutate
	// inserts a contact under the preview's id, as another program would.
	changesettest.CheckOperation(t, g, "create_contact", changesettest.Input{
		Args: createIn{Name: "Grace Hopper", Email: "grace@example.com"},
		Mutate: func(payload json.RawMessage) error {
			var p struct {
				After sqltable.Row `json:"after"`
			}
			if err := json.Unmarshal(payload, &p); err != nil {
				return err
			}
			_, err := db.Exec(`INSERT INTO contacts (id, name, email) VALUES (?, 'someone else', 'else@example.com')`, p.After["id"])
			return err
		},
	})
	name, email := "Ada King", "ada.king@example.com"
	changesettest.CheckOperation(t, g, "update_contact",
		updateIn{ID: 7, Name: &name},
		updateIn{ID: 7, Email: &email},
		updateIn{ID: 7, Name: &name, Email: &email},
	)
	changesettest.CheckOperation(t, g, "delete_contact", deleteIn{ID: 7})

	// What the checks leave: contact 7 as it was (its creation time
	// included), and the row Mutate inserted.
	var out listOut
	if err := g.Call("list_contacts", nil, &out); err != nil {
		t.Fatal(err)
	}
	var kept []sqltable.Row
	for _, r := range out.Contacts {
		if r["name"] != "someone else" {
			kept = append(kept, r)
		}
	}
	if got, want := canonicalJSON(t, kept), canonicalJSON(t, before); got != want || len(out.Contacts) != 2 {
		t.Errorf("after the checks list_contacts gives %s, want %s and the contact Mutate inserted", canonicalJSON(t, out.Contacts), want)
	}
}

func canonicalJSON(t *testing.T, v any) string {
	t.Helper()
	b, err := json.Marshal(v)
	if err != nil {
		t.Fatal(err)
	}
	return string(b)
}
