package main

import (
	"context"
	"fmt"
	"io"
	"strconv"
	"time"

	"github.com/mcp-changeset/changeset-go/ledger"
)

// maxOlderThanDays bounds --older-than-days so that the cutoff stays a
// representable time.
const maxOlderThanDays = 100 * 365

// PruneCommand deletes finished changes last updated before a cutoff, and
// runs left without changes, and gives the space they took back to the
// disk where the ledger can (see ledger.Space). It never deletes a
// pending, applying or undoing change, nor an applied change that can
// still be undone. Without --yes it only prints what it would delete.
type PruneCommand struct {
	main *Main

	ledger         string
	olderThanDays  int
	olderThan      time.Duration
	olderThanSet   bool
	keep           int
	includeApplied bool
	vacuum         bool
	json           bool
	yes            bool
}

// pruneReport is the JSON document of prune --json.
type pruneReport struct {
	DryRun  bool      `json:"dry_run"`
	Cutoff  time.Time `json:"cutoff"`
	Changes []string  `json:"changes"`
	Runs    []string  `json:"runs"`
	// The ledger's size on disk, in bytes, before the prune and after it
	// (and the vacuum, with --vacuum); 0 on a dry run.
	BytesBefore int64 `json:"bytes_before"`
	BytesAfter  int64 `json:"bytes_after"`
	// SpaceReturned: the space of the deleted rows went back to the disk.
	SpaceReturned bool `json:"space_returned"`
	Vacuumed      bool `json:"vacuumed"`
}

// Run parses args and prunes the ledger.
func (c *PruneCommand) Run(ctx context.Context, args []string) error {
	fs := newFlagSet("prune", &c.ledger)
	fs.Func("older-than", "delete rows last updated more than D ago (90m, 24h, 30d)", func(v string) error {
		c.olderThanSet = true
		return durationFlag{&c.olderThan}.Set(v)
	})
	fs.IntVar(&c.olderThanDays, "older-than-days", -1, "delete rows last updated more than N days ago")
	fs.IntVar(&c.keep, "keep", 0, "keep the newest N finished changes whatever their age")
	fs.BoolVar(&c.includeApplied, "include-applied", false, "also delete applied changes that can no longer be undone")
	fs.BoolVar(&c.vacuum, "vacuum", false, "then rewrite the whole ledger so that its file shrinks (see the help)")
	fs.BoolVar(&c.json, "json", false, "print one JSON document")
	fs.BoolVar(&c.yes, "yes", false, "delete (without it, only print what would be deleted)")
	rest, err := parseArgs(fs, args)
	if err != nil {
		return err
	}
	if err := noArgs(rest); err != nil {
		return err
	}
	switch {
	case c.olderThanSet && c.olderThanDays != -1:
		return usagef("give --older-than or --older-than-days, not both")
	case c.olderThanSet && c.olderThan > maxOlderThanDays*day:
		return usagef("--older-than must be at most %dd, not %s", maxOlderThanDays, formatDuration(c.olderThan))
	case c.olderThanSet:
	case c.olderThanDays == -1:
		return usagef("--older-than D (or --older-than-days N) is required (0 prunes every eligible row, whatever its age)")
	case c.olderThanDays < 0 || c.olderThanDays > maxOlderThanDays:
		return usagef("--older-than-days must be between 0 and %d, not %d", maxOlderThanDays, c.olderThanDays)
	case c.keep < 0:
		return usagef("--keep must not be negative, not %d", c.keep)
	}
	l, err := c.main.open(ctx, c.ledger, c.yes)
	if err != nil {
		return err
	}
	defer l.Close()

	if !c.olderThanSet {
		c.olderThan = time.Duration(c.olderThanDays) * day
	}
	opts := ledger.PruneOptions{
		OlderThan:      c.olderThan,
		Keep:           c.keep,
		IncludeApplied: c.includeApplied,
		DryRun:         !c.yes,
		By:             "operator:" + username(),
	}
	cutoff := l.Now().Add(-opts.OlderThan)
	if !c.yes {
		return c.dryRun(ctx, l, opts, cutoff)
	}
	progress := !c.json && isTerminal(c.main.Stderr)
	if progress {
		opts.Progress = pruneProgress(c.main.Stderr)
	}
	res, err := l.Prune(ctx, opts)
	if progress && len(res.Changes) > 0 {
		fmt.Fprintln(c.main.Stderr)
	}
	if err != nil {
		return err
	}
	vacuumed := false
	if c.vacuum {
		if progress {
			fmt.Fprintf(c.main.Stderr, "vacuuming %s: rewriting the whole ledger…\n", formatBytes(res.Space.After))
		}
		s, err := l.Vacuum(ctx)
		if err != nil {
			return fmt.Errorf("deleted %s and %s, then the vacuum failed: %w", plural(len(res.Changes), "change"), plural(len(res.Runs), "run"), err)
		}
		res.Space.After, res.Space.Returned, vacuumed = s.After, true, true
		if res.Space.Before == 0 {
			res.Space.Before = s.Before
		}
	}
	if c.json {
		return writeJSON(c.main.Stdout, pruneReport{Cutoff: cutoff.UTC(), Changes: res.Changes, Runs: res.Runs,
			BytesBefore: res.Space.Before, BytesAfter: res.Space.After, SpaceReturned: res.Space.Returned, Vacuumed: vacuumed})
	}
	out := c.main.Stdout
	fmt.Fprintf(out, "deleted %s and %s last updated before %s\n",
		plural(len(res.Changes), "change"), plural(len(res.Runs), "run"), localTime(cutoff))
	switch sp := res.Space; {
	case vacuumed:
		fmt.Fprintf(out, "vacuumed: the ledger went from %s to %s on disk\n", formatBytes(sp.Before), formatBytes(sp.After))
	case sp.Before == 0 || len(res.Changes)+len(res.Runs) == 0:
	case sp.Returned:
		fmt.Fprintf(out, "the ledger went from %s to %s on disk\n", formatBytes(sp.Before), formatBytes(sp.After))
	default:
		fmt.Fprintf(out, "the ledger keeps the space of the deleted rows for new ones (%s on disk); prune --vacuum returns it to the disk once (see prune --help)\n", formatBytes(sp.After))
	}
	return nil
}

