package main

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"strconv"
	"strings"
	"time"

	changeset "github.com/mcp-changeset/changeset-go"
	"github.com/modelcontextprotocol/go-sdk/mcp"
)

// schema is the tracker's own tables, kept in the ledger's database beside
// the ledger's tables. ticket_seq hands out ticket numbers: a preview
// reserves one, so that a create knows its ticket's ID before it is applied.
const schema = `
CREATE TABLE IF NOT EXISTS tickets (
    id         INTEGER PRIMARY KEY,
    title      TEXT    NOT NULL,
    status     TEXT    NOT NULL CHECK (status IN ('open', 'in_progress', 'closed')),
    version    INTEGER NOT NULL CHECK (version > 0),
    created_at TEXT    NOT NULL
);
CREATE TABLE IF NOT EXISTS ticket_seq (last INTEGER NOT NULL);
INSERT INTO ticket_seq (last) SELECT 0 WHERE NOT EXISTS (SELECT 1 FROM ticket_seq);
`

// Ticket is one row of the tracker.
type Ticket struct {
	ID        int64  `json:"id"`
	Title     string `json:"title"`
	Status    string `json:"status"`
	Version   int64  `json:"version"`
	CreatedAt string `json:"created_at"`
}

var statuses = []string{"open", "in_progress", "closed"}

// tracker is the ticket tracker: its database is the ledger's.
type tracker struct {
	db *sql.DB
	// hook, when set, runs inside every apply and undo transaction (tests
	// use it to be killed mid-transaction).
	hook func()
}

// migrate creates the tracker's tables if they are missing.
func (t *tracker) migrate(ctx context.Context) error {
	tx, err := t.db.BeginTx(ctx, nil)
	if err != nil {
		return err
	}
	defer tx.Rollback()
	if _, err := tx.ExecContext(ctx, schema); err != nil {
		return fmt.Errorf("create the ticket tables: %w", err)
	}
	return tx.Commit()
}

// querier is what both *sql.DB and *sql.Tx offer.
type querier interface {
	QueryRowContext(ctx context.Context, query string, args ...any) *sql.Row
}

// get reads a ticket; ok is false when there is none.
func get(ctx context.Context, q querier, id int64) (Ticket, bool, error) {
	var tk Ticket
	err := q.QueryRowContext(ctx, `SELECT id, title, status, version, created_at FROM tickets WHERE id = ?`, id).
		Scan(&tk.ID, &tk.Title, &tk.Status, &tk.Version, &tk.CreatedAt)
	if errors.Is(err, sql.ErrNoRows) {
		return Ticket{}, false, nil
	}
	return tk, err == nil, err
}

// observe is what counts as someone's work on a ticket: the whole row, or
// nil when it does not exist.
func observe(ctx context.Context, tx *sql.Tx, id int64) (any, error) {
	tk, ok, err := get(ctx, tx, id)
	if err != nil || !ok {
		return nil, err
	}
	return tk, nil
}

// list returns every ticket, by ID.
func (t *tracker) list(ctx context.Context) ([]Ticket, error) {
	rows, err := t.db.QueryContext(ctx, `SELECT id, title, status, version, created_at FROM tickets ORDER BY id`)
	if err != nil {
		return nil, err
	}
	defer rows.Close()
	out := []Ticket{}
	for rows.Next() {
		var tk Ticket
		if err := rows.Scan(&tk.ID, &tk.Title, &tk.Status, &tk.Version, &tk.CreatedAt); err != nil {
			return nil, err
		}
		out = append(out, tk)
	}
	return out, rows.Err()
}

// reserveID hands out the next ticket number. It is the only write a
// preview makes; a number reserved by a preview that is never applied is
// simply never used.
func (t *tracker) reserveID(ctx context.Context) (int64, error) {
	var id int64
	err := t.db.QueryRowContext(ctx, `UPDATE ticket_seq SET last = last + 1 RETURNING last`).Scan(&id)
	return id, err
}

func validTitle(title string) error {
	switch {
	case strings.TrimSpace(title) == "":
		return changeset.Refuse("the title must not be empty")
	case len(title) > 200:
		return changeset.Refuse("the title is %d bytes; at most 200 are allowed", len(title))
	}
	return nil
}

