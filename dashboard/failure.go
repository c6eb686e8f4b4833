package dashboard

import (
	"encoding/json"

	changeset "github.com/mcp-changeset/changeset-go"
	"github.com/mcp-changeset/changeset-go/internal/diffview"
	"github.com/mcp-changeset/changeset-go/ledger"
)

// A failed change is worded by the kind of its failure (ledger.Failure),
// never by the Go type of its error: a person reads what happened and
// whether anything was written. A refusal that wrote nothing is not shown
// as a failure: it is the library doing its job.

// failureView is what a page says about a failed change.
type failureView struct {
	// Tone is the banner's look: "refused" (amber: the check refused and
	// nothing was written), "failed" (red) or "warn".
	Tone string
	// Title is one short sentence; Text explains it.
	Title, Text string
	// Expected is the state the check expected, when the ledger holds it
	// (an undo expects the state the apply left); Found is the state the
	// refusing check found, which the ledger keeps in the change's Before
	// for an apply and in UndoFound for an undo (FoundKnown). FoundWhen
	// is "apply" or "undo"; FoundMissing says why Found is not shown.
	Expected     string
	HasExpect    bool
	Found        string
	FoundKnown   bool
	FoundWhen    string
	FoundMissing string
}

// failureOf words c's failure, or returns nil when c has not failed.
func failureOf(c *ledger.Change) *failureView {
	if c.Status != ledger.ApplyFailed && c.Status != ledger.UndoFailed {
		return nil
	}
	undo := c.Status == ledger.UndoFailed
	fv := &failureView{Tone: "failed"}
	switch c.Failure {
	case ledger.FailureStateChanged:
		fv.Tone = "refused"
		if undo {
			fv.Title = "Undo refused: the resource changed after this change was applied; nothing was written."
			fv.Text = "Someone (or something) edited it since, and undoing would have overwritten that edit. Expected is the state the apply left; found is what the undo's check saw instead."
			fv.Expected, fv.HasExpect = pretty(c.After), len(c.After) > 0
			fv.Found, fv.FoundKnown, fv.FoundWhen = pretty(c.UndoFound), len(c.UndoFound) > 0, "undo"
			fv.FoundMissing = "Not kept by the ledger: the undo was refused before the ledger kept what its check found (ledger schema 7), or by the operation's own check."
		} else {
			fv.Title = "Refused: the state changed since the preview; nothing was written."
			fv.Text = "The apply checked the resource first, found it no longer as the preview saw it, and stopped before writing. Preview again to see the current state."
			fv.Found, fv.FoundKnown, fv.FoundWhen = pretty(c.Before), len(c.Before) > 0, "apply"
			fv.FoundMissing = "Not kept by the ledger: the operation's own check refused, before anything was written."
		}
		if !c.NothingWritten { // the library always knows for this kind; be honest if a row says otherwise
			fv.Tone = "warn"
			fv.Title += " (The ledger does not confirm that nothing was written.)"
		}
	case ledger.FailureError:
		fv.Title = "Failed: the operation returned an error."
		if undo {
			fv.Title = "Undo failed: the operation's undo returned an error."
		}
		fv.Text = "It may have written part of the change: check the resource. The error's text is below, for operators."
		if c.NothingWritten {
			fv.Tone = "warn"
			fv.Text = "Nothing was written: the change ran in the ledger's transaction, which rolled back. The error's text is below, for operators."
		}
	case ledger.FailureResultTooLarge:
		fv.Tone = "warn"
		fv.Title = "Applied, but its result was too large to keep, so it cannot be undone here."
		fv.Text = "The operation wrote the change; the ledger refused to store its result, which an undo would need."
	case ledger.FailureInterrupted:
		fv.Title = "Interrupted: the server stopped while this change was in flight."
		fv.Text = "An operator reconciled it afterwards; their note is below. Whether it wrote depends on how far it got: check the resource."
		if c.NothingWritten {
			fv.Tone, fv.Text = "warn", "An operator reconciled it afterwards and recorded that nothing was written; their note is below."
		}
	default: // rows from before failure kinds were recorded
		fv.Title = "Failed."
		if undo {
			fv.Title = "Undo failed."
		}
		fv.Text = "The ledger does not say why (the row predates failure kinds). The error's text is below, for operators."
	}
	return fv
}

// badgeOf is the status a list shows for c: a refused apply or undo
// reads "apply refused", not "apply failed".
func badgeOf(c *ledger.Change) string {
	if c.Failure == ledger.FailureStateChanged && c.NothingWritten {
		switch c.Status {
		case ledger.ApplyFailed:
			return "apply_refused"
		case ledger.UndoFailed:
			return "undo_refused"
		}
	}
	return string(c.Status)
}

// driftRow is one field of a skipped change's drift: what the undo
// expected (the state the change left) and what it found.
type driftRow struct {
	Field           string
	Expected, Found value
}

// driftRows renders a report entry's drift by the diff rules of package
// diffview: nested objects show the nested fields that differ, null is
// null.
func driftRows(in []changeset.Drift) []driftRow {
	var out []driftRow
	for _, d := range in {
		if d.Field == "…" { // the report's own count of fields left out
			var more string
			json.Unmarshal(d.Found, &more)
			out = append(out, driftRow{Field: "…", Expected: value{Text: ""}, Found: value{Text: visible(more)}})
			continue
		}
		for _, l := range diffview.Lines(d.Field, "changed", d.Expected, d.Found) {
			field := l.Field
			if field == "" {
				field = "(the whole state)"
			}
			if d.Resource != "" { // a change of several resources: say which moved
				field = d.Resource + " · " + field
			}
			out = append(out, driftRow{Field: visible(field), Expected: sideOf(l.Before), Found: sideOf(l.After)})
		}
	}
	return out
}

// maxShownValue caps one side of a diff or drift row on a page.
const maxShownValue = 4 << 10
