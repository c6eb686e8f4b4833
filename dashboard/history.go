package dashboard

import (
	"context"
	"strconv"
	"strings"
	"unicode/utf8"

	"github.com/mcp-changeset/changeset-go/ledger"
)

// A timeline is read from the ledger's history (Ledger.History): one line
// per transition of a change or a run, in the order they committed, with
// who made it, when, and the entry's note. The history holds exactly the
// transitions the rows went through, so the timeline never reconstructs
// a story from a row's last state.

// maxTimeline caps the transitions one page of a timeline shows: the
// newest, with a link to the earlier ones.
const maxTimeline = 100

// maxChangeTimeline bounds a change's own timeline. The state machine has
// no cycle, so a change makes at most five transitions; the bound is there
// so that a damaged ledger cannot make the page grow.
const maxChangeTimeline = 50

// maxNote is how much of a history entry's note a timeline shows.
const maxNote = 300

// event is one line of a timeline.
type event struct {
	Seq      int64
	When     *stamp
	Kind     string // for the dot's colour: started, previewed, claimed, applied, failed, undone, expired, reopened
	Text     string
	ChangeID string
	By       *actor
	Note     string
}

// timelineView is a page of a timeline: Events oldest first, the newest
// page unless Later says there are newer transitions.
type timelineView struct {
	Events []event
	// Earlier counts the transitions before the first shown; EarlierCursor
	// is the value of the "tl" query parameter that shows them.
	Earlier       int
	EarlierCursor int64
	// Later says transitions after the last shown exist (this is not the
	// newest page).
	Later bool
	// Path is the page the timeline's links lead to ("" on a change's
	// page, whose timeline needs no links).
	Path string
}

// runTimeline reads the history of run id and returns the page of at
// most maxTimeline transitions that ends before the entry with Seq
// before (0: the newest page). names gives each change's summary. It also
// returns the run's first entry, which names who started it (nil for a
// run from before the history existed).
func (d *Dashboard) runTimeline(ctx context.Context, id string, before int64, names map[string]string) (timelineView, *ledger.HistoryEntry, error) {
	entries, err := d.guard.Ledger().History(ctx, ledger.HistoryFilter{RunID: id})
	if err != nil {
		return timelineView{}, nil, err
	}
	var first *ledger.HistoryEntry
	for i, e := range entries {
		if e.ChangeID == "" && e.From == "" {
			first = &entries[i]
			break
		}
	}
	end := len(entries)
	if before > 0 {
		end = 0
		for end < len(entries) && entries[end].Seq < before {
			end++
		}
	}
	start := max(0, end-maxTimeline)
	tv := timelineView{Later: end < len(entries), Earlier: start, Path: "/runs/" + id}
	if start > 0 {
		tv.EarlierCursor = entries[start].Seq
	}
	v := d.viewer()
	for _, e := range entries[start:end] {
		tv.Events = append(tv.Events, v.event(e, names[e.ChangeID]))
	}
	return tv, first, nil
}

// changeTimeline reads the history of change c.
func (d *Dashboard) changeTimeline(ctx context.Context, c *ledger.Change) (timelineView, error) {
	entries, err := d.guard.Ledger().History(ctx, ledger.HistoryFilter{ChangeID: c.ID, Limit: maxChangeTimeline + 1})
	if err != nil {
		return timelineView{}, err
	}
	tv := timelineView{}
	if len(entries) > maxChangeTimeline {
		entries, tv.Later = entries[:maxChangeTimeline], true
	}
	v := d.viewer()
	for _, e := range entries {
		tv.Events = append(tv.Events, v.event(e, ""))
	}
	return tv, nil
}

// timelineCursor reads the optional "tl" query parameter: the sequence
// number before which the timeline's page ends, or 0 for the newest page.
func timelineCursor(s string) int64 {
	n, err := strconv.ParseInt(s, 10, 64)
	if err != nil || n <= 0 {
		return 0
	}
	return n
}

