package changeset

import (
	"fmt"
	"strings"

	"github.com/mcp-changeset/changeset-go/internal/diffview"
	"github.com/mcp-changeset/changeset-go/internal/token"
	"github.com/mcp-changeset/changeset-go/ledger"
)

// The approval question a person reads under user approval, composed from
// the change's or the run's stored record. Every piece of text in it that
// did not come from the library passes through neutralize and clip
// (sanitize.go), and the whole stays under maxMessageBytes.

// A section is a titled list in an approval message.
type section struct {
	title string   // e.g. "Fields (before → after):"
	noun  string   // what the items are, for "…and N more fields"
	items []string // already neutralized and clipped
}

// composeMessage joins a header, sections and a footer into a message of
// at most maxMessageBytes. Items that do not fit are counted instead of
// shown ("…and N more fields, not shown here"); every section's title and
// the footer always fit. The header must be short (clipped lines).
func composeMessage(header []string, sections []section, footer string) string {
	var b strings.Builder
	for _, h := range header {
		b.WriteString(h + "\n")
	}
	// reserve is the room the titles and "more" lines of sections[i:]
	// and the footer may need.
	reserve := func(i int) int {
		n := len(footer) + 2
		for _, s := range sections[i:] {
			n += len(s.title) + 2 + len(moreLine(len(s.items), s.noun))
		}
		return n
	}
	for i, s := range sections {
		if len(s.items) == 0 {
			continue
		}
		b.WriteString("\n" + s.title + "\n")
		limit := maxMessageBytes - reserve(i+1)
		for j, item := range s.items {
			line := "• " + item + "\n"
			need := len(line)
			if rest := len(s.items) - j - 1; rest > 0 {
				need += len(moreLine(rest, s.noun)) // room to stop after this one
			}
			if b.Len()+need > limit {
				b.WriteString(moreLine(len(s.items)-j, s.noun))
				break
			}
			b.WriteString(line)
		}
	}
	b.WriteString("\n" + footer)
	return b.String()
}

func moreLine(n int, noun string) string {
	return fmt.Sprintf("• …and %d more %s, not shown here\n", n, noun)
}

// diffItems renders one stored diff entry (see diffview.Decode) as lines
// "field: from → to" by the rules of package diffview (a nested object
// shows the nested fields that differ; a side that does not exist reads
// "(none)", null reads null). undo swaps the sides: it shows what the undo
// will do.
func diffItems(e diffview.Line, undo bool) []string {
	from, to, kind := e.Before, e.After, e.Kind
	if undo {
		from, to = to, from
		switch kind {
		case string(DiffAdded):
			kind = string(DiffRemoved)
		case string(DiffRemoved):
			kind = string(DiffAdded)
		}
	}
	var items []string
	for _, l := range diffview.Lines(e.Field, kind, from, to) {
		field := l.Field
		if field == "" {
			field = "(the whole value)"
		}
		items = append(items, clip(field, maxNameBytes)+": "+clip(diffview.Value(l.Before), maxValueBytes)+" → "+clip(diffview.Value(l.After), maxValueBytes))
	}
	return items
}

// changeMessage is the question for applying (purpose "apply") or undoing
// ("undo") a change, rendered from its ledger row alone.
func changeMessage(purpose string, c *ledger.Change) string {
	diff, _ := diffview.Decode(c.Diff)
	items := make([]string, 0, len(diff))
	for _, d := range diff {
		items = append(items, diffItems(d, purpose == token.PurposeUndo)...)
	}
	warnings := make([]string, 0, len(c.Warnings))
	for _, w := range c.Warnings {
		warnings = append(warnings, clip(w, maxTextBytes))
	}
	header := []string{"Apply this change?", ""}
	fields := section{"Fields (before → after):", "fields", items}
	notes := section{"Warnings:", "warnings", warnings}
	footer := "Answer yes only if you want this change made exactly as shown."
	if purpose == token.PurposeUndo {
		header[0] = "Undo this change?"
		fields.title = "Undoing it sets these fields (now → after the undo):"
		notes.title = "Not undone exactly:"
		footer = "Answer yes only if you want this change undone."
	}
	header = append(header,
		"Operation: "+clip(c.Action, maxNameBytes),
		"Summary: "+clip(c.Summary, maxTextBytes),
		"Change: "+clip(c.ID, maxNameBytes))
	if c.RunID != "" {
		header = append(header, "Part of run: "+clip(c.RunID, maxNameBytes))
	}
	return composeMessage(header, []section{fields, notes}, footer)
}

// runMessage is the question for undoing a run, rendered from the ledger's
// run row and the plan the dry run walk made.
func runMessage(r *ledger.Run, plan *RunReport) string {
	steps := func(list []RunStep) []string {
		out := make([]string, 0, len(list))
		for _, s := range list {
			out = append(out, clip(s.ChangeID, maxNameBytes)+" "+clip(s.Action, maxNameBytes)+": "+clip(s.Summary, maxTextBytes))
		}
		return out
	}
	notes := func(list []RunNote) []string {
		out := make([]string, 0, len(list))
		for _, n := range list {
			out = append(out, clip(n.ChangeID, maxNameBytes)+" "+clip(n.Action, maxNameBytes)+": "+clip(n.Reason, maxTextBytes))
		}
		return out
	}
	header := []string{"Undo the changes of this run?", "",
		"Run: " + clip(r.ID, maxNameBytes),
		"Label: " + clip(r.Label, maxTextBytes)}
	if len(plan.WillUndo) == 0 {
		header = append(header, "No change of this run will be undone; the run will only be closed.")
	}
	return composeMessage(header, []section{
		{"Will be undone, newest first:", "changes", steps(plan.WillUndo)},
		{"Need no write (the run itself brought them back):", "changes", steps(plan.NoNetChange)},
		{"Skipped, left as they are:", "changes", notes(plan.Skipped)},
		{"Cannot be undone exactly:", "notes", notes(plan.Irreversible)},
	}, "Answer yes only if you want these changes undone.")
}
