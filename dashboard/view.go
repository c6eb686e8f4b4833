package dashboard

import (
	"bytes"
	"encoding/json"
	"fmt"
	"maps"
	"slices"
	"strings"
	"time"
	"unicode"

	changeset "github.com/mcp-changeset/changeset-go"
	"github.com/mcp-changeset/changeset-go/internal/diffview"
	"github.com/mcp-changeset/changeset-go/ledger"
)

// The view types below are all a template ever sees. They are built field
// by field from ledger rows, so that the digests a row carries (token,
// payload, scope and state hashes) cannot reach a page by accident.

// stamp is a point in time as a page shows it: relative, with the absolute
// time for a title attribute.
type stamp struct {
	Rel, Abs, ISO string
}

// actor is who did something: "agent", "person:ana", "operator:bob".
type actor struct {
	Kind, Name string
	// Filter is the link to the changes this actor previewed, applied
	// or undid.
	Filter string
}

// value is one side of a diff: JSON text, or absent (the field did not
// exist).
type value struct {
	Text   string
	Absent bool
	Code   bool // a JSON value other than a string, shown as code
}

type diffRow struct {
	Field, Kind   string // Kind: added, removed or changed
	Before, After value
}

type runView struct {
	ID, Label, Status  string
	Created, Updated   *stamp // Updated: the run's or its newest change's last update
	StartedBy          *actor // who started the run (the lists only; nil: not recorded)
	UndoneBy           *actor
	Total              int
	ByAction, ByStatus []count
}

type count struct {
	Name string
	N    int
}

type changeView struct {
	ID, Action, Status, Summary, Resource, RunID string
	RunLabel                                     string // the label of its run (the list of changes only)
	Warnings                                     []string
	Diff                                         []diffRow
	Payload, Result, Before, After               string
	HasBefore, HasAfter                          bool
	ErrorType, Error, Note                       string
	Undoable, Transactional                      bool
	CanUndo                                      bool
	// Badge is the status as shown: a refused apply reads "apply
	// refused"; Failure words a failure by its kind.
	Badge                            string
	Failure                          *failureView
	UndoNote                         string // why it cannot be undone here
	PreviewedBy, AppliedBy, UndoneBy *actor
	Created, Updated, Expires        *stamp
	Applied, UndoExpires, Undone     *stamp
}

// reportView is a run's undo report (a dry run's plan or the stored report).
type reportView struct {
	DryRun                        bool
	Status                        string
	Undo, NoNetChange             []stepView
	Skipped, Irreversible, Failed []noteView
	// Counts are the sections' full lengths: a section shows at most
	// maxReportItems entries, so that a run of thousands of changes
	// still gives a page of bounded size.
	UndoN, NoNetN, SkippedN, IrrevN, FailedN, NotesN, NotCarriedN int
	// Notes say what the library could not know for certain;
	// NotCarriedOut lists reviewed changes the undo did not carry out.
	Notes         []noteView
	NotCarriedOut []string
	UndoneBy      *actor
	Fingerprint   string
	// Planned lists the changes a dry run acts on, for the confirm form:
	// the undo carries out these and no others.
	Planned []string
	Nothing bool
}

// stepView is a change in a report; noteView one with a reason.
type stepView struct {
	ChangeID, Action, Summary, Resource string
}

type noteView struct {
	ChangeID, Action, Summary, Reason string
	Drift                             []driftRow
}

// viewer renders times relative to the dashboard's clock.
type viewer struct{ now time.Time }

func (v viewer) stamp(t time.Time) *stamp {
	if t.IsZero() {
		return nil
	}
	return &stamp{Rel: relative(v.now, t), Abs: t.UTC().Format("2006-01-02 15:04:05 UTC"), ISO: t.UTC().Format(time.RFC3339)}
}

// relative says how long ago (or how soon) t is, in words.
func relative(now, t time.Time) string {
	d := now.Sub(t)
	suffix := " ago"
	if d < 0 {
		d, suffix = -d, ""
	}
	var s string
	switch {
	case d < 45*time.Second:
		if suffix == "" {
			return "in a few seconds"
		}
		return "just now"
	case d < 90*time.Second:
		s = "1 min"
	case d < time.Hour:
		s = fmt.Sprintf("%d min", int(d.Round(time.Minute)/time.Minute))
	case d < 36*time.Hour:
		s = fmt.Sprintf("%d h", int(d.Round(time.Hour)/time.Hour))
	case d < 45*24*time.Hour:
		s = fmt.Sprintf("%d days", int(d.Round(24*time.Hour)/(24*time.Hour)))
	default:
		return t.UTC().Format("2 Jan 2006")
	}
	if suffix == "" {
		return "in " + s
	}
	return s + suffix
}

