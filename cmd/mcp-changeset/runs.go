package main

import (
	"context"
	"fmt"
	"strconv"

	"github.com/mcp-changeset/changeset-go/ledger"
)

// RunsCommand lists runs, newest first, with how many changes each holds
// in each status. It opens the ledger read-only.
type RunsCommand struct {
	main *Main

	ledger string
	json   bool
}

// Run parses args and prints the runs.
func (c *RunsCommand) Run(ctx context.Context, args []string) error {
	fs := newFlagSet("runs", &c.ledger)
	fs.BoolVar(&c.json, "json", false, "print one JSON document")
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
	runs, err := l.ListRuns(ctx, ledger.RunFilter{})
	if err != nil {
		return err
	}
	views := make([]runView, len(runs))
	for i, r := range runs {
		changes, err := l.ListChanges(ctx, ledger.ChangeFilter{RunID: r.ID})
		if err != nil {
			return err
		}
		views[i] = viewRun(r, changes)
	}
	if c.json {
		return writeJSON(c.main.Stdout, struct {
			Runs []runView `json:"runs"`
		}{views})
	}
	if len(views) == 0 {
		fmt.Fprintln(c.main.Stdout, "no runs")
		return nil
	}
	now := c.main.Now()
	t := newTable(c.main.Stdout, "ID", "STATUS", "CHANGES", "CREATED", "UPDATED", "LABEL")
	for i, v := range views {
		changes := strconv.Itoa(v.ChangeCount)
		if v.ChangeCount > 0 {
			changes += " (" + clean(statusCounts(v.ChangesByStatus)) + ")"
		}
		t.row(clean(v.RunID), clean(v.Status), changes,
			when(runs[i].CreatedAt, now), when(runs[i].UpdatedAt, now), orDash(clean(truncate(v.Label, 50))))
	}
	return t.flush()
}

// Usage returns the help text of runs.
func (c *RunsCommand) Usage() string {
	return `Usage: mcp-changeset runs [--json]

List the runs in the ledger, newest first: ID, status (open, undoing,
undone, partially_undone), how many changes each holds in each status, when
it was created and last updated (local time and age), and its label. The
ledger is opened read-only.

Options:

	--json         print one JSON document instead of a table
	--ledger L     the ledger (default $` + LedgerEnv + `)

Examples:

	mcp-changeset runs
	mcp-changeset list --run "$(mcp-changeset runs --json | jq -r '.runs[0].run_id')"
`
}