// pruneProgress returns a ledger.PruneOptions.Progress that keeps one line
// on w (a terminal) saying how many changes are deleted, and then that
// the space goes back to the disk.
func pruneProgress(w io.Writer) func(deleted, total int) {
	return func(deleted, total int) {
		fmt.Fprintf(w, "\rdeleting changes: %d of %d", deleted, total)
		if deleted == total {
			fmt.Fprint(w, "; returning the free space to the disk…")
		}
	}
}

// formatBytes formats a size on disk: "512 B", "3.4 MB", "1.20 GB".
func formatBytes(n int64) string {
	switch {
	case n < 1000:
		return fmt.Sprintf("%d B", n)
	case n < 1000_000:
		return fmt.Sprintf("%.1f kB", float64(n)/1e3)
	case n < 1000_000_000:
		return fmt.Sprintf("%.1f MB", float64(n)/1e6)
	}
	return fmt.Sprintf("%.2f GB", float64(n)/1e9)
}

// dryRun prints every change and run that prune would delete, and returns
// errDryRun.
func (c *PruneCommand) dryRun(ctx context.Context, l *ledger.Ledger, opts ledger.PruneOptions, cutoff time.Time) error {
	res, err := l.Prune(ctx, opts)
	if err != nil {
		return err
	}
	if c.json {
		if err := writeJSON(c.main.Stdout, pruneReport{DryRun: true, Cutoff: cutoff.UTC(), Changes: res.Changes, Runs: res.Runs}); err != nil {
			return err
		}
		return errDryRun
	}
	out := c.main.Stdout
	fmt.Fprintf(out, "would delete %s and %s last updated before %s\n",
		plural(len(res.Changes), "change"), plural(len(res.Runs), "run"), localTime(cutoff))
	now := c.main.Now()
	if len(res.Changes) > 0 {
		fmt.Fprintln(out)
		t := newTable(out, "ID", "STATUS", "ACTION", "UPDATED", "SUMMARY")
		shown, rest := capped(res.Changes)
		for _, id := range shown {
			if ch, err := l.Change(ctx, id); err == nil {
				t.row(clean(ch.ID), string(ch.Status), clean(ch.Action), when(ch.UpdatedAt, now), clean(truncate(ch.Summary, 50)))
			}
		}
		if err := t.flush(); err != nil {
			return err
		}
		notListed(out, rest, "change")
	}
	if len(res.Runs) > 0 {
		fmt.Fprintln(out)
		t := newTable(out, "RUN", "STATUS", "UPDATED", "LABEL")
		shown, rest := capped(res.Runs)
		for _, id := range shown {
			if r, err := l.Run(ctx, id); err == nil {
				t.row(clean(r.ID), string(r.Status), when(r.UpdatedAt, now), orDash(clean(truncate(r.Label, 50))))
			}
		}
		if err := t.flush(); err != nil {
			return err
		}
		notListed(out, rest, "run")
	}
	if c.vacuum {
		fmt.Fprintln(out, "\nwith --yes, --vacuum would then rewrite the whole ledger (see prune --help)")
	}
	fmt.Fprintln(out, "\ndry run: nothing was deleted; run again with --yes to delete")
	return errDryRun
}

