package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"strings"
	"time"

	"github.com/mcp-changeset/changeset-go/ledger"
)

// defaultStaleAfter is how long a change may stay applying or undoing, and
// a run undoing, before check reports it.
const defaultStaleAfter = 10 * time.Minute

// CheckCommand checks the ledger: the database's own integrity check, the
// ledger's invariants (see ledger.Ledger.CheckWith), and changes and runs
// left in flight for longer than --stale-after. By default it makes the
// routine check, whose cost does not grow with the ledger; --full reads
// all of it. It prints each finding on a line of its own, or "ok", and
// opens the ledger read-only.
type CheckCommand struct {
	main *Main

	ledger     string
	staleAfter time.Duration
	since      time.Duration
	full       bool
	json       bool
}

// defaultCheckSince is how far back the routine check reads the history.
const defaultCheckSince = 24 * time.Hour

// staleRow is a change left applying or undoing, or a run left undoing,
// longer than --stale-after: most likely a process died while working on
// it. It carries no digest.
type staleRow struct {
	Kind       string    `json:"kind"` // "change" or "run"
	ID         string    `json:"id"`
	Status     string    `json:"status"`
	UpdatedAt  time.Time `json:"updated_at"`
	AgeSeconds float64   `json:"age_seconds"`
	Action     string    `json:"action"` // a change's operation, "" for a run
	Label      string    `json:"label"`  // a run's label, "" for a change
}

// checkReport is the JSON document of check --json.
type checkReport struct {
	OK         bool       `json:"ok"`
	Full       bool       `json:"full"`
	Problems   []string   `json:"problems"`
	StaleAfter string     `json:"stale_after"`
	Stale      []staleRow `json:"stale"`
}

// Run parses args and checks the ledger.
func (c *CheckCommand) Run(ctx context.Context, args []string) error {
	fs := newFlagSet("check", &c.ledger)
	c.staleAfter = defaultStaleAfter
	fs.Var(durationFlag{&c.staleAfter}, "stale-after", "report changes and runs in flight for longer than this")
	c.since = defaultCheckSince
	fs.Var(durationFlag{&c.since}, "since", "the routine check reads the rows changed in this window")
	fs.BoolVar(&c.full, "full", false, "read the whole ledger: every page, row and history entry")
	fs.BoolVar(&c.json, "json", false, "print one JSON document")
	rest, err := parseArgs(fs, args)
	if err != nil {
		return err
	}
	if err := noArgs(rest); err != nil {
		return err
	}
	sinceSet := false
	fs.Visit(func(f *flag.Flag) { sinceSet = sinceSet || f.Name == "since" })
	if c.full && sinceSet {
		return usagef("give --since or --full, not both: --full reads every row")
	}
	target, err := c.main.ledgerTarget(c.ledger)
	if err != nil {
		return err
	}
	// Open without the open-time integrity check, which would refuse a
	// damaged file: reporting the damage in detail is this command's job.
	l, err := ledger.Open(ctx, target, ledger.OpenOptions{ReadOnly: true, Check: ledger.CheckNone, Clock: c.main.Now})
	if errors.Is(err, ledger.ErrCorrupt) {
		// Too damaged to open at all (its header or schema): that is
		// the finding.
		// The message names the ledger without its credentials.
		return c.report("the ledger", []string{clean("integrity: " + err.Error())}, nil, time.Time{})
	}
	if err != nil {
		return err
	}
	defer l.Close()
	opts := ledger.CheckOptions{Full: c.full, Since: c.main.Now().Add(-c.since)}
	progress := !c.json && isTerminal(c.main.Stderr)
	if progress {
		opts.Progress = checkProgress(c.main.Stderr)
	}
	problems, err := l.CheckWith(ctx, opts)
	if progress {
		fmt.Fprint(c.main.Stderr, "\r\033[K") // clear the progress line
	}
	if err != nil {
		return err
	}
	lines := findingLines(problems)
	now := c.main.Now()
	stale, err := staleRows(ctx, l, now, c.staleAfter)
	if err != nil {
		if len(lines) == 0 {
			return err
		}
		// The damage already reported stops the listing too; say so
		// unless the invariants' line already did.
		if !strings.HasPrefix(lines[len(lines)-1], "invariants: not checked: ") {
			lines = append(lines, clean("stale: not checked: "+err.Error()))
		}
	}
	return c.report(l.Location(), lines, stale, now)
}

