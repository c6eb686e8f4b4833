package main

import (
	"context"
	"errors"
	"fmt"

	"github.com/mcp-changeset/changeset-go/ledger"
)

// ListCommand lists changes, newest first, optionally only those in some
// statuses or of one run. It opens the ledger read-only.
type ListCommand struct {
	main *Main

	ledger string
	status string
	run    string
	json   bool
}

// Run parses args and prints the matching changes.
func (c *ListCommand) Run(ctx context.Context, args []string) error {
	fs := newFlagSet("list", &c.ledger)
	fs.StringVar(&c.status, "status", "", "only changes in these statuses (comma-separated)")
	fs.StringVar(&c.run, "run", "", "only changes of this run")
	fs.BoolVar(&c.json, "json", false, "print one JSON document")
	rest, err := parseArgs(fs, args)
	if err != nil {
		return err
	}
	if err := noArgs(rest); err != nil {
		return err
	}
	statuses, err := parseStatuses(c.status)
	if err != nil {
		return err
	}
	l, err := c.main.open(ctx, c.ledger, false)
	if err != nil {
		return err
	}
	defer l.Close()

	if c.run != "" {
		if _, err := l.GetRun(ctx, c.run); err != nil {
			if errors.Is(err, ledger.ErrNotFound) {
				return fmt.Errorf("run %s not found in %s (list the runs with: mcp-changeset runs)", c.run, l.Location())
			}
			return err
		}
	}
	changes, err := l.ListChanges(ctx, ledger.ChangeFilter{Statuses: statuses, RunID: c.run})
	if err != nil {
		return err
	}
	if c.json {
		views := make([]changeView, len(changes))
		for i, ch := range changes {
			views[i] = viewChange(ch)
		}
		return writeJSON(c.main.Stdout, struct {
			Changes []changeView `json:"changes"`
		}{views})
	}
	if len(changes) == 0 {
		fmt.Fprintln(c.main.Stdout, "no changes")
		return nil
	}
	now := c.main.Now()
	t := newTable(c.main.Stdout, "ID", "STATUS", "ACTION", "RUN", "UPDATED", "SUMMARY")
	for _, ch := range changes {
		t.row(clean(ch.ID), clean(string(ch.Status)), clean(ch.Action), orDash(clean(ch.RunID)),
			when(ch.UpdatedAt, now), clean(truncate(ch.Summary, 60)))
	}
	return t.flush()
}

// Usage returns the help text of list.
func (c *ListCommand) Usage() string {
	return `Usage: mcp-changeset list [--status S] [--run R] [--json]

List the changes in the ledger, newest first: ID, status, operation, run,
when each was last updated (local time and age) and its summary. The ledger
is opened read-only.

Options:

	--status S     only changes in status S; several statuses may be given
	               separated by commas. Statuses: pending, expired, applying,
	               applied, apply_failed, undoing, undone, undo_failed
	--run R        only the changes of run R
	--json         print one JSON document instead of a table
	--ledger L     the ledger (default $` + LedgerEnv + `)

Examples:

	# Changes a dead process left in flight, to reconcile:
	mcp-changeset list --status applying,undoing

	# The changes of one run, for a script:
	mcp-changeset list --run run_3f9a1c0d2b7e4a6f8c11 --json
`
}
