package changeset

import (
	"fmt"
	"strconv"
	"strings"
	"unicode"
	"unicode/utf8"

	"github.com/mcp-changeset/changeset-go/internal/diffview"
	"github.com/mcp-changeset/changeset-go/internal/token"
	"github.com/mcp-changeset/changeset-go/ledger"
)

// The approval question is read by a person and built from text an agent
// may have chosen: a summary, field names, values, warnings, a run's label.
// Such text must not be able to change how the question reads. Before any
// of it goes into a message, neutralize makes every character that could
// start a new line, reorder the text around it (bidirectional controls) or
// hide itself (zero-width and other format characters, terminal escapes)
// visible, and clip cuts long text from the middle so that both of its ends
// stay in view.
//
// The limits below are in bytes of UTF-8, which is never less than the
// number of characters a client counts, in code points or UTF-16 units.
const (
	// maxMessageBytes bounds a whole approval message. The contract is
	// "under 4,000 characters".
	maxMessageBytes = 3900
	// maxValueBytes bounds one rendered value of a diff.
	maxValueBytes = 240
	// maxNameBytes bounds a field name, an action or an ID.
	maxNameBytes = 80
	// maxTextBytes bounds a summary, a warning, a reason or a label.
	maxTextBytes = 300
)

// neutralize returns s as a person should see it inside one line of a
// message: a line feed becomes "⏎", a tab a space, and every other
// character of the Unicode categories Cc (controls, such as ESC), Cf
// (format: bidirectional controls such as U+202E, zero-width characters,
// the byte order mark), Zl and Zp (line and paragraph separators) becomes
// a placeholder naming it, such as "<U+202E>". Bytes that are not valid
// UTF-8 become "<invalid byte>". Everything else is kept as it is.
func neutralize(s string) string {
	var b strings.Builder
	for _, u := range displayUnits(s) {
		b.WriteString(u)
	}
	return b.String()
}

// clip neutralizes s and, if the result is longer than max bytes, keeps
// its head and its tail and puts "… [N characters omitted] …" between
// them, N counting the characters of s left out. The result is at most
// max bytes long (max must leave room for the marker).
func clip(s string, max int) string {
	units := displayUnits(s)
	total := 0
	for _, u := range units {
		total += len(u)
	}
	if total <= max {
		return strings.Join(units, "")
	}
	// Size the marker for the largest count it could show.
	half := (max - len(omitted(len(units)))) / 2
	head, headLen := 0, 0
	for head < len(units) && headLen+len(units[head]) <= half {
		headLen += len(units[head])
		head++
	}
	tail, tailLen := len(units), 0
	for tail > head && tailLen+len(units[tail-1]) <= half {
		tailLen += len(units[tail-1])
		tail--
	}
	return strings.Join(units[:head], "") + omitted(tail-head) + strings.Join(units[tail:], "")
}

func omitted(n int) string {
	noun := "characters"
	if n == 1 {
		noun = "character"
	}
	return fmt.Sprintf("… [%d %s omitted] …", n, noun)
}

// displayUnits splits s into what a person sees of each of its characters
// (see neutralize): one entry per character, or per invalid byte.
func displayUnits(s string) []string {
	units := make([]string, 0, len(s))
	for i, r := range s {
		if r == utf8.RuneError {
			if _, size := utf8.DecodeRuneInString(s[i:]); size <= 1 {
				units = append(units, "<invalid byte>")
				continue
			}
		}
		units = append(units, displayRune(s, i, r))
	}
	return units
}

// displayRune is the visible form of the character r at s[i:].
func displayRune(s string, i int, r rune) string {
	switch {
	case r == '\n':
		return "⏎"
	case r == '\t':
		return " "
	case unicode.In(r, unicode.Cc, unicode.Cf, unicode.Zl, unicode.Zp):
		return placeholder(r)
	}
	return s[i : i+utf8.RuneLen(r)]
}

// placeholder names a character: "<U+202E>".
func placeholder(r rune) string {
	h := strings.ToUpper(strconv.FormatInt(int64(r), 16))
	for len(h) < 4 {
		h = "0" + h
	}
	return "<U+" + h + ">"
}

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