// report prints the findings of check on the ledger at location and
// returns errReported if there are any.
func (c *CheckCommand) report(location string, lines []string, stale []staleRow, now time.Time) error {
	if c.json {
		if err := writeJSON(c.main.Stdout, checkReport{
			OK: len(lines) == 0 && len(stale) == 0, Full: c.full, Problems: append([]string{}, lines...),
			StaleAfter: c.staleAfter.String(), Stale: append([]staleRow{}, stale...),
		}); err != nil {
			return err
		}
	} else {
		for _, line := range lines {
			fmt.Fprintln(c.main.Stdout, line)
		}
		for _, s := range stale {
			fmt.Fprintln(c.main.Stdout, s.line(now))
		}
		if len(lines) == 0 && len(stale) == 0 {
			fmt.Fprintln(c.main.Stdout, "ok")
		}
	}
	if len(lines) > 0 {
		fmt.Fprintf(c.main.Stderr, "mcp-changeset check: %s found in %s; restore it from a backup, or reconcile or inspect the rows named above\n",
			plural(len(lines), "problem"), location)
	}
	if len(stale) > 0 {
		fmt.Fprintf(c.main.Stderr, "mcp-changeset check: %s left in flight for more than %s in %s; check what each did to its resource, then close it with: mcp-changeset reconcile ID --note '…' --yes\n",
			countOf(len(stale), "change or run", "changes or runs"), formatDuration(c.staleAfter), location)
	}
	if len(lines) > 0 || len(stale) > 0 {
		return errReported
	}
	return nil
}

// checkProgress returns a ledger.CheckOptions.Progress that keeps one
// line on w (a terminal) saying what check reads, at most ten times a
// second.
func checkProgress(w io.Writer) func(stage string, done, total int) {
	names := map[string]string{"file": "the file's structure", "history": "history entries", "runs": "runs", "changes": "changes"}
	var last time.Time
	lastStage := ""
	return func(stage string, done, total int) {
		now := time.Now()
		if stage == lastStage && now.Sub(last) < 100*time.Millisecond && done != total {
			return
		}
		last, lastStage = now, stage
		switch {
		case stage == "file":
			fmt.Fprintf(w, "\r\033[Kchecking %s…", names[stage])
		case total > 0:
			fmt.Fprintf(w, "\r\033[Kchecking %s: %d of %d", names[stage], done, total)
		default:
			fmt.Fprintf(w, "\r\033[Kchecking %s: %d", names[stage], done)
		}
	}
}

// staleRows lists the changes left applying or undoing and the runs left
// undoing whose last update is more than after before now, oldest first
// within each kind.
func staleRows(ctx context.Context, l *ledger.Ledger, now time.Time, after time.Duration) ([]staleRow, error) {
	cutoff := now.Add(-after)
	changes, err := l.Changes(ctx, ledger.ChangeFilter{Statuses: []ledger.Status{ledger.Applying, ledger.Undoing}, UpdatedBefore: cutoff})
	if err != nil {
		return nil, err
	}
	runs, err := l.Runs(ctx, ledger.RunFilter{Statuses: []ledger.RunStatus{ledger.RunUndoing}})
	if err != nil {
		return nil, err
	}
	var out []staleRow
	for i := len(changes) - 1; i >= 0; i-- { // listed newest first
		ch := changes[i]
		if (ch.Status != ledger.Applying && ch.Status != ledger.Undoing) || !ch.UpdatedAt.Before(cutoff) {
			continue // the filter is the backend's; hold it to it
		}
		out = append(out, staleRow{Kind: "change", ID: ch.ID, Status: string(ch.Status), UpdatedAt: ch.UpdatedAt.UTC(),
			AgeSeconds: now.Sub(ch.UpdatedAt).Seconds(), Action: ch.Action})
	}
	for i := len(runs) - 1; i >= 0; i-- {
		r := runs[i]
		if r.Status != ledger.RunUndoing || !r.UpdatedAt.Before(cutoff) {
			continue
		}
		out = append(out, staleRow{Kind: "run", ID: r.ID, Status: string(r.Status), UpdatedAt: r.UpdatedAt.UTC(),
			AgeSeconds: now.Sub(r.UpdatedAt).Seconds(), Label: r.Label})
	}
	return out, nil
}

