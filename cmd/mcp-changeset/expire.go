package main

import (
	"context"
	"fmt"
	"io"
)

// ExpireCommand moves every pending change whose confirmation token has
// expired to expired. A pending row otherwise stays pending until someone
// tries to apply it, and prune never deletes pending rows. Without --yes it
// only prints what it would expire.
type ExpireCommand struct {
	main *Main

	ledger string
	yes    bool
}

// Run parses args and expires stale previews.
func (c *ExpireCommand) Run(ctx context.Context, args []string) error {
	fs := newFlagSet("expire", &c.ledger)
	fs.BoolVar(&c.yes, "yes", false, "expire (without it, only print what would be expired)")
	rest, err := parseArgs(fs, args)
	if err != nil {
		return err
	}
	if err := noArgs(rest); err != nil {
		return err
	}
	l, err := c.main.open(ctx, c.ledger, c.yes)
	if err != nil {
		return err
	}
	defer l.Close()
	out := c.main.Stdout
	if c.yes {
		ids, err := l.ExpireStale(ctx)
		if err != nil && len(ids) > 0 {
			return fmt.Errorf("expired %s, then stopped: %w", plural(len(ids), "change"), err)
		}
		if err != nil {
			return err
		}
		fmt.Fprintf(out, "expired %s\n", plural(len(ids), "change"))
		shown, rest := capped(ids)
		for _, id := range shown {
			fmt.Fprintln(out, "  "+clean(id))
		}
		notListed(out, rest, "change")
		// Approvals past their deadline are refused whatever their row
		// says; moving them to expired keeps the lists of waiting
		// approvals short.
		apr, err := l.ExpireApprovals(ctx)
		if err != nil {
			return fmt.Errorf("expired %s, then could not expire the approvals past their deadline: %w", plural(len(ids), "change"), err)
		}
		if len(apr) > 0 {
			fmt.Fprintf(out, "expired %s past its deadline\n", plural(len(apr), "approval"))
		}
		return nil
	}
	ids, err := l.StaleChanges(ctx)
	if err != nil {
		return err
	}
	fmt.Fprintf(out, "would expire %s whose confirmation token has expired\n", plural(len(ids), "pending change"))
	if len(ids) > 0 {
		fmt.Fprintln(out)
		now := c.main.Now()
		t := newTable(out, "ID", "ACTION", "EXPIRED", "SUMMARY")
		shown, rest := capped(ids)
		for _, id := range shown {
			ch, err := l.Change(ctx, id)
			if err != nil {
				continue // gone meanwhile
			}
			t.row(clean(ch.ID), clean(ch.Action), when(ch.ExpiresAt, now), clean(truncate(ch.Summary, 50)))
		}
		if err := t.flush(); err != nil {
			return err
		}
		notListed(out, rest, "change")
	}
	fmt.Fprintln(out, "\ndry run: nothing was changed; run again with --yes to expire")
	return errDryRun
}

// Usage returns the help text of expire.
func (c *ExpireCommand) Usage() string {
	return `Usage: mcp-changeset expire [--yes]

Mark every pending change whose confirmation token has expired as expired.
A stale preview otherwise stays pending until someone tries to apply it,
and prune never deletes pending changes. A pending change that has not
expired is left alone.

Without --yes, prints the changes it would expire, changes nothing and
exits with status 2, even when there is nothing to expire (the ledger is
opened read-only).

Options:

	--yes          expire them
	--ledger L     the ledger (default $` + LedgerEnv + `)

Examples:

	mcp-changeset expire
	mcp-changeset expire --yes && mcp-changeset prune --older-than-days 30 --yes
`
}

// capped returns the first defaultLimit items, which a listing prints, and
// how many it leaves out.
func capped[T any](items []T) (shown []T, rest int) {
	if len(items) <= defaultLimit {
		return items, 0
	}
	return items[:defaultLimit], len(items) - defaultLimit
}

// notListed says how many things a capped listing left out, if any.
func notListed(out io.Writer, rest int, noun string) {
	if rest > 0 {
		fmt.Fprintf(out, "…and %s not listed\n", plural(rest, noun))
	}
}