// event words one history entry; what names the change (its summary or
// action), empty for a run's own entry or on the change's own page.
func (v viewer) event(e ledger.HistoryEntry, what string) event {
	ev := event{Seq: e.Seq, When: v.stamp(e.At), ChangeID: e.ChangeID, By: parseActor(e.By), Note: visible(cutNote(e.Note))}
	if e.ApprovalID != "" {
		ev.Kind, ev.Text, ev.Note = approvalWords(e)
		ev.Note = visible(cutNote(ev.Note))
		if what != "" {
			ev.Text += ": " + what
		}
		return ev
	}
	if e.ChangeID == "" {
		ev.Kind, ev.Text = runWords(e.From, ledger.RunStatus(e.To))
		return ev
	}
	ev.Kind, ev.Text = changeWords(e.From, ledger.Status(e.To))
	if to := ledger.Status(e.To); to == ledger.ApplyFailed || to == ledger.UndoFailed {
		// A failure's note is its kind: say it in words instead.
		if kind, text, ok := failureWords(to, ledger.Failure(e.Note)); ok {
			ev.Kind, ev.Text, ev.Note = kind, text, ""
		}
	}
	if what != "" {
		ev.Text += ": " + what
	}
	return ev
}

// changeWords says what a change's move to to means.
func changeWords(from string, to ledger.Status) (kind, text string) {
	switch to {
	case ledger.Pending:
		return "previewed", "Previewed"
	case ledger.Applying:
		return "claimed", "Apply started"
	case ledger.Applied:
		if from == string(ledger.Pending) {
			return "applied", "Applied (in one transaction)"
		}
		return "applied", "Applied"
	case ledger.ApplyFailed:
		return "failed", "Apply failed"
	case ledger.Expired:
		return "expired", "Expired without being applied"
	case ledger.Undoing:
		return "claimed", "Undo started"
	case ledger.Undone:
		return "undone", "Undone"
	case ledger.UndoFailed:
		return "failed", "Undo failed"
	case ledger.Declined:
		return "failed", "Declined; never applied"
	}
	return "other", "Moved to " + label(visible(string(to)))
}

// failureWords says what a failure of kind f means on a timeline; ok is
// false for a note that is not a failure kind.
func failureWords(to ledger.Status, f ledger.Failure) (kind, text string, ok bool) {
	verb := "Apply"
	if to == ledger.UndoFailed {
		verb = "Undo"
	}
	switch f {
	case ledger.FailureStateChanged:
		if to == ledger.UndoFailed {
			return "refused", "Undo refused: the resource changed after the apply; nothing was written", true
		}
		return "refused", "Apply refused: the state changed since the preview; nothing was written", true
	case ledger.FailureError:
		return "failed", verb + " failed: the operation returned an error", true
	case ledger.FailureResultTooLarge:
		return "failed", "Applied, but the result was too large to keep (no undo)", true
	case ledger.FailureInterrupted:
		return "failed", verb + " interrupted; reconciled by an operator", true
	}
	return "", "", false
}

// approvalWords says what an approval's entry means: its request (the
// note is the kind), a person's decision (the note is "approve" or
// "decline", then ": " and their note), its use or its expiry. It returns
// the note to show: the person's own, if any.
func approvalWords(e ledger.HistoryEntry) (kind, text, note string) {
	verdict, own, _ := strings.Cut(e.Note, ": ")
	switch to := ledger.ApprovalStatus(e.To); {
	case e.From == "":
		return "previewed", "Approval requested (" + label(visible(e.Note)) + ")", ""
	case to == ledger.ApprovalWaiting && verdict == string(ledger.Approve):
		return "claimed", "Approved; more people must approve", own
	case to == ledger.ApprovalApproved:
		return "applied", "Approved", own
	case to == ledger.ApprovalDeclined:
		return "failed", "Declined", own
	case to == ledger.ApprovalUsed:
		return "claimed", "Approval used", ""
	case to == ledger.ApprovalExpired:
		return "expired", "Approval expired, undecided or unused", ""
	}
	return "other", "Approval moved to " + label(visible(e.To)), e.Note
}

// runWords says what a run's move to to means.
func runWords(from string, to ledger.RunStatus) (kind, text string) {
	switch {
	case to == ledger.RunOpen && from == "":
		return "started", "Run started"
	case to == ledger.RunOpen:
		return "reopened", "Run undo stopped; the run is open again"
	case to == ledger.RunUndoing:
		return "claimed", "Run undo started"
	case to == ledger.RunUndone:
		return "undone", "Run undone"
	case to == ledger.RunPartiallyUndone:
		return "undone", "Run partly undone"
	}
	return "other", "Run moved to " + label(visible(string(to)))
}

func label(s string) string { return strings.ReplaceAll(s, "_", " ") }

// cutNote shortens a note to maxNote bytes, on a rune boundary.
func cutNote(s string) string {
	if len(s) <= maxNote {
		return s
	}
	cut := maxNote
	for cut > 0 && !utf8.RuneStart(s[cut]) {
		cut--
	}
	return s[:cut] + "…"
}