func validStatus(s string) error {
	for _, v := range statuses {
		if s == v {
			return nil
		}
	}
	return changeset.Refuse("unknown status %q (want open, in_progress or closed)", s)
}

// casExec runs a compare-and-set statement and fails unless it changed exactly
// one row: another writer got there first.
func casExec(ctx context.Context, tx *sql.Tx, what string, query string, args ...any) error {
	res, err := tx.ExecContext(ctx, query, args...)
	if err != nil {
		return err
	}
	if n, err := res.RowsAffected(); err != nil || n != 1 {
		return changeset.Refuse("%s: the ticket changed meanwhile; nothing was written", what)
	}
	return nil
}

func (t *tracker) runHook() {
	if t.hook != nil {
		t.hook()
	}
}

func resource(id int64) string { return "ticket:" + strconv.FormatInt(id, 10) }

type (
	createIn struct {
		Title string `json:"title" jsonschema:"the new ticket's title"`
	}
	createPayload struct {
		ID    int64  `json:"id"`
		Title string `json:"title"`
	}
	updateIn struct {
		ID     int64  `json:"id"`
		Title  string `json:"title" jsonschema:"the new title (repeat the old one to keep it)"`
		Status string `json:"status" jsonschema:"open, in_progress or closed"`
	}
	updatePayload struct {
		ID      int64  `json:"id"`
		Title   string `json:"title"`
		Status  string `json:"status"`
		Version int64  `json:"version" jsonschema:"the version the preview saw"`
	}
	deleteIn struct {
		ID int64 `json:"id"`
	}
	deletePayload struct {
		ID      int64 `json:"id"`
		Version int64 `json:"version"`
	}
)

