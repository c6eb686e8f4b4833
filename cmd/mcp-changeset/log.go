package main

import (
	"context"
	"encoding/json"
	"fmt"
	"strconv"
	"time"

	"github.com/mcp-changeset/changeset-go/ledger"
)

// defaultLimit bounds every listing that is not told otherwise (log,
// list): a ledger of years must not print years at once.
const defaultLimit = 200

// LogCommand prints the history of transitions, oldest first: every move
// of a change or run, who made it and when. It opens the ledger read-only.
type LogCommand struct {
	main *Main

	ledger   string
	since    time.Duration
	change   string
	run      string
	approval string
	by       string
	after    int64
	limit    int
	json     bool
}

// historyView is one history entry as log prints it. Its JSON field names
// are part of the command's contract (docs/cli.md).
type historyView struct {
	Seq      int64    `json:"seq"`
	At       jsonTime `json:"at"`
	ChangeID string   `json:"change_id"`
	RunID    string   `json:"run_id"`
	From     string   `json:"from"`
	To       string   `json:"to"`
	By       string   `json:"by"`
	Note     string   `json:"note"`
	// ApprovalID is set on the entries of an approval: From and To are
	// then the approval's statuses (waiting, approved, declined, expired,
	// used), not the change's or run's.
	ApprovalID string `json:"approval_id"`
	// Removed is, on a prune's entry, how many entries it deleted.
	Removed int `json:"removed"`
	// Hash chains the entry to the ones before it (mcp-changeset verify).
	Hash string `json:"hash"`
}

func viewHistory(e ledger.HistoryEntry) historyView {
	return historyView{Seq: e.Seq, At: jsonTime(e.At), ChangeID: e.ChangeID, RunID: e.RunID,
		From: e.From, To: e.To, By: e.By, Note: e.Note, ApprovalID: e.ApprovalID, Removed: e.Removed, Hash: e.Hash.String()}
}

// statusCell is a status of entry e for a human table: an approval's
// statuses read "approval:approved", so that they are not taken for the
// change's; "-" for none.
func statusCell(e ledger.HistoryEntry, status string) string {
	if status == "" {
		return "-"
	}
	if e.ApprovalID != "" {
		return "approval:" + clean(status)
	}
	return clean(status)
}

// Run parses args and prints the entries they select.
func (c *LogCommand) Run(ctx context.Context, args []string) error {
	fs := newFlagSet("log", &c.ledger)
	fs.Var(durationFlag{&c.since}, "since", "only entries of the last D (90m, 24h, 7d)")
	fs.StringVar(&c.change, "change", "", "only the entries of this change")
	fs.StringVar(&c.run, "run", "", "only the entries of this run and of its changes")
	fs.StringVar(&c.approval, "approval", "", "only the entries of this approval")
	fs.StringVar(&c.by, "by", "", "only the entries made by this actor (agent:NAME, person:NAME, operator:NAME)")
	fs.Int64Var(&c.after, "after", 0, "only the entries after this sequence number (to read on)")
	fs.IntVar(&c.limit, "limit", defaultLimit, "print at most N entries; 0 for all")
	fs.BoolVar(&c.json, "json", false, "print one JSON object per line")
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
	if c.after < 0 {
		return usagef("--after must be a sequence number from a previous log, got %d", c.after)
	}
	l, err := c.main.open(ctx, c.ledger, false)
	if err != nil {
		return err
	}
	defer l.Close()

	now := c.main.Now()
	f := ledger.HistoryFilter{ChangeID: c.change, RunID: c.run, ApprovalID: c.approval, By: c.by, After: c.after}
	if c.since > 0 {
		f.Since = now.Add(-c.since)
	}
	if c.limit > 0 {
		f.Limit = c.limit + 1 // one more tells whether the list was cut
	}
	entries, err := l.History(ctx, f)
	if err != nil {
		return err
	}
	cut := c.limit > 0 && len(entries) > c.limit
	if cut {
		entries = entries[:c.limit]
		defer fmt.Fprintf(c.main.Stderr, "mcp-changeset log: showing the first %d entries; more follow (read on with --after %d, or narrow with --since, --change, --run or --by)\n",
			c.limit, entries[len(entries)-1].Seq)
	}
	if c.json {
		enc := json.NewEncoder(c.main.Stdout)
		for _, e := range entries {
			if err := enc.Encode(viewHistory(e)); err != nil {
				return err
			}
		}
		return nil
	}
	if len(entries) == 0 {
		fmt.Fprintln(c.main.Stdout, "no history")
		return nil
	}
	t := newTable(c.main.Stdout, "SEQ", "AT", "CHANGE", "RUN", "FROM", "TO", "BY", "NOTE")
	for _, e := range entries {
		t.row(strconv.FormatInt(e.Seq, 10), when(e.At, now), orDash(clean(e.ChangeID)), orDash(clean(e.RunID)),
			statusCell(e, e.From), statusCell(e, e.To), orDash(clean(e.By)), orDash(clean(truncate(e.Note, 60))))
	}
	return t.flush()
}

// Usage returns the help text of log.
func (c *LogCommand) Usage() string {
	return `Usage: mcp-changeset log [--since D] [--change ID] [--run ID] [--approval ID] [--by WHO] [--after SEQ] [--limit N] [--json]

Print the history of the ledger, oldest first: one line per transition of
a change or a run (preview, claim, apply, failure, expiry, undo,
reconcile) and of an approval (requested, each person's decision, used,
expired; its statuses read approval:waiting, approval:approved…), with its sequence number, when it happened (local time and
age), the change and run, the statuses it moved between, who made it and
a note (the kind of a failure, an operator's note). The ledger writes each
entry in the same transaction as the transition itself. A run's history
holds its changes' entries too. The ledger is opened read-only.

At most --limit entries are printed (default ` + strconv.Itoa(defaultLimit) + `); when there are more, a
note on stderr gives the --after value that reads on.

Options:

	--since D      only entries of the last D: 90m, 24h, 7d, 1d12h
	--change ID    only the entries of change ID
	--run ID       only the entries of run ID and of its changes
	--approval ID  only the entries of approval ID: who asked, who
	               approved or declined, its use
	--by WHO       only the entries made by WHO, exactly as the history
	               names them: agent:NAME, person:NAME, operator:NAME
	--after SEQ    only the entries after sequence number SEQ
	--limit N      print at most N entries (default ` + strconv.Itoa(defaultLimit) + `); 0 prints all
	--json         print one JSON object per line: seq, at, change_id,
	               run_id, from, to, by, note, approval_id, removed, hash
	--ledger L     the ledger (default $` + LedgerEnv + `)

Examples:

	# What happened in the last hour:
	mcp-changeset log --since 1h

	# Everything alice's agent did this week, for a script:
	mcp-changeset log --since 7d --by agent:alice --json | jq -r .change_id

	# The life of one run and its changes:
	mcp-changeset log --run run_3f9a1c0d2b7e4a6f8c11
`
}