// plural formats a count of things: "1 change", "3 changes".
func plural(n int, noun string) string {
	if n == 1 {
		return "1 " + noun
	}
	return fmt.Sprintf("%d %ss", n, noun)
}

// Usage returns the help text of prune.
func (c *PruneCommand) Usage() string {
	return `Usage: mcp-changeset prune --older-than D [--keep N] [--include-applied] [--vacuum] [--json] [--yes]
       mcp-changeset prune --older-than-days N …

Delete finished changes (expired, apply_failed, undone, undo_failed, declined) last
updated strictly before now minus D, and runs left with no changes, then
give the space they took back to the disk.
It never deletes a pending, applying or undoing change: run expire first to
let stale previews go, and reconcile rows left in flight. Deletion runs in
batches of ` + strconv.Itoa(ledger.DefaultPruneBatch) + ` changes, each its own short transaction, with a
pause between batches, so a live server's claims wait at most about one
batch; on a terminal a progress line is written to stderr.

Space: a SQLite ledger created by this version or later returns the space
of what prune deletes to the disk by itself (incremental auto-vacuum), in
short steps after the deletion. An older SQLite ledger keeps the space for
new rows until it is vacuumed once: --vacuum rewrites the whole file after
the prune (and switches it to incremental auto-vacuum for good). A vacuum
holds the ledger for as long as it runs (about a second per 100 MB), so a
server's claims fail busy meanwhile: run it while no server writes. It
needs free disk space of about the ledger's size. On PostgreSQL the space
of deleted rows is reused for new rows (prune runs a plain VACUUM) and
--vacuum runs VACUUM FULL, which locks the ledger's tables against reads
and writes while it runs.

Without --yes, prints the changes and runs it would delete (the first
` + strconv.Itoa(defaultLimit) + ` of each, and how many more), deletes nothing
and exits with status 2, even when there is nothing to delete (the ledger is
opened read-only).

Options:

	--older-than D        delete rows last updated more than D ago: 90m,
	                      24h, 30d, 1d12h (required; 0 means any age)
	--older-than-days N   the same in whole days (kept for scripts)
	--keep N              keep the newest N deletable changes whatever their
	                      age (count-based retention)
	--include-applied     also delete applied changes that can no longer be
	                      undone (no undo, or the undo window closed)
	--vacuum              then rewrite the whole ledger so that its file
	                      shrinks (see Space above)
	--json                print one JSON document (every ID, no progress)
	--yes                 delete
	--ledger L            the ledger (default $` + LedgerEnv + `)

Examples:

	# What would go after 30 days:
	mcp-changeset prune --older-than 30d

	# Keep the last 1000 finished changes, delete the rest after 90 days:
	mcp-changeset expire --yes
	mcp-changeset prune --older-than 90d --keep 1000 --include-applied --yes

	# Once, for a SQLite ledger created before incremental auto-vacuum,
	# with the server stopped:
	mcp-changeset prune --older-than 90d --include-applied --vacuum --yes
`
}
