package main

import (
	"context"
	"fmt"
	"runtime"
	"runtime/debug"

	"github.com/mcp-changeset/changeset-go/ledger/sqlite"
)

// VersionCommand prints the version of the program, the Go release it was
// built with and the newest SQLite ledger schema it reads.
type VersionCommand struct {
	main *Main
}

// Run parses args and prints the version.
func (c *VersionCommand) Run(ctx context.Context, args []string) error {
	fs := newFlagSet("version", nil)
	rest, err := parseArgs(fs, args)
	if err != nil {
		return err
	}
	if err := noArgs(rest); err != nil {
		return err
	}
	version := "(unknown)"
	if info, ok := debug.ReadBuildInfo(); ok {
		version = info.Main.Version
	}
	fmt.Fprintf(c.main.Stdout, "mcp-changeset %s (%s, SQLite ledger schema %d)\n", version, runtime.Version(), sqlite.SchemaVersion)
	return nil
}

// Usage returns the help text of version.
func (c *VersionCommand) Usage() string {
	return `Usage: mcp-changeset version

Print the version of this program (the module version it was installed
at, or "(devel)" for a local build), the Go release it was built with and
the newest SQLite ledger schema version it can read. A ledger with a newer
schema is refused: install a newer mcp-changeset.

Example:

	mcp-changeset version
`
}