func parseActor(s string) *actor {
	if s == "" {
		return nil
	}
	filter := changeQuery{By: s}.link("")
	if kind, name, ok := strings.Cut(s, ":"); ok {
		return &actor{Kind: visible(kind), Name: visible(name), Filter: filter}
	}
	return &actor{Kind: visible(s), Filter: filter}
}

func (v viewer) run(r *ledger.Run, changes []*ledger.Change) runView {
	var tallies []ledger.Tally
	for _, c := range changes {
		tallies = append(tallies, ledger.Tally{Action: c.Action, Status: c.Status, N: 1, Updated: c.UpdatedAt})
	}
	return v.runSummary(r, tallies)
}

// runSummary is run r as the lists show it, from the tallies of its
// changes (ledger.TallyChanges), so that a list of runs reads no changes.
func (v viewer) runSummary(r *ledger.Run, tallies []ledger.Tally) runView {
	updated := r.UpdatedAt
	byAction, byStatus := map[string]int{}, map[string]int{}
	total := 0
	for _, t := range tallies {
		if t.Updated.After(updated) {
			updated = t.Updated
		}
		byAction[visible(t.Action)] += t.N
		byStatus[string(t.Status)] += t.N
		total += t.N
	}
	rv := runView{ID: r.ID, Label: visible(r.Label), Status: string(r.Status),
		Created: v.stamp(r.CreatedAt), Updated: v.stamp(updated), UndoneBy: parseActor(r.UndoneBy), Total: total}
	rv.ByAction = counts(byAction)
	rv.ByStatus = counts(byStatus)
	return rv
}

// counts sorts a tally by count, largest first, then by name.
func counts(m map[string]int) []count {
	out := []count{}
	for _, k := range slices.Sorted(maps.Keys(m)) {
		out = append(out, count{k, m[k]})
	}
	slices.SortStableFunc(out, func(a, b count) int { return b.N - a.N })
	return out
}

func (v viewer) change(c *ledger.Change) changeView {
	cv := changeView{
		ID: c.ID, Action: visible(c.Action), Status: string(c.Status), Summary: visible(c.Summary),
		Resource: visible(resourceText(c.Resource, c.Resources)), RunID: c.RunID, Diff: diffRows(ledger.MaskRedacted(c.Diff)),
		Payload: pretty(ledger.MaskRedacted(c.Payload)), Result: pretty(c.Result), Before: pretty(c.Before), After: pretty(c.After),
		HasBefore: len(c.Before) > 0, HasAfter: len(c.After) > 0,
		ErrorType: visible(c.ErrorType), Error: visible(c.Error), Note: visible(c.Note),
		Undoable: c.Undoable, Transactional: c.Transactional,
		PreviewedBy: parseActor(c.PreviewedBy), AppliedBy: parseActor(c.AppliedBy), UndoneBy: parseActor(c.UndoneBy),
		Created: v.stamp(c.CreatedAt), Updated: v.stamp(c.UpdatedAt), Expires: v.stamp(c.ExpiresAt),
		Applied: v.stamp(c.AppliedAt), UndoExpires: v.stamp(c.UndoExpiresAt), Undone: v.stamp(c.UndoneAt),
		Badge: badgeOf(c), Failure: failureOf(c),
	}
	for _, w := range c.Warnings {
		cv.Warnings = append(cv.Warnings, visible(w))
	}
	if c.Failure != "" && c.Failure != ledger.FailureError {
		cv.ErrorType = "" // the kind says what happened; a Go type name only helps read an error
	}
	switch {
	case c.Status != ledger.Applied:
	case !c.Undoable:
		cv.UndoNote = "This operation has no inverse: it cannot be undone."
	case !c.UndoExpiresAt.IsZero() && !v.now.Before(c.UndoExpiresAt):
		cv.UndoNote = "Its undo window closed " + relative(v.now, c.UndoExpiresAt) + "."
	default:
		cv.CanUndo = true
	}
	return cv
}

// report builds the view of a run report; summaries names the run's changes
// by ID, because a report's notes carry only the action.
func report(rep *changeset.RunReport, summaries map[string]string) *reportView {
	if rep == nil {
		return nil
	}
	steps := func(in []changeset.RunStep) []stepView {
		out := []stepView{}
		for _, s := range in[:min(len(in), maxReportItems)] {
			out = append(out, stepView{s.ChangeID, visible(s.Action), visible(s.Summary), visible(resourceText(s.Resource, s.Resources))})
		}
		return out
	}
	notes := func(in []changeset.RunNote) []noteView {
		out := []noteView{}
		for _, n := range in[:min(len(in), maxReportItems)] {
			out = append(out, noteView{n.ChangeID, visible(n.Action), summaries[n.ChangeID], visible(n.Reason), driftRows(n.Drift)})
		}
		return out
	}
	undo := rep.Undone
	if rep.DryRun {
		undo = rep.WillUndo
	}
	rv := &reportView{DryRun: rep.DryRun, Status: rep.Status, Undo: steps(undo), NoNetChange: steps(rep.NoNetChange),
		Skipped: notes(rep.Skipped), Irreversible: notes(rep.Irreversible), Failed: notes(rep.Failed),
		Notes: notes(rep.Notes), NotCarriedOut: rep.NotCarriedOut[:min(len(rep.NotCarriedOut), maxReportItems)], UndoneBy: parseActor(rep.UndoneBy),
		UndoN: len(undo), NoNetN: len(rep.NoNetChange), SkippedN: len(rep.Skipped), IrrevN: len(rep.Irreversible),
		FailedN: len(rep.Failed), NotesN: len(rep.Notes), NotCarriedN: len(rep.NotCarriedOut)}
	rv.Nothing = rv.UndoN+rv.NoNetN+rv.SkippedN+rv.IrrevN+rv.FailedN == 0
	return rv
}