// countOf says how many of a noun there are, with its plural form.
func countOf(n int, one, many string) string {
	if n == 1 {
		return "1 " + one
	}
	return fmt.Sprintf("%d %s", n, many)
}

// line is the human form of a stale row, for check's output.
func (s staleRow) line(now time.Time) string {
	what := "action " + clean(s.Action)
	if s.Kind == "run" {
		what = `label "` + clean(s.Label) + `"`
	}
	return fmt.Sprintf("stale: %s %s %s, last updated %s ago, %s", s.Kind, clean(s.ID), clean(s.Status), formatDuration(now.Sub(s.UpdatedAt)), what)
}

// sqliteHeading is the line with which SQLite's integrity check starts
// the findings of each database.
const sqliteHeading = "*** in database main ***"

// findingLines puts each finding on a line of its own. SQLite's integrity
// check reports several findings in one multi-line row; each of its lines
// becomes a line that repeats the row's label ("integrity: ").
func findingLines(problems []string) []string {
	var out []string
	for _, p := range problems {
		parts := strings.Split(strings.TrimSpace(p), "\n")
		label, _, ok := strings.Cut(parts[0], ": ")
		for i, part := range parts {
			part = strings.TrimSpace(part)
			if part == "" || part == sqliteHeading || ok && part == label+": "+sqliteHeading {
				continue // SQLite's heading, not a finding
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
	return `Usage: mcp-changeset check [--full | --since D] [--stale-after DURATION] [--json]

Check the ledger: the file's integrity and identity (application_id and
schema version), and the ledger's own invariants:

	- every change and run has a known status;
	- only pending changes hold a confirmation digest, and all of them do;
	- only applied changes of undoable operations hold an undo digest, and
	  they do while their undo window is open;
	- changes that were applied record when, and undone changes when they
	  were undone;
	- every change's run exists;
	- finished runs hold no undo confirmation digest, and a run holds one
	  only with the plan digest it is bound to;
	- a change or run with history entries is in the status its last entry
	  reached.

By default it makes the routine check, whose cost does not grow with the
ledger: the pages where each of the file's b-trees starts and ends (as
every command checks when it opens a ledger), the file's identity, and the
invariants of every change and run with a history entry in the last
--since (default 24h) and of every change still applying or undoing.
--full reads the whole ledger instead: SQLite's integrity and
foreign key checks over every page, then every row and history entry
(about a minute per GB); run it after a crash or a restore, when another
command reports a damaged ledger, and now and then (weekly).

It also reports every change left applying or undoing, and every run left
undoing, whose last update is older than --stale-after: a process most
likely died while working on it, and nothing will finish it. Check what it
did to its resource, then close it with "mcp-changeset reconcile".

Prints each finding on a line of its own, or "ok". Findings name rows by
ID, never a digest. On a terminal, a progress line is written to stderr.
The ledger is opened read-only, and without the integrity check that
every other command makes when it opens a SQLite ledger, so that check can
report a damaged file in detail; a file whose header or schema cannot be
read is still refused.

Exit status: 0 when nothing was found; 1 when a problem or a stale change
or run was found, or on any error.

Options:

	--full           read the whole ledger (every page, row and history
	                 entry), not only the routine check's part
	--since D        the routine check's window: rows with a transition
	                 in the last D (default 24h)
	--stale-after D  report changes and runs in flight for longer than D
	                 (default 10m): a Go duration such as 90s, 10m or 2h,
	                 or days such as 7d or 1d12h
	--json           print one JSON document instead of lines
	--ledger L       the ledger (default $` + LedgerEnv + `)

Examples:

	mcp-changeset check
	mcp-changeset check --full
	mcp-changeset check --since 7d --stale-after 1h --json
	MCP_CHANGESET_LEDGER=/var/lib/notes/ledger.db mcp-changeset check || alert
`
}
