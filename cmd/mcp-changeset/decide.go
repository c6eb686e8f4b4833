package main

import (
	"context"
	"errors"
	"fmt"
	"io"
	"strings"
	"time"
	"unicode"

	"github.com/mcp-changeset/changeset-go/ledger"
)

// DecideCommand is approve and decline: a person's decision on one
// approval, recorded as person:NAME. Whoever can run the command on the
// ledger is trusted to say who they are. Without --yes it only prints what
// would happen.
type DecideCommand struct {
	main    *Main
	verdict ledger.Verdict

	ledger string
	as     string
	note   string
	yes    bool
}

// Run parses args and records the decision on the approval they name.
func (c *DecideCommand) Run(ctx context.Context, args []string) error {
	name := string(c.verdict)
	fs := newFlagSet(name, &c.ledger)
	fs.StringVar(&c.as, "as", "", "your name, recorded as person:NAME (required)")
	fs.StringVar(&c.note, "note", "", "a note for the agent and the history")
	fs.BoolVar(&c.yes, "yes", false, name+" (without it, only print what would happen)")
	rest, err := parseArgs(fs, args)
	if err != nil {
		return err
	}
	if len(rest) != 1 {
		return usagef("%s takes exactly one approval ID, got %d arguments", name, len(rest))
	}
	id := rest[0]
	person, err := personName(c.as)
	if err != nil {
		return err
	}
	if len(c.note) > ledger.MaxApprovalNote {
		return usagef("--note is %d bytes; keep it to %d", len(c.note), ledger.MaxApprovalNote)
	}
	l, err := c.main.open(ctx, c.ledger, c.yes)
	if err != nil {
		return err
	}
	defer l.Close()
	a, err := l.Approval(ctx, id)
	if errors.Is(err, ledger.ErrNotFound) {
		return fmt.Errorf("approval %s not found in %s (check the ID with: mcp-changeset approvals); nothing was changed", clean(id), l.Location())
	}
	if err != nil {
		return err
	}
	now := c.main.Now()
	v, err := viewApproval(ctx, l, a, now)
	if err != nil {
		return err
	}
	out := c.main.Stdout
	if !c.yes {
		if err := refusal(a, a.StatusAt(now), nil); err != nil {
			return err
		}
		decisions, err := l.Decisions(ctx, a.ID)
		if err != nil {
			return err
		}
		for _, d := range decisions {
			if d.Person == person {
				return alreadyDecided(a, d)
			}
		}
		fmt.Fprintf(out, "would %s approval %s as %s\n", name, a.ID, clean(person))
		c.describe(out, v, person)
		fmt.Fprintf(out, "dry run: nothing was changed; run again with --yes to %s\n", name)
		return errDryRun
	}
	done, err := l.Decide(ctx, ledger.Decision{ApprovalID: a.ID, Person: person, Verdict: c.verdict, Note: c.note})
	if err != nil {
		if errors.Is(err, ledger.ErrDecided) {
			if decisions, derr := l.Decisions(ctx, a.ID); derr == nil {
				for _, d := range decisions {
					if d.Person == person {
						return alreadyDecided(a, d)
					}
				}
			}
		}
		if done != nil {
			if r := refusal(done, done.StatusAt(now), err); r != nil {
				return r
			}
		}
		return err
	}
	fmt.Fprintf(out, "%s approval %s as %s: %s\n", pastTense(c.verdict), done.ID, clean(person), outcome(done, v))
	return nil
}

// describe prints what the decision would do, as a two-column table.
func (c *DecideCommand) describe(w io.Writer, v approvalView, person string) {
	now := c.main.Now()
	t := newTable(w, "  action", clean(orDash(v.Action))+" ("+clean(v.target())+")")
	t.row("  summary", orDash(clean(v.Summary)))
	t.row("  requested by", clean(v.RequestedBy))
	next := v.Approvals
	result := ""
	switch {
	case c.verdict == ledger.Decline && v.Kind == string(ledger.ApproveApply):
		result = "declined: the change ends declined and is never applied"
	case c.verdict == ledger.Decline:
		result = "declined: the agent's " + v.Action + " is refused; nothing else changes"
	case next+1 >= v.Needed:
		next++
		result = "approved: the agent's " + v.Action + " may go ahead"
	default:
		next++
		result = fmt.Sprintf("still waiting for %s", morePeople(v.Needed-next))
	}
	if c.verdict == ledger.Decline {
		t.row("  approvals", fmt.Sprintf("%d of %d so far; %s", v.Approvals, v.Needed, result))
	} else {
		t.row("  approvals", fmt.Sprintf("%d of %d → %d of %d; %s", v.Approvals, v.Needed, next, v.Needed, result))
	}
	if c.note != "" {
		t.row("  note", clean(c.note)+" ("+clean(person)+")")
	}
	t.row("  deadline", when(time.Time(v.Deadline), now))
	t.flush()
}

// outcome says where an approval stands after a decision on it; before
// is its view from before.
func outcome(a *ledger.Approval, before approvalView) string {
	switch a.Status {
	case ledger.ApprovalApproved:
		return fmt.Sprintf("approved (%d of %d); the agent's %s of %s may go ahead", a.Approvals, a.Needed, before.Action, before.target())
	case ledger.ApprovalDeclined:
		if a.Kind == ledger.ApproveApply {
			return "declined; change " + a.ChangeID + " is declined and will not be applied"
		}
		return "declined; the agent's " + before.Action + " of " + before.target() + " is refused"
	}
	return fmt.Sprintf("%d of %d approved; waiting for %s", a.Approvals, a.Needed, morePeople(a.Needed-a.Approvals))
}

