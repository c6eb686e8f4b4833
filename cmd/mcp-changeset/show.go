package main

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"strings"
	"time"

	"github.com/mcp-changeset/changeset-go/ledger"
)

// ShowCommand prints one change: its diff, payload, result, snapshots,
// error text and history. It opens the ledger read-only and prints no
// digest.
type ShowCommand struct {
	main *Main

	ledger string
	json   bool
}

// Run parses args and prints the change they name.
func (c *ShowCommand) Run(ctx context.Context, args []string) error {
	fs := newFlagSet("show", &c.ledger)
	fs.BoolVar(&c.json, "json", false, "print one JSON document")
	rest, err := parseArgs(fs, args)
	if err != nil {
		return err
	}
	if len(rest) != 1 {
		return usagef("show takes exactly one change ID, got %d arguments", len(rest))
	}
	id := rest[0]
	l, err := c.main.open(ctx, c.ledger, false)
	if err != nil {
		return err
	}
	defer l.Close()
	ch, err := getChange(ctx, l, id)
	if err != nil {
		return err
	}
	// A change moves a handful of times; the limit only guards against
	// a damaged ledger.
	history, err := l.History(ctx, ledger.HistoryFilter{ChangeID: ch.ID, Limit: maxChangeHistory})
	if err != nil {
		return err
	}
	if c.json {
		return writeJSON(c.main.Stdout, struct {
			Change changeDetail `json:"change"`
		}{viewChangeDetail(ch, history)})
	}
	return c.print(c.main.Stdout, ch, history)
}

// getChange reads change id, with an operator's message when it is
// unknown.
func getChange(ctx context.Context, l *ledger.Ledger, id string) (*ledger.Change, error) {
	ch, err := l.Change(ctx, id)
	if errors.Is(err, ledger.ErrNotFound) {
		return nil, fmt.Errorf("change %s not found in %s (check the ID with: mcp-changeset list)", clean(id), l.Location())
	}
	return ch, err
}

// maxChangeHistory bounds the history show prints of one change.
const maxChangeHistory = 100

// print writes the human form of ch and its history.
func (c *ShowCommand) print(w io.Writer, ch *ledger.Change, history []ledger.HistoryEntry) error {
	now := c.main.Now()
	yesNo := map[bool]string{true: "yes", false: "no"}
	undoUntil := when(ch.UndoExpiresAt, now)
	if ch.Undoable && ch.UndoExpiresAt.IsZero() && !ch.AppliedAt.IsZero() {
		undoUntil = "no expiry"
	}
	// byWhom says when a step happened and who took it, or who claimed it
	// when it never completed (a failed apply or undo).
	byWhom := func(at time.Time, by string) string {
		switch {
		case by == "":
			return when(at, now)
		case at.IsZero():
			return "- (claimed by " + clean(by) + ", not completed)"
		}
		return when(at, now) + " by " + clean(by)
	}
	t := newTable(w, "change", clean(ch.ID))
	t.row("action", clean(ch.Action))
	t.row("status", clean(string(ch.Status)))
	t.row("summary", orDash(clean(ch.Summary)))
	t.row("resource", orDash(clean(ch.Resource)))
	t.row("run", orDash(clean(ch.RunID)))
	t.row("undoable", yesNo[ch.Undoable])
	t.row("transactional", yesNo[ch.Transactional])
	t.row("created", when(ch.CreatedAt, now))
	t.row("previewed by", orDash(clean(ch.PreviewedBy)))
	t.row("updated", when(ch.UpdatedAt, now))
	switch ch.Status {
	case ledger.Pending: // only a pending change can still be confirmed
		t.row("confirm by", when(ch.ExpiresAt, now))
	case ledger.Expired:
		t.row("expired", when(ch.ExpiresAt, now))
	}
	t.row("applied", byWhom(ch.AppliedAt, ch.AppliedBy))
	if ch.Status == ledger.Applied { // only an applied change can still be undone
		t.row("undo until", undoUntil)
	}
	t.row("undone", byWhom(ch.UndoneAt, ch.UndoneBy))
	t.row("error type", orDash(clean(ch.ErrorType)))
	if ch.Failure != "" {
		t.row("failure", failureWords(string(ch.Failure), ch.NothingWritten))
	}
	if len(ch.Resources) > 0 {
		t.row("resources", clean(strings.Join(ch.Resources, ", ")))
	}
	if len(ch.DependsOn) > 0 {
		t.row("depends on", clean(strings.Join(ch.DependsOn, ", ")))
	}
	if len(ch.RedactFields) > 0 {
		redacted := "marked: " + clean(strings.Join(ch.RedactFields, ", ")) + " (hidden once the change ends)"
		if !ch.RedactedAt.IsZero() {
			redacted = clean(strings.Join(ch.RedactFields, ", ")) + ": " + ledger.RedactedMark + " since " + when(ch.RedactedAt, now)
		}
		t.row("redacted", redacted)
	}
	if err := t.flush(); err != nil {
		return err
	}
	var sb strings.Builder
	if len(ch.Warnings) > 0 {
		sb.WriteString("\nwarnings:\n")
		for _, wr := range ch.Warnings {
			sb.WriteString("  - " + clean(wr) + "\n")
		}
	}
	sb.WriteString("\ndiff:\n")
	sb.WriteString(diffText(ledger.MaskRedacted(ch.Diff)))
	for _, v := range []struct {
		name string
		raw  json.RawMessage
	}{{"payload", ledger.MaskRedacted(ch.Payload)}, {"result", ch.Result}, {"before", ch.Before}, {"after", ch.After}, {"found by the refused undo", ch.UndoFound}} {
		if v.name == "found by the refused undo" && len(v.raw) == 0 {
			continue
		}
		sb.WriteString("\n" + v.name + ":\n" + indentJSON(v.raw, "  ") + "\n")
	}
	if ch.Error != "" {
		sb.WriteString("\nerror:\n" + indentText(ch.Error) + "\n")
	}
	if ch.Note != "" {
		sb.WriteString("\nnote:\n" + indentText(ch.Note) + "\n")
	}
	sb.WriteString("\nhistory:\n")
	if len(history) == 0 {
		sb.WriteString("  (none recorded)\n")
	}
	if _, err := io.WriteString(w, sb.String()); err != nil {
		return err
	}
	if len(history) == 0 {
		return nil
	}
	h := newTable(w, "  AT", "FROM", "TO", "BY", "NOTE")
	for _, e := range history {
		h.row("  "+when(e.At, now), statusCell(e, e.From), statusCell(e, e.To), orDash(clean(e.By)), orDash(clean(truncate(e.Note, 60))))
	}
	return h.flush()
}

