package main

import (
	"database/sql"
	"fmt"
	"path/filepath"
	"strings"
	"testing"

	"github.com/mcp-changeset/changeset-go/examples/internal/exampletest"
)

func TestMain(m *testing.M) { exampletest.Main(m) }

// book is the contacts server over stdio, and its database opened as a
// person would open it.
type book struct {
	*exampletest.Client
	t  *testing.T
	db *sql.DB
}

func start(t *testing.T) *book {
	path := filepath.Join(t.TempDir(), "contacts.db")
	c := exampletest.Start(t, "contacts", []string{"--db", path}, exampletest.Guarded)
	db, err := sql.Open("sqlite", "file:"+path+"?_pragma=busy_timeout(5000)")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { db.Close() })
	return &book{Client: c, t: t, db: db}
}

type contact struct {
	ID        int64  `json:"id"`
	Name      string `json:"name"`
	Email     string `json:"email"`
	CreatedAt string `json:"created_at"`
}

func (b *book) list() []contact {
	b.t.Helper()
	var out struct {
		Contacts []contact `json:"contacts"`
	}
	exampletest.Decode(b.t, b.Must("list_contacts", nil), &out)
	return out.Contacts
}

// create adds a contact and returns it as stored.
func (b *book) create(name, email string) contact {
	b.t.Helper()
	var c contact
	b.ApplyResult(b.Preview("create_contact", map[string]any{"name": name, "email": email}), &c)
	return c
}

// edit is a person's edit of the row, straight in the database.
func (b *book) edit(id int64, name string) {
	b.t.Helper()
	if _, err := b.db.Exec(`UPDATE contacts SET name = ? WHERE id = ?`, name, id); err != nil {
		b.t.Fatal(err)
	}
}

// rows is the table as text, read with SQL of its own.
func (b *book) rows() string {
	b.t.Helper()
	rows, err := b.db.Query(`SELECT id, name, email, created_at FROM contacts ORDER BY id`)
	if err != nil {
		b.t.Fatal(err)
	}
	defer rows.Close()
	var s strings.Builder
	for rows.Next() {
		var c contact
		if err := rows.Scan(&c.ID, &c.Name, &c.Email, &c.CreatedAt); err != nil {
			b.t.Fatal(err)
		}
		fmt.Fprintf(&s, "%d %q %q %s\n", c.ID, c.Name, c.Email, c.CreatedAt)
	}
	return s.String()
}

func TestCreateUpdateDeleteAndUndo(t *testing.T) {
	b := start(t)
	b.HasTools("preview_create_contact", "preview_update_contact", "preview_delete_contact", "list_contacts", "apply_change", "undo_change")
	if got := b.list(); len(got) != 0 {
		t.Fatalf("a new book lists %v", got)
	}
	ada := b.create("Ada", "ada@example.com")
	if ada.ID < 1 || ada.ID >= 1<<53 || ada.CreatedAt == "" || ada.Name != "Ada" {
		t.Fatalf("created %+v", ada)
	}
	if got := b.list(); len(got) != 1 || got[0] != ada {
		t.Fatalf("list %+v, want [%+v]", got, ada)
	}

	p := b.Preview("update_contact", map[string]any{"id": ada.ID, "email": "ada@lovelace.example"})
	if p.Summary != fmt.Sprintf("Update contact %d", ada.ID) || len(p.Diff) != 1 || p.Diff[0].Field != "email" {
		t.Fatalf("update preview %+v", p)
	}
	up := b.Apply(p)
	if got := b.list()[0]; got.Email != "ada@lovelace.example" || got.Name != "Ada" {
		t.Fatalf("after update %+v", got)
	}
	b.Undo(up)
	if got := b.list()[0]; got != ada {
		t.Fatalf("after undo of the update %+v, want %+v", got, ada)
	}

	before := b.rows()
	del := b.Apply(b.Preview("delete_contact", map[string]any{"id": ada.ID}))
	if got := b.list(); len(got) != 0 {
		t.Fatalf("after delete %v", got)
	}
	b.Undo(del)
	if after := b.rows(); after != before {
		t.Fatalf("undo of the delete restored\n%s\nwant the same id and creation time:\n%s", after, before)
	}
}

