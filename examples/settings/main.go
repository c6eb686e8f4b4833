// Command settings is the quickstart: an MCP server with two in-memory
// settings, theme and language, whose one write, set_setting, is guarded.
//
// The agent calls preview_set_setting and gets a diff and a confirmation
// token; apply_change applies exactly the previewed value, once, and only if
// the setting still holds the value the preview saw; undo_change puts the old
// value back unless someone changed it since. get_settings reads them.
//
//	MCP_CHANGESET_WRITE_MODE=guarded go run ./examples/settings --ledger /tmp/settings.db
//
// The operation itself (Preview, Apply, Undo, Observe) is in settings.go;
// main.go is all a server needs besides (see package serve).
//
// It takes the flags every example takes (see go run ./examples/settings
// --help), among them --http ADDR with --auth-token-file FILE to serve
// Streamable HTTP instead of stdio.
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
		Name: "settings",
		About: `An MCP server with two in-memory settings, theme and language.
Tools: preview_set_setting, apply_change, undo_change, get_change_status,
get_settings.`,
		Setup: func(server *mcp.Server, guard *changeset.Guard, _ *slog.Logger) error {
			register(server, guard, newStore())
			return nil
		},
	})
}