// refusal is the operator's error for a decision on a, found in status s,
// or nil when s is waiting. cause is the ledger's error, if any, kept in
// the chain.
func refusal(a *ledger.Approval, s ledger.ApprovalStatus, cause error) error {
	if cause == nil {
		cause = errors.New(string(s))
	}
	var why string
	switch s {
	case ledger.ApprovalWaiting:
		return nil
	case ledger.ApprovalExpired:
		why = "expired at " + localTime(a.Deadline) + ": the agent must ask again (a new preview or undo call makes a new approval)"
	case ledger.ApprovalUsed:
		why = "was used already by " + a.UsedBy + " at " + localTime(a.UsedAt)
	case ledger.ApprovalDeclined:
		why = "was declined by " + a.DecidedBy + " at " + localTime(a.DecidedAt)
	case ledger.ApprovalApproved:
		why = fmt.Sprintf("is already approved (%d of %d, the last by %s)", a.Approvals, a.Needed, a.DecidedBy)
	}
	return &refusedError{msg: "approval " + a.ID + " " + clean(why) + "; nothing was changed", cause: cause}
}

// alreadyDecided is the error for a person deciding an approval twice.
func alreadyDecided(a *ledger.Approval, d ledger.Decision) error {
	return fmt.Errorf("%s already decided approval %s (%s at %s); a person decides an approval once, and approving twice counts once; nothing was changed",
		clean(d.Person), a.ID, d.Verdict, localTime(d.At))
}

// refusedError is a decision the ledger refused, in the operator's words,
// with the ledger's error kept in the chain for errors.Is.
type refusedError struct {
	msg   string
	cause error
}

func (e *refusedError) Error() string { return e.msg }
func (e *refusedError) Unwrap() error { return e.cause }

// morePeople says how many more people must approve: "1 more person",
// "2 more people".
func morePeople(n int) string {
	if n == 1 {
		return "1 more person"
	}
	return fmt.Sprintf("%d more people", n)
}

// personName returns the person a --as value names, person:NAME. A
// leading "person:" is accepted and not doubled.
func personName(as string) (string, error) {
	name := strings.TrimSpace(strings.TrimPrefix(strings.TrimSpace(as), "person:"))
	switch {
	case name == "":
		return "", usagef("--as is required: say who you are, e.g. --as alice (recorded as person:alice)")
	case len(name) > 100:
		return "", usagef("--as is %d bytes; keep the name to 100", len(name))
	case strings.ContainsFunc(name, unicode.IsControl):
		return "", usagef("--as holds control characters; give a plain name")
	}
	return "person:" + name, nil
}

// pastTense is "approved" or "declined".
func pastTense(v ledger.Verdict) string {
	if v == ledger.Decline {
		return "declined"
	}
	return "approved"
}

// Usage returns the help text of approve or decline.
func (c *DecideCommand) Usage() string {
	if c.verdict == ledger.Decline {
		return `Usage: mcp-changeset decline APPROVAL --as NAME [--note TEXT] [--yes]

Decline an approval that waits for people (see "mcp-changeset approvals"):
the agent's apply, undo or run undo it was asked for is refused, with your
name and note. A declined apply ends its change in the status declined; a
declined undo leaves the change or run as it is. The decision is recorded
in the history as person:NAME. Whoever can run this command on the ledger
is trusted to give their own name.

A person decides an approval once. An approval that is expired, used,
declined or already approved is refused (exit 1).

Without --yes, prints what it would do, changes nothing and exits with
status 2 (the ledger is opened read-only).

Options:

	--as NAME      your name, recorded as person:NAME (required)
	--note TEXT    why: shown to the agent and kept in the history
	--yes          decline
	--ledger L     the ledger (default $` + LedgerEnv + `)

Examples:

	mcp-changeset decline apr_3f9a1c0d2b7e4a6f8c11 --as alice --note "not on a Friday"
	mcp-changeset decline apr_3f9a1c0d2b7e4a6f8c11 --as alice --note "not on a Friday" --yes
`
	}
	return `Usage: mcp-changeset approve APPROVAL --as NAME [--note TEXT] [--yes]

Approve an approval that waits for people (see "mcp-changeset approvals"),
recorded in the history as person:NAME. Once as many distinct people as it
needs have approved, the agent's apply, undo or run undo may go ahead, once,
before the approval's deadline. Whoever can run this command on the ledger
is trusted to give their own name.

A person decides an approval once: approving twice counts once and is
refused. An approval that is expired, used, declined or already approved
is refused (exit 1).

Without --yes, prints what it would do, changes nothing and exits with
status 2 (the ledger is opened read-only).

Options:

	--as NAME      your name, recorded as person:NAME (required)
	--note TEXT    a note for the history
	--yes          approve
	--ledger L     the ledger (default $` + LedgerEnv + `)

Examples:

	mcp-changeset approvals
	mcp-changeset approve apr_3f9a1c0d2b7e4a6f8c11 --as alice
	mcp-changeset approve apr_3f9a1c0d2b7e4a6f8c11 --as alice --yes
`
}
