// Command tickets is a ticket tracker whose tickets live in the ledger's own
// database, so that its writes are transactional operations: the claim, the
// state check, the write and the ledger's record of it commit together or
// not at all. A change is applied exactly once, and a crash never leaves one
// half-applied for an operator to reconcile.
//
// Its operations are create_ticket(title), update_ticket(id, title, status)
// and delete_ticket(id), each with undo; list_tickets reads. Every ticket
// carries a row version, and apply and undo are compare-and-set on it. The
// undo of a delete restores the ticket with its original ID and creation
// time.
//
//	MCP_CHANGESET_WRITE_MODE=guarded go run ./examples/tickets --ledger /tmp/tickets.db
package main

import (
	"context"
	"log/slog"

	changeset "github.com/mcp-changeset/changeset-go"
	_ "github.com/mcp-changeset/changeset-go/ledger/postgres" // --ledger postgres://…
	"github.com/mcp-changeset/changeset-go/serve"
	"github.com/modelcontextprotocol/go-sdk/mcp"
)

func main() {
	serve.Main(serve.Program{
		Name: "tickets",
		About: "A ticket tracker in the ledger's own database, with transactional guarded writes.\n" +
			"Tools: preview_create_ticket, preview_update_ticket, preview_delete_ticket, list_tickets,\n" +
			"and the shared apply_change, undo_change, get_change_status and run tools.",
		Setup: func(server *mcp.Server, guard *changeset.Guard, _ *slog.Logger) error {
			t := &tracker{db: guard.Ledger().DB()}
			if err := t.migrate(context.Background()); err != nil {
				return err
			}
			t.register(server, guard)
			return nil
		},
	})
}
