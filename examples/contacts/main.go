// Command contacts is an address book in the application's own SQLite
// database (not the ledger), whose writes are guarded with the library's
// SQL-table adapter, package sqltable: create_contact(name, email),
// update_contact(id, name?, email?) and delete_contact(id), each with undo;
// list_contacts reads.
//
// The adapter stores each change's whole row before and after, checks the
// row before every apply and undo (an edit someone made meanwhile refuses
// the apply, or the undo, and nothing is written), and undoes a delete by
// inserting the row again with the same id and creation time. The
// contacts are in a database of their own, so a change is applied at most
// once (see package sqltable); a table in the ledger's own database would
// be applied exactly once, with no other change to this code.
//
//	MCP_CHANGESET_WRITE_MODE=guarded go run ./examples/contacts --db /tmp/contacts.db
package main

import (
	"context"
	"database/sql"
	"errors"
	"flag"
	"log/slog"
	"net/mail"
	"path/filepath"
	"strings"

	changeset "github.com/mcp-changeset/changeset-go"
	_ "github.com/mcp-changeset/changeset-go/ledger/postgres" // --ledger postgres://…
	"github.com/mcp-changeset/changeset-go/serve"
	"github.com/mcp-changeset/changeset-go/sqltable"
	"github.com/modelcontextprotocol/go-sdk/mcp"
	_ "modernc.org/sqlite" // the contacts' database
)

// schema is the address book. The database fills in created_at, as RFC
// 3339 text in UTC.
const schema = `CREATE TABLE IF NOT EXISTS contacts (
    id         INTEGER PRIMARY KEY,
    name       TEXT NOT NULL,
    email      TEXT NOT NULL,
    created_at TEXT NOT NULL DEFAULT (strftime('%Y-%m-%dT%H:%M:%fZ', 'now'))
)`

func main() {
	var dbPath string
	serve.Main(serve.Program{
		Name:     "contacts",
		Synopsis: "--db PATH [flags]",
		About: `An address book in its own SQLite database, with guarded writes.
Tools: preview_create_contact, preview_update_contact, preview_delete_contact,
list_contacts, and the shared apply_change, undo_change, get_change_status
and run tools.`,
		Flags: func(fs *flag.FlagSet) {
			fs.StringVar(&dbPath, "db", "", "the SQLite `file` of the contacts (required; created if missing)")
		},
		Check: func(f serve.Flags) error {
			a, _ := filepath.Abs(dbPath)
			if l, _ := filepath.Abs(f.Ledger); dbPath == "" || a == l {
				return errors.New("--db is required: the contacts' own database, another file than the ledger")
			}
			return nil
		},
		Setup: func(server *mcp.Server, guard *changeset.Guard, _ *slog.Logger) error {
			db, err := sql.Open("sqlite", "file:"+dbPath+"?_pragma=busy_timeout(5000)&_pragma=journal_mode(WAL)")
			if err != nil {
				return err
			}
			if _, err := db.Exec(schema); err != nil {
				return err
			}
			contacts, err := sqltable.Open(context.Background(), db, sqltable.Config{Table: "contacts", Kind: "contact"})
			if err != nil {
				return err
			}
			register(server, guard, contacts)
			return nil
		},
	})
}

type (
	createIn struct {
		Name  string `json:"name" jsonschema:"the contact's name"`
		Email string `json:"email" jsonschema:"the contact's email address, e.g. ada@example.com"`
	}
	updateIn struct {
		ID    int64   `json:"id" jsonschema:"the contact to change"`
		Name  *string `json:"name,omitempty" jsonschema:"the new name; leave out to keep it"`
		Email *string `json:"email,omitempty" jsonschema:"the new email address; leave out to keep it"`
	}
	deleteIn struct {
		ID int64 `json:"id" jsonschema:"the contact to delete"`
	}
	listOut struct {
		Contacts []sqltable.Row `json:"contacts"`
	}
)

// register adds the three guarded operations and list_contacts.
func register(server *mcp.Server, guard *changeset.Guard, contacts *sqltable.Table) {
	sqltable.Create(guard, &mcp.Tool{Name: "create_contact", Description: "Add a contact."}, contacts,
		func(_ context.Context, in createIn) (sqltable.Row, error) {
			return sqltable.Row{"name": in.Name, "email": in.Email}, validate(&in.Name, &in.Email)
		})
	sqltable.Update(guard, &mcp.Tool{Name: "update_contact", Description: "Change a contact's name or email address."}, contacts,
		func(_ context.Context, in updateIn) (any, sqltable.Row, error) {
			set := sqltable.Row{}
			if in.Name != nil {
				set["name"] = *in.Name
			}
			if in.Email != nil {
				set["email"] = *in.Email
			}
			return in.ID, set, validate(in.Name, in.Email)
		})
	sqltable.Delete(guard, &mcp.Tool{Name: "delete_contact", Description: "Delete a contact."}, contacts,
		func(_ context.Context, in deleteIn) (any, error) { return in.ID, nil })

	mcp.AddTool(server, &mcp.Tool{Name: "list_contacts", Description: "List every contact, by id.", Annotations: &mcp.ToolAnnotations{ReadOnlyHint: true}},
		func(ctx context.Context, _ *mcp.CallToolRequest, _ struct{}) (*mcp.CallToolResult, listOut, error) {
			rows, err := contacts.List(ctx)
			return nil, listOut{Contacts: rows}, err
		})
}

// validate refuses an empty name and an email that is not a bare address;
// nil stands for a field left out.
func validate(name, email *string) error {
	if name != nil && (strings.TrimSpace(*name) == "" || len(*name) > 200) {
		return changeset.Refuse("the name must be 1 to 200 characters")
	}
	if email != nil {
		if a, err := mail.ParseAddress(*email); err != nil || a.Address != *email {
			return changeset.Refuse("%q is not an email address like ada@example.com", *email)
		}
	}
	return nil
}
