package main

import (
	"context"
	"errors"
	"fmt"
	"strconv"
	"time"

	"github.com/mcp-changeset/changeset-go/ledger"
)

// ApprovalsCommand lists the approvals waiting for people, newest first:
// what each would let go ahead, who asked, how many people have approved
// of how many needed, and until when. It opens the ledger read-only.
type ApprovalsCommand struct {
	main *Main

	ledger string
	limit  int
	json   bool
}

// approvalView is an approval as approvals, approve and decline print it.
// It has no field for the hash the approval is bound to.
type approvalView struct {
	ApprovalID string `json:"approval_id"`
	// Kind is apply, undo or run_undo.
	Kind     string `json:"kind"`
	ChangeID string `json:"change_id"`
	RunID    string `json:"run_id"`
	// Action is what goes ahead once approved: the operation's name,
	// "undo <name>" or "undo_run"; Summary is the change's summary or the
	// run's label.
	Action      string `json:"action"`
	Summary     string `json:"summary"`
	RequestedBy string `json:"requested_by"`
	// Status is the approval's status now: an approval past its deadline
	// is expired, whatever its row says yet.
	Status    string   `json:"status"`
	Needed    int      `json:"needed"`
	Approvals int      `json:"approvals"`
	DecidedBy string   `json:"decided_by"`
	Note      string   `json:"note"`
	CreatedAt jsonTime `json:"created_at"`
	Deadline  jsonTime `json:"deadline"`
	DecidedAt jsonTime `json:"decided_at"`
}

// viewApproval builds the view of a, reading what it is for from l. A
// change or run deleted meanwhile leaves the action and summary empty.
func viewApproval(ctx context.Context, l *ledger.Ledger, a *ledger.Approval, now time.Time) (approvalView, error) {
	v := approvalView{
		ApprovalID: a.ID, Kind: string(a.Kind), ChangeID: a.ChangeID, RunID: a.RunID,
		RequestedBy: a.RequestedBy, Status: string(a.StatusAt(now)), Needed: a.Needed, Approvals: a.Approvals,
		DecidedBy: a.DecidedBy, Note: a.Note,
		CreatedAt: jsonTime(a.CreatedAt), Deadline: jsonTime(a.Deadline), DecidedAt: jsonTime(a.DecidedAt),
	}
	if a.ChangeID != "" {
		c, err := l.Change(ctx, a.ChangeID)
		if errors.Is(err, ledger.ErrNotFound) {
			return v, nil
		}
		if err != nil {
			return v, err
		}
		v.Action, v.Summary = c.Action, c.Summary
		if a.Kind == ledger.ApproveUndo {
			v.Action = "undo " + c.Action
		}
		return v, nil
	}
	v.Action = "undo_run"
	r, err := l.Run(ctx, a.RunID)
	if errors.Is(err, ledger.ErrNotFound) {
		return v, nil
	}
	if err != nil {
		return v, err
	}
	v.Summary = r.Label
	return v, nil
}

// target names what v is for: its change or its run.
func (v approvalView) target() string {
	if v.RunID != "" {
		return v.RunID
	}
	return v.ChangeID
}

// Run parses args and prints the waiting approvals.
func (c *ApprovalsCommand) Run(ctx context.Context, args []string) error {
	fs := newFlagSet("approvals", &c.ledger)
	fs.IntVar(&c.limit, "limit", defaultLimit, "print at most N approvals, the newest; 0 for all")
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
	now := c.main.Now()
	// The rows still marked waiting include those past their deadline
	// that nothing has moved to expired yet: page until enough are live.
	var (
		views []approvalView
		cut   bool
		f     = ledger.ApprovalFilter{Statuses: []ledger.ApprovalStatus{ledger.ApprovalWaiting}, Limit: 200}
	)
	for {
		page, err := l.Approvals(ctx, f)
		if err != nil {
			return err
		}
		for _, a := range page {
			if a.StatusAt(now) != ledger.ApprovalWaiting {
				continue
			}
			if c.limit > 0 && len(views) == c.limit {
				cut = true
				break
			}
			v, err := viewApproval(ctx, l, a, now)
			if err != nil {
				return err
			}
			views = append(views, v)
		}
		if cut || len(page) < f.Limit {
			break
		}
		last := page[len(page)-1]
		f.Before = &ledger.ChangeKey{CreatedAt: last.CreatedAt, ID: last.ID}
	}
	if cut {
		defer fmt.Fprintf(c.main.Stderr, "mcp-changeset approvals: showing the newest %d approvals; older ones wait too (raise --limit, or 0 for all)\n", c.limit)
	}
	if c.json {
		if views == nil {
			views = []approvalView{}
		}
		return writeJSON(c.main.Stdout, struct {
			Approvals []approvalView `json:"approvals"`
		}{views})
	}
	if len(views) == 0 {
		fmt.Fprintln(c.main.Stdout, "no approvals waiting")
		return nil
	}
	t := newTable(c.main.Stdout, "ID", "ACTION", "FOR", "APPROVED", "DEADLINE", "REQUESTED BY", "SUMMARY")
	for _, v := range views {
		t.row(clean(v.ApprovalID), clean(orDash(v.Action)), clean(v.target()),
			fmt.Sprintf("%d of %d", v.Approvals, v.Needed), when(time.Time(v.Deadline), now),
			clean(v.RequestedBy), orDash(clean(truncate(v.Summary, 50))))
	}
	return t.flush()
}

// Usage returns the help text of approvals.
func (c *ApprovalsCommand) Usage() string {
	return `Usage: mcp-changeset approvals [--limit N] [--json]

List the approvals waiting for people, newest first: the approval's ID,
what it lets go ahead (an operation's apply, "undo <operation>", or
undo_run), the change or run it is for, how many people have approved of
how many needed, its deadline (local time and how long is left), who asked
and the change's summary or the run's label. An approval past its deadline
is not listed: it can no longer be decided. At most --limit approvals are
printed (default ` + strconv.Itoa(defaultLimit) + `), with a note on stderr when more wait. The ledger
is opened read-only.

Approve or decline one with "mcp-changeset approve" or
"mcp-changeset decline".

Options:

	--limit N      print at most N approvals, the newest (default ` + strconv.Itoa(defaultLimit) + `); 0
	               prints all
	--json         print one JSON document instead of a table
	--ledger L     the ledger (default $` + LedgerEnv + `)

Examples:

	mcp-changeset approvals
	mcp-changeset show "$(mcp-changeset approvals --json | jq -r '.approvals[0].change_id')"
`
}