// register adds the three guarded operations and list_tickets.
func (t *tracker) register(server *mcp.Server, g *changeset.Guard) {
	changeset.Register(g, &mcp.Tool{Name: "create_ticket", Description: "Create a ticket."},
		changeset.Operation[createIn, createPayload, Ticket]{
			Preview: func(ctx context.Context, in createIn) (*changeset.Proposal[createPayload], error) {
				if err := validTitle(in.Title); err != nil {
					return nil, err
				}
				id, err := t.reserveID(ctx)
				if err != nil {
					return nil, err
				}
				return &changeset.Proposal[createPayload]{
					Payload:  createPayload{ID: id, Title: in.Title},
					Diff:     changeset.DiffFields(nil, map[string]any{"title": in.Title, "status": "open"}),
					Summary:  fmt.Sprintf("Create ticket #%d %s", id, changeset.Quote(in.Title)),
					Resource: resource(id),
				}, nil
			},
			ApplyTx: func(ctx context.Context, tx *sql.Tx, p createPayload) (Ticket, error) {
				t.runHook()
				tk := Ticket{ID: p.ID, Title: p.Title, Status: "open", Version: 1, CreatedAt: time.Now().UTC().Format(time.RFC3339Nano)}
				_, err := tx.ExecContext(ctx, `INSERT INTO tickets (id, title, status, version, created_at) VALUES (?, ?, ?, ?, ?)`,
					tk.ID, tk.Title, tk.Status, tk.Version, tk.CreatedAt)
				return tk, err
			},
			UndoTx: func(ctx context.Context, tx *sql.Tx, p createPayload, created Ticket) error {
				t.runHook()
				return casExec(ctx, tx, "undo create", `DELETE FROM tickets WHERE id = ? AND version = ?`, p.ID, created.Version)
			},
			ObserveTx: func(ctx context.Context, tx *sql.Tx, p createPayload) (any, error) { return observe(ctx, tx, p.ID) },
		})

	changeset.Register(g, &mcp.Tool{Name: "update_ticket", Description: "Change a ticket's title and status."},
		changeset.Operation[updateIn, updatePayload, Ticket]{
			Preview: func(ctx context.Context, in updateIn) (*changeset.Proposal[updatePayload], error) {
				if err := validTitle(in.Title); err != nil {
					return nil, err
				}
				if err := validStatus(in.Status); err != nil {
					return nil, err
				}
				tk, ok, err := get(ctx, t.db, in.ID)
				if err != nil || !ok {
					return nil, orNoTicket(err, in.ID)
				}
				return &changeset.Proposal[updatePayload]{
					Payload: updatePayload{ID: in.ID, Title: in.Title, Status: in.Status, Version: tk.Version},
					Diff: changeset.DiffFields(map[string]any{"title": tk.Title, "status": tk.Status},
						map[string]any{"title": in.Title, "status": in.Status}),
					Summary:  fmt.Sprintf("Update ticket #%d", in.ID),
					Resource: resource(in.ID),
				}, nil
			},
			ApplyTx: func(ctx context.Context, tx *sql.Tx, p updatePayload) (Ticket, error) {
				t.runHook()
				old, _, err := get(ctx, tx, p.ID)
				if err != nil {
					return Ticket{}, err
				}
				return old, casExec(ctx, tx, "update", `UPDATE tickets SET title = ?, status = ?, version = version + 1 WHERE id = ? AND version = ?`,
					p.Title, p.Status, p.ID, p.Version)
			},
			// The undo puts the row back exactly as it was, version included:
			// the ticket then reads as if the update never happened, and a
			// change previewed before the update matches it again.
			UndoTx: func(ctx context.Context, tx *sql.Tx, p updatePayload, old Ticket) error {
				t.runHook()
				return casExec(ctx, tx, "undo update", `UPDATE tickets SET title = ?, status = ?, version = ? WHERE id = ? AND version = ?`,
					old.Title, old.Status, old.Version, p.ID, p.Version+1)
			},
			ObserveTx: func(ctx context.Context, tx *sql.Tx, p updatePayload) (any, error) { return observe(ctx, tx, p.ID) },
		})

	changeset.Register(g, &mcp.Tool{Name: "delete_ticket", Description: "Delete a ticket."},
		changeset.Operation[deleteIn, deletePayload, Ticket]{
			Preview: func(ctx context.Context, in deleteIn) (*changeset.Proposal[deletePayload], error) {
				tk, ok, err := get(ctx, t.db, in.ID)
				if err != nil || !ok {
					return nil, orNoTicket(err, in.ID)
				}
				return &changeset.Proposal[deletePayload]{
					Payload:  deletePayload{ID: in.ID, Version: tk.Version},
					Diff:     changeset.DiffFields(map[string]any{"title": tk.Title, "status": tk.Status}, nil),
					Summary:  fmt.Sprintf("Delete ticket #%d %s", in.ID, changeset.Quote(tk.Title)),
					Resource: resource(in.ID),
				}, nil
			},
			ApplyTx: func(ctx context.Context, tx *sql.Tx, p deletePayload) (Ticket, error) {
				t.runHook()
				old, _, err := get(ctx, tx, p.ID)
				if err != nil {
					return Ticket{}, err
				}
				return old, casExec(ctx, tx, "delete", `DELETE FROM tickets WHERE id = ? AND version = ?`, p.ID, p.Version)
			},
			// The undo restores the row exactly: its ID, its creation time
			// and its version (nobody can have edited a deleted ticket).
			UndoTx: func(ctx context.Context, tx *sql.Tx, p deletePayload, old Ticket) error {
				t.runHook()
				_, err := tx.ExecContext(ctx, `INSERT INTO tickets (id, title, status, version, created_at) VALUES (?, ?, ?, ?, ?)`,
					old.ID, old.Title, old.Status, old.Version, old.CreatedAt)
				return err
			},
			ObserveTx: func(ctx context.Context, tx *sql.Tx, p deletePayload) (any, error) { return observe(ctx, tx, p.ID) },
		})

	mcp.AddTool(server, &mcp.Tool{
		Name:        "list_tickets",
		Description: "List every ticket, by ID.",
		Annotations: &mcp.ToolAnnotations{ReadOnlyHint: true},
	}, func(ctx context.Context, req *mcp.CallToolRequest, _ struct{}) (*mcp.CallToolResult, ticketsOutput, error) {
		tks, err := t.list(ctx)
		return nil, ticketsOutput{Tickets: tks}, err
	})
}

type ticketsOutput struct {
	Tickets []Ticket `json:"tickets"`
}

func orNoTicket(err error, id int64) error {
	if err != nil {
		return err
	}
	return changeset.Refuse("there is no ticket #%d", id)
}
