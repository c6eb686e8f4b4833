// Command flags is an MCP server for feature flags kept in a JSON file
// that people may also edit by hand. Its three writes, create_flag,
// update_flag and delete_flag, are guarded with the key-value adapter
// (package kv): each is previewed as a diff, applied once with the
// preview's confirmation token, refused if the flag changed after the
// preview, and can be undone unless it changed since.
//
//	MCP_CHANGESET_WRITE_MODE=guarded go run ./examples/flags --file flags.json
//
// The file is a JSON object of flags by name, read again on every call:
//
//	{
//	  "beta": {"enabled": true, "rollout": 10, "description": "the new editor"}
//	}
//
// The tools are in flags.go; testdata/plain holds the same server without
// the guard, to compare. See --help for the flags every example shares
// (--ledger, --http, --auth-token-file).
package main

import (
	"errors"
	"flag"
	"log/slog"

	changeset "github.com/mcp-changeset/changeset-go"
	"github.com/mcp-changeset/changeset-go/kv"
	_ "github.com/mcp-changeset/changeset-go/ledger/postgres" // --ledger postgres://…
	"github.com/mcp-changeset/changeset-go/serve"
	"github.com/modelcontextprotocol/go-sdk/mcp"
)

func main() {
	var file string
	serve.Main(serve.Program{
		Name:     "flags",
		Synopsis: "--file PATH [flags]",
		About: `An MCP server for feature flags kept in a JSON file. Tools: preview_create_flag,
preview_update_flag, preview_delete_flag, apply_change, undo_change, list_flags, …`,
		Flags: func(fs *flag.FlagSet) {
			fs.StringVar(&file, "file", "", "the JSON `file` that holds the flags (required; created by the first write)")
		},
		Check: func(serve.Flags) error {
			if file == "" {
				return errors.New("--file is required: the JSON file that holds the flags")
			}
			return nil
		},
		Setup: func(server *mcp.Server, guard *changeset.Guard, log *slog.Logger) error {
			register(server, guard, kv.NewJSONFile(file), log)
			return nil
		},
	})
}
