package main

import (
	"context"
	"fmt"
	"strings"
)

// CheckCommand checks the ledger: the database's own integrity check and
// the ledger's invariants (see ledger.Ledger.Check). It prints each
// finding on a line of its own, or "ok", and opens the ledger read-only.
type CheckCommand struct {
	main *Main

	ledger string
}

// Run parses args and checks the ledger.
func (c *CheckCommand) Run(ctx context.Context, args []string) error {
	fs := newFlagSet("check", &c.ledger)
	rest, err := parseArgs(fs, args)
	if err != nil {
		return err
	}
	if err := noArgs(rest); err != nil {
		return err
	}
	l, err := c.main.open(ctx, c.ledger, false)
	if err != nil {
		return err
	}
	defer l.Close()
	problems, err := l.Check(ctx)
	if err != nil {
		return err
	}
	lines := findingLines(problems)
	if len(lines) == 0 {
		fmt.Fprintln(c.main.Stdout, "ok")
		return nil
	}
	for _, line := range lines {
		fmt.Fprintln(c.main.Stdout, line)
	}
	fmt.Fprintf(c.main.Stderr, "mcp-changeset check: %s found in %s; restore it from a backup, or reconcile or inspect the rows named above\n",
		plural(len(lines), "problem"), l.Location())
	return errReported
}

// findingLines puts each finding on a line of its own. SQLite's integrity
// check reports several findings in one multi-line row; each of its lines
// becomes a line that repeats the row's label ("integrity: ").
func findingLines(problems []string) []string {
	var out []string
	for _, p := range problems {
		parts := strings.Split(strings.TrimSpace(p), "\n")
		label, _, ok := strings.Cut(parts[0], ": ")
		for i, part := range parts {
			if part = strings.TrimSpace(part); part == "" {
				continue
			}
			if i > 0 && ok {
				part = label + ": " + part
			}
			out = append(out, clean(part))
		}
	}
	return out
}

// Usage returns the help text of check.
func (c *CheckCommand) Usage() string {
	return `Usage: mcp-changeset check

Check the ledger: SQLite's integrity and foreign key checks, the file's
identity (application_id and schema version), and the ledger's own
invariants:

	- every change and run has a known status;
	- only pending changes hold a confirmation digest, and all of them do;
	- only applied changes of undoable operations hold an undo digest, and
	  they do while their undo window is open;
	- changes that were applied record when, and undone changes when they
	  were undone;
	- every change's run exists;
	- finished runs hold no undo confirmation digest, and a run holds one
	  only with the plan digest it is bound to.

Prints each problem on a line of its own and exits with status 1, or prints
"ok" and exits with status 0. Findings name rows by ID, never a digest. The
ledger is opened read-only.

Options:

	--ledger L     the ledger (default $` + LedgerEnv + `)

Examples:

	mcp-changeset check
	MCP_CHANGESET_LEDGER=/var/lib/notes/ledger.db mcp-changeset check || alert
`
}