// maxReportItems caps the entries one section of a report shows; the
// section says how many more there are.
const maxReportItems = 100

// summaries maps each change's ID to its summary (or action), as shown.
func summaries(changes []*ledger.Change) map[string]string {
	m := make(map[string]string, len(changes))
	for _, c := range changes {
		m[c.ID] = visible(c.Summary)
		if c.Summary == "" {
			m[c.ID] = visible(c.Action)
		}
	}
	return m
}

// diffRows renders a stored diff by the rules of package diffview, the
// same rules as the approval question: one row per changed field, a
// nested object expanded into the nested fields that differ, "(none)" for
// a side that does not exist, null as null.
func diffRows(stored json.RawMessage) []diffRow {
	entries, ok := diffview.Decode(stored)
	if !ok {
		return nil
	}
	rows := make([]diffRow, 0, len(entries))
	for _, e := range entries {
		for _, l := range diffview.Lines(e.Field, e.Kind, e.Before, e.After) {
			field := l.Field
			if field == "" {
				field = "(the whole value)"
			}
			rows = append(rows, diffRow{Field: visible(field), Kind: l.Kind, Before: sideOf(l.Before), After: sideOf(l.After)})
		}
	}
	return rows
}

// sideOf renders one side of a diff or drift row as diffview.Value does:
// JSON text (a string in quotes), "(none)" for a side that does not
// exist; objects and arrays are indented for reading. A very long value
// is cut, saying so.
func sideOf(raw json.RawMessage) value {
	if raw == nil {
		return value{Text: diffview.Absent, Absent: true}
	}
	raw = bytes.TrimSpace(raw)
	if len(raw) > 0 && (raw[0] == '{' || raw[0] == '[') {
		return value{Text: cutValue(pretty(raw)), Code: true}
	}
	return value{Text: cutValue(visible(diffview.Value(raw)))}
}

// cutValue shortens a shown value to maxShownValue bytes.
func cutValue(s string) string {
	if len(s) <= maxShownValue {
		return s
	}
	return cut(s, maxShownValue) + fmt.Sprintf(" (%d bytes in all)", len(s))
}

// pretty indents stored JSON for reading, or returns "" for none.
func pretty(raw json.RawMessage) string {
	if len(raw) == 0 {
		return ""
	}
	var b bytes.Buffer
	if json.Indent(&b, raw, "", "  ") != nil {
		return visible(string(raw))
	}
	return visible(b.String())
}

// visible makes invisible characters visible: control characters (except
// newline and tab), format characters such as bidirectional overrides, and
// line and paragraph separators become ⟨U+XXXX⟩, so that text from an agent
// cannot disguise itself on a page. html/template escapes the rest.
func visible(s string) string {
	if !strings.ContainsFunc(s, hidden) {
		return strings.ToValidUTF8(s, "\uFFFD")
	}
	var b strings.Builder
	for _, r := range strings.ToValidUTF8(s, "\uFFFD") {
		if hidden(r) {
			fmt.Fprintf(&b, "⟨U+%04X⟩", r)
			continue
		}
		b.WriteRune(r)
	}
	return b.String()
}

func hidden(r rune) bool {
	if r == '\n' || r == '\t' {
		return false
	}
	return unicode.Is(unicode.Cc, r) || unicode.Is(unicode.Cf, r) || unicode.Is(unicode.Zl, r) || unicode.Is(unicode.Zp, r)
}

// maxResourcesShown is how many resources of a change that names several
// a line shows before it counts the rest.
const maxResourcesShown = 3

// resourceText names what a change touches in one line: its resource, or
// the first of its resources and how many more.
func resourceText(one string, several []string) string {
	if len(several) == 0 {
		return one
	}
	shown := several[:min(len(several), maxResourcesShown)]
	text := strings.Join(shown, ", ")
	if n := len(several) - len(shown); n > 0 {
		text += fmt.Sprintf(" and %d more", n)
	}
	return text
}
