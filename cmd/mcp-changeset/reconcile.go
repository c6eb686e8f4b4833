package main

import (
	"context"
	"errors"
	"fmt"
	"os"
	"os/user"
	"strconv"
	"strings"

	"github.com/mcp-changeset/changeset-go/ledger"
)

// ReconcileCommand closes a change that a process left in flight (it died
// or was cancelled while applying or undoing): applying becomes
// apply_failed and undoing becomes undo_failed, with the operator's note
// and name stored beside it. Without --yes it only prints what it would do.
type ReconcileCommand struct {
	main *Main

	ledger string
	note   string
	yes    bool
}

// Run parses args and reconciles the change they name.
func (c *ReconcileCommand) Run(ctx context.Context, args []string) error {
	fs := newFlagSet("reconcile", &c.ledger)
	fs.StringVar(&c.note, "note", "", "what you checked and found (required)")
	fs.BoolVar(&c.yes, "yes", false, "make the change (without it, only print what would be done)")
	rest, err := parseArgs(fs, args)
	if err != nil {
		return err
	}
	if len(rest) != 1 {
		return usagef("reconcile takes exactly one change ID, got %d arguments", len(rest))
	}
	id := rest[0]
	if strings.TrimSpace(c.note) == "" {
		return usagef("--note is required: say what you checked on the remote system and what you found")
	}
	l, err := c.main.open(ctx, c.ledger, c.yes)
	if err != nil {
		return err
	}
	defer l.Close()
	if strings.HasPrefix(id, "run_") {
		return c.reconcileRun(ctx, l, id)
	}
	ch, err := getChange(ctx, l, id)
	if err != nil {
		return err
	}
	to, ok := reconciledStatus(ch.Status)
	if !ok {
		return fmt.Errorf("change %s cannot be reconciled (status: %s): only applying and undoing changes can; nothing was changed", ch.ID, ch.Status)
	}
	by := "operator:" + username()
	out := c.main.Stdout
	if !c.yes {
		fmt.Fprintf(out, "would reconcile change %s (%s: %s)\n", ch.ID, clean(ch.Action), clean(ch.Summary))
		t := newTable(out, "  status", string(ch.Status)+" → "+string(to))
		t.row("  note", clean(c.note)+" ("+clean(by)+")")
		t.row("  last updated", when(ch.UpdatedAt, c.main.Now()))
		if err := t.flush(); err != nil {
			return err
		}
		fmt.Fprintln(out, "dry run: nothing was changed; run again with --yes to reconcile it")
		return errDryRun
	}
	done, err := l.Reconcile(ctx, ch.ID, c.note, by)
	if err != nil {
		return err
	}
	fmt.Fprintf(out, "reconciled change %s: %s → %s (note: %s)\n", done.ID, ch.Status, done.Status, clean(done.Note))
	return nil
}

// reconcileRun closes a run whose undo was interrupted: undoing becomes
// partially_undone, with the note in its stored report.
func (c *ReconcileCommand) reconcileRun(ctx context.Context, l *ledger.Ledger, id string) error {
	r, err := l.Run(ctx, id)
	if err != nil {
		if errors.Is(err, ledger.ErrNotFound) {
			return fmt.Errorf("run %s not found (check the ID with: mcp-changeset runs)", id)
		}
		return err
	}
	if r.Status != ledger.RunUndoing {
		return fmt.Errorf("run %s cannot be reconciled (status: %s): only a run left undoing can; nothing was changed", r.ID, r.Status)
	}
	by := "operator:" + username()
	out := c.main.Stdout
	if !c.yes {
		fmt.Fprintf(out, "would reconcile run %s (%s)\n", r.ID, clean(r.Label))
		t := newTable(out, "  status", string(r.Status)+" → "+string(ledger.RunPartiallyUndone))
		t.row("  note", clean(c.note)+" ("+clean(by)+")")
		t.row("  last updated", when(r.UpdatedAt, c.main.Now()))
		if err := t.flush(); err != nil {
			return err
		}
		fmt.Fprintln(out, "dry run: nothing was changed; run again with --yes to reconcile it")
		return errDryRun
	}
	done, err := l.ReconcileRun(ctx, r.ID, c.note, by)
	if err != nil {
		return err
	}
	fmt.Fprintf(out, "reconciled run %s: %s → %s\n", done.ID, r.Status, done.Status)
	return nil
}

// reconciledStatus is the status Reconcile moves a change in status s to.
func reconciledStatus(s ledger.Status) (ledger.Status, bool) {
	switch s {
	case ledger.Applying:
		return ledger.ApplyFailed, true
	case ledger.Undoing:
		return ledger.UndoFailed, true
	}
	return "", false
}

// username names the operator running the command, for the ledger.
func username() string {
	if u, err := user.Current(); err == nil && u.Username != "" {
		return u.Username
	}
	if name := os.Getenv("USER"); name != "" {
		return name
	}
	return "uid" + strconv.Itoa(os.Getuid())
}

// Usage returns the help text of reconcile.
func (c *ReconcileCommand) Usage() string {
	return `Usage: mcp-changeset reconcile ID --note TEXT [--yes]

Close a change that a process left in flight: it died or was cancelled
while applying or undoing, so the ledger cannot know whether the write
happened. Check the resource first, then reconcile: applying becomes
apply_failed and undoing becomes undo_failed, with your note and
"operator:<your user name>" stored beside it. Any other status is refused.

Given a run ID, closes a run whose undo was interrupted (left undoing):
it becomes partially_undone, with your note in its stored report.
Reconcile its changes left undoing first.

Without --yes, prints what it would do, changes nothing and exits with
status 2 (the ledger is opened read-only).

Options:

	--note TEXT    what you checked and what you found (required)
	--yes          reconcile the change
	--ledger L     the ledger (default $` + LedgerEnv + `)

Examples:

	mcp-changeset list --status applying,undoing
	mcp-changeset reconcile chg_3f9a1c0d2b7e4a6f8c11 --note "checked the repo: label not added"
	mcp-changeset reconcile chg_3f9a1c0d2b7e4a6f8c11 --note "checked the repo: label not added" --yes
`
}