func TestRefusals(t *testing.T) {
	b := start(t)
	ada := b.create("Ada", "ada@example.com")
	for _, c := range []struct {
		op   string
		args map[string]any
		want string
	}{
		{"update_contact", map[string]any{"id": 42, "name": "X"}, "there is no contact 42"},
		{"delete_contact", map[string]any{"id": 42}, "there is no contact 42"},
		{"update_contact", map[string]any{"id": ada.ID, "name": "Ada"}, "changes nothing"},
		{"update_contact", map[string]any{"id": ada.ID}, "changes nothing"},
		{"create_contact", map[string]any{"name": "Bo", "email": "not an address"}, `"not an address" is not an email address`},
		{"create_contact", map[string]any{"name": "Bo", "email": "Bo <bo@example.com>"}, "is not an email address"},
		{"update_contact", map[string]any{"id": ada.ID, "email": ""}, "is not an email address"},
		{"create_contact", map[string]any{"name": " ", "email": "bo@example.com"}, "the name must be"},
		{"create_contact", map[string]any{"name": "Bo", "email": "bo@example.com", "phone": "1"}, "phone"},
		{"update_contact", map[string]any{"id": "1 OR 1=1", "name": "X"}, "id"},
	} {
		b.Refused("preview_"+c.op, c.args, c.want)
	}
	if got := b.list(); len(got) != 1 || got[0] != ada {
		t.Fatalf("refusals changed the book: %+v", got)
	}
}

// A person's edit of the row between preview and apply refuses the apply,
// and nothing is written.
func TestEditBetweenPreviewAndApply(t *testing.T) {
	b := start(t)
	ada := b.create("Ada", "ada@example.com")
	for i, c := range []struct {
		op   string
		args map[string]any
	}{
		{"update_contact", map[string]any{"id": ada.ID, "email": "agent@example.com"}},
		{"delete_contact", map[string]any{"id": ada.ID}},
	} {
		p := b.Preview(c.op, c.args)
		b.edit(ada.ID, fmt.Sprintf("Ada (edited by a person, %d)", i))
		want := b.rows()
		b.ApplyRefused(p, "was not applied: the resource changed after the preview; nothing was written")
		if got := b.rows(); got != want {
			t.Fatalf("%s wrote after a person's edit:\n%s\nwant\n%s", c.op, got, want)
		}
		if s := b.Status(p.ChangeID); s != "apply_failed" {
			t.Fatalf("%s status %q", c.op, s)
		}
	}
}

// A person's edit between apply and a run's undo: the run skips the change
// and reports the drift; the person's edit stays.
func TestEditBetweenApplyAndRunUndo(t *testing.T) {
	b := start(t)
	ada := b.create("Ada", "ada@example.com")
	run := b.StartRun("tidy")
	b.Apply(b.Preview("update_contact", map[string]any{"id": ada.ID, "name": "Ada L.", "run_id": run}))
	bo, _ := b.PreviewRun("create_contact", map[string]any{"name": "Bo", "email": "bo@example.com", "run_id": run})
	var created contact
	b.ApplyResult(bo, &created)
	b.edit(ada.ID, "Ada Lovelace")

	dry := b.DryRun(run)
	rep := b.UndoRun(run, dry.ConfirmationToken)
	if len(rep.Skipped) != 1 || len(rep.Skipped[0].Drift) == 0 || rep.Skipped[0].Resource != fmt.Sprintf("contact:%d", ada.ID) {
		t.Fatalf("run undo skipped %+v, want the update of contact %d with its drift", rep.Skipped, ada.ID)
	}
	if len(rep.Undone) != 1 || rep.Undone[0].ChangeID != bo.ChangeID {
		t.Fatalf("run undo undid %+v, want the create of Bo", rep.Undone)
	}
	got := b.list()
	if len(got) != 1 || got[0].Name != "Ada Lovelace" {
		t.Fatalf("after the run's undo %+v, want only Ada with the person's edit", got)
	}
}
