// Command elicit is the settings quickstart with built-in user approval:
// the user, not the agent, says yes to every write.
//
// The agent calls preview_set_setting and gets a diff and a change_id, but
// no confirmation token. When it calls apply_change with the change_id, the
// server asks the user through the client: a form with one yes/no question
// ("approve") whose text the server renders from its ledger, not from the
// agent's words. The setting changes only if the user accepts; a decline
// or a dismissed question changes nothing and the change can be approved
// later. undo_change and undo_run (dry_run=false) ask the same way.
//
// Clients on protocol 2026-07-28 answer the question inside the tool call
// (multi round-trip requests); older clients get an elicitation request
// from the server. Either way the client must support form elicitation;
// one that does not gets a tool error that says so.
//
//	MCP_CHANGESET_WRITE_MODE=guarded go run ./examples/elicit --ledger /tmp/elicit.db
//
// It takes the flags every example takes (see go run ./examples/elicit
// --help). An "accept" comes from the client: see docs/approval.md for
// what that does and does not prove.
package main

import (
	"log/slog"

	changeset "github.com/mcp-changeset/changeset-go"
	_ "github.com/mcp-changeset/changeset-go/ledger/postgres" // --ledger postgres://…
	"github.com/mcp-changeset/changeset-go/serve"
	"github.com/modelcontextprotocol/go-sdk/mcp"
)

func main() {
	serve.Main(serve.Program{
		Name: "elicit",
		About: "An MCP server with two in-memory settings, theme and language, whose\n" +
			"writes the user approves in the client (form elicitation).\n" +
			"Tools: preview_set_setting, apply_change, undo_change, get_change_status,\n" +
			"start_run, get_run, list_runs, undo_run, get_settings.",
		// The one line that differs from the settings example.
		Options: func(o *changeset.Options) { o.Approval = changeset.UserApproval },
		Setup: func(server *mcp.Server, guard *changeset.Guard, _ *slog.Logger) error {
			register(server, guard, newStore())
			return nil
		},
	})
}