// diffText renders a stored diff, one "field: before → after" line per
// entry.
func diffText(raw json.RawMessage) string {
	var entries []struct {
		Field  string          `json:"field"`
		Before json.RawMessage `json:"before"`
		After  json.RawMessage `json:"after"`
	}
	if err := json.Unmarshal(raw, &entries); err != nil {
		return indentJSON(raw, "  ") + "\n"
	}
	if len(entries) == 0 {
		return "  (no fields)\n"
	}
	var sb strings.Builder
	for _, e := range entries {
		fmt.Fprintf(&sb, "  %s: %s → %s\n", clean(e.Field), clean(string(orNull(e.Before))), clean(string(orNull(e.After))))
	}
	return sb.String()
}

// indentText indents every line of free text by two spaces.
func indentText(s string) string {
	return "  " + strings.ReplaceAll(cleanBlock(strings.TrimRight(s, "\n")), "\n", "\n  ")
}

// Usage returns the help text of show.
func (c *ShowCommand) Usage() string {
	return `Usage: mcp-changeset show ID [--json]

Show one change: its status and history (local times and ages, who
previewed, applied and undid it, and every transition the ledger's history
holds), the diff, the stored payload, the apply's result, the
before/after snapshots, the full error text and any operator note. The
ledger stores these in clear and this command prints them; it never prints
a token or a digest. The ledger is opened read-only.

Options:

	--json         print one JSON document instead of text
	--ledger L     the ledger (default $` + LedgerEnv + `)

Examples:

	mcp-changeset show chg_3f9a1c0d2b7e4a6f8c11
	mcp-changeset show chg_3f9a1c0d2b7e4a6f8c11 --json | jq .change.error
`
}

// failureWords says in plain words why a change failed.
func failureWords(f string, nothingWritten bool) string {
	var s string
	switch ledger.Failure(f) {
	case ledger.FailureStateChanged:
		s = "refused: the resource changed since it was checked"
	case ledger.FailureError:
		s = "the operation returned an error (see error)"
	case ledger.FailureResultTooLarge:
		s = "applied, but its result was too large to keep; no undo"
	case ledger.FailureInterrupted:
		s = "interrupted and reconciled by an operator"
	default:
		s = clean(f)
	}
	if nothingWritten {
		s += "; nothing was written"
	}
	return s
}
