package main

import (
	"context"
	"errors"
	"fmt"
	"strconv"
	"time"

	"github.com/mcp-changeset/changeset-go/ledger"
)

// ListCommand lists changes, newest first, optionally only those in some
// statuses, of one run or of one actor, at most --limit of them. It opens
// the ledger read-only.
type ListCommand struct {
	main *Main

	ledger string
	status string
	run    string
	by     string
	action string
	since  time.Duration
	limit  int
	json   bool
}

// Run parses args and prints the matching changes.
func (c *ListCommand) Run(ctx context.Context, args []string) error {
	fs := newFlagSet("list", &c.ledger)
	fs.StringVar(&c.status, "status", "", "only changes in these statuses (comma-separated)")
	fs.StringVar(&c.run, "run", "", "only changes of this run")
	fs.StringVar(&c.by, "by", "", "only changes this actor previewed, applied or undid")
	fs.StringVar(&c.action, "action", "", "only changes of this operation")
	fs.Var(durationFlag{&c.since}, "since", "only changes updated in the last D (90m, 24h, 7d)")
	fs.IntVar(&c.limit, "limit", defaultLimit, "print at most N changes, the newest; 0 for all")
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
		if _, err := l.Run(ctx, c.run); err != nil {
			if errors.Is(err, ledger.ErrNotFound) {
				return fmt.Errorf("run %s not found in %s (list the runs with: mcp-changeset runs)", c.run, l.Location())
			}
			return err
		}
	}
	f := ledger.ChangeFilter{Statuses: statuses, RunID: c.run, By: c.by, Action: c.action}
	if c.since > 0 {
		f.UpdatedSince = c.main.Now().Add(-c.since)
	}
	if c.limit > 0 {
		f.Limit = c.limit + 1 // one more tells whether the list was cut
	}
	changes, err := l.Changes(ctx, f)
	if err != nil {
		return err
	}
	if c.limit > 0 && len(changes) > c.limit {
		changes = changes[:c.limit]
		defer fmt.Fprintf(c.main.Stderr, "mcp-changeset list: showing the newest %d changes; older ones exist (narrow with --status, --run, --by, --action or --since, or raise --limit)\n", c.limit)
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
	t := newTable(c.main.Stdout, "ID", "STATUS", "ACTION", "RUN", "BY", "UPDATED", "SUMMARY")
	for _, ch := range changes {
		t.row(clean(ch.ID), clean(string(ch.Status)), clean(ch.Action), orDash(clean(ch.RunID)),
			orDash(clean(lastActor(ch))), when(ch.UpdatedAt, now), clean(truncate(ch.Summary, 60)))
	}
	return t.flush()
}

// lastActor names who moved ch last: who undid it, else who applied it,
// else who previewed it.
func lastActor(ch *ledger.Change) string {
	for _, by := range []string{ch.UndoneBy, ch.AppliedBy, ch.PreviewedBy} {
		if by != "" {
			return by
		}
	}
	return ""
}

// Usage returns the help text of list.
func (c *ListCommand) Usage() string {
	return `Usage: mcp-changeset list [--status S] [--run R] [--by WHO] [--action A] [--since D] [--limit N] [--json]

List the changes in the ledger, newest first: ID, status, operation, run,
who moved it last (who undid it, else applied it, else previewed it), when
it was last updated (local time and age) and its summary. At most --limit
changes are printed (default ` + strconv.Itoa(defaultLimit) + `), with a note on stderr when there are
more. The ledger is opened read-only.

Options:

	--status S     only changes in status S; several statuses may be given
	               separated by commas. Statuses: pending, expired, applying,
	               applied, apply_failed, undoing, undone, undo_failed, declined
	--run R        only the changes of run R
	--by WHO       only the changes WHO previewed, applied or undid, exactly
	               as the ledger names them: agent:NAME, person:NAME,
	               operator:NAME
	--action A     only the changes of operation A (e.g. set_setting)
	--since D      only the changes updated in the last D: 90m, 24h, 7d,
	               1d12h
	--limit N      print at most N changes, the newest (default ` + strconv.Itoa(defaultLimit) + `); 0
	               prints all
	--json         print one JSON document instead of a table
	--ledger L     the ledger (default $` + LedgerEnv + `)

Examples:

	# Changes a dead process left in flight, to reconcile:
	mcp-changeset list --status applying,undoing

	# The changes of one run, for a script:
	mcp-changeset list --run run_3f9a1c0d2b7e4a6f8c11 --json

	# What bob's agent touched:
	mcp-changeset list --by agent:bob

	# Every note deleted today:
	mcp-changeset list --action delete_note --since 24h
`
}
