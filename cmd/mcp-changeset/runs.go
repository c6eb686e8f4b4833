package main

import (
	"context"
	"fmt"
	"strconv"
	"time"

	"github.com/mcp-changeset/changeset-go/ledger"
)

// RunsCommand lists runs, newest first, with how many changes each holds
// in each status. It opens the ledger read-only.
type RunsCommand struct {
	main *Main

	ledger string
	since  time.Duration
	limit  int
	json   bool
}

// Run parses args and prints the runs.
func (c *RunsCommand) Run(ctx context.Context, args []string) error {
	fs := newFlagSet("runs", &c.ledger)
	fs.Var(durationFlag{&c.since}, "since", "only runs updated in the last D (90m, 24h, 7d)")
	fs.IntVar(&c.limit, "limit", defaultLimit, "print at most N runs, the newest; 0 for all")
	fs.BoolVar(&c.json, "json", false, "print one JSON document")
	rest, err := parseArgs(fs, args)
	if err != nil {
		return err
	}
	if err := noArgs(rest); err != nil {
		return err
	}
	if c.limit < 0 {
		return usagef("--limit must be 0 (all) or more, got %d", c.limit)
	}
	l, err := c.main.open(ctx, c.ledger, false)
	if err != nil {
		return err
	}
	defer l.Close()
	f := ledger.RunFilter{}
	if c.since > 0 {
		f.UpdatedSince = c.main.Now().Add(-c.since)
	}
	if c.limit > 0 {
		f.Limit = c.limit + 1 // one more tells whether the list was cut
	}
	runs, err := l.Runs(ctx, f)
	if err != nil {
		return err
	}
	if c.limit > 0 && len(runs) > c.limit {
		runs = runs[:c.limit]
		defer fmt.Fprintf(c.main.Stderr, "mcp-changeset runs: showing the newest %d runs; older ones exist (narrow with --since, or raise --limit, or 0 for all)\n", c.limit)
	}
	views := make([]runView, len(runs))
	for i, r := range runs {
		tallies, err := l.TallyChanges(ctx, ledger.ChangeFilter{RunID: r.ID})
		if err != nil {
			return err
		}
		views[i] = viewRun(r, tallies)
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
	return `Usage: mcp-changeset runs [--since D] [--limit N] [--json]

List the runs in the ledger, newest first: ID, status (open, undoing,
undone, partially_undone), how many changes each holds in each status, when
it was created and last updated (local time and age), and its label. At
most --limit runs are printed (default ` + strconv.Itoa(defaultLimit) + `), with a note on stderr when
there are more. The ledger is opened read-only.

Options:

	--since D      only the runs updated in the last D: 90m, 24h, 7d, 1d12h
	--limit N      print at most N runs, the newest (default ` + strconv.Itoa(defaultLimit) + `); 0 prints
	               all
	--json         print one JSON document instead of a table
	--ledger L     the ledger (default $` + LedgerEnv + `)

Examples:

	mcp-changeset runs
	mcp-changeset runs --since 7d --json
	mcp-changeset list --run "$(mcp-changeset runs --json | jq -r '.runs[0].run_id')"
`
}
