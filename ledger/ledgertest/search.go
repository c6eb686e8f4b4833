package ledgertest

import (
	"context"
	"fmt"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/mcp-changeset/changeset-go/ledger"
	"github.com/mcp-changeset/changeset-go/ledger/driver"
)

// The searches and merged pages that the backends serve from indexes of
// their own (SQLite's full-text table, PostgreSQL's trigram index, the
// ranges merged for an actor or several statuses): the indexes only
// narrow what the exact test decides, so the answers are those of the
// plain filter, on every page.

// allWays lists f's changes three ways (every match at once, pages of one
// following the cursor, and the count) and fails unless they agree; it
// returns the IDs.
func allWays(t *testing.T, l *ledger.Ledger, f ledger.ChangeFilter) []string {
	t.Helper()
	ctx := context.Background()
	all := changeIDs(t, l, f)
	var paged []string
	p := f
	p.Limit = 1
	for range len(all) + 2 {
		page, err := l.Changes(ctx, p)
		if err != nil {
			t.Fatalf("Changes(%+v): %v", p, err)
		}
		if len(page) == 0 {
			break
		}
		paged = append(paged, page[0].ID)
		p.Before = &ledger.ChangeKey{CreatedAt: page[0].CreatedAt, ID: page[0].ID}
	}
	if !slices.Equal(all, paged) {
		t.Errorf("%+v: pages of one give %v, the whole list %v", f, paged, all)
	}
	f.Limit, f.Before = 0, nil
	if n, err := l.CountChanges(ctx, f); err != nil || n != len(all) {
		t.Errorf("CountChanges(%+v) = %d, %v; the list holds %d", f, n, err, len(all))
	}
	return all
}

func testSearchEdges(t *testing.T, h Harness) {
	l, _ := open(t, h)
	add := func(id, action, summary, resource string, created int) {
		c := pendingChange(id, sec(created))
		c.Action, c.Summary, c.Resource = action, summary, resource
		insertChanges(t, l, c)
	}
	add("chg_1", "set_setting", "Café crème for ÉTÉ", "menu:boissons", 1)
	add("chg_2", "write_note", `Say "hi" to 50% of_them`, `note:C:\dir\x`, 2)
	add("chg_3", "write_note", "Dots... and -- dashes", "note:日本語テキスト", 3)
	add("chg_4", "set_setting", "Plain ASCII summary", "setting:QUARANTINE", 4)
	for _, tc := range []struct{ text, want string }{
		{"crème", "chg_1"},
		{"CRèME", "chg_1"}, // ASCII letters in any case
		{"rème f", "chg_1"},
		{"ÉTÉ", "chg_1"},
		{"èm", "chg_1"}, // two characters, three bytes
		{"本語テ", "chg_3"},
		{"日本", "chg_3"},
		{`"hi"`, "chg_2"}, // a quote is a character like any other
		{`say "HI" to`, "chg_2"},
		{"50% of_", "chg_2"}, // % and _ are literal in a long text
		{"50%_of", ""},
		{"0% o", "chg_2"},
		{`C:\dir\x`, "chg_2"},
		{`\dir`, "chg_2"},
		{`\\dir`, ""},
		{"...", "chg_3"},
		{"-- d", "chg_3"},
		{"quarantine", "chg_4"},
		{"Quarantine setting", ""},
		{"write_note", "chg_3 chg_2"},
		{"WRITE_", "chg_3 chg_2"},
		{"zyzzyva", ""},
		{"a", "chg_4 chg_3 chg_2 chg_1"},
		{"%", "chg_2"},
	} {
		got := strings.Join(allWays(t, l, ledger.ChangeFilter{Text: tc.text}), " ")
		if got != tc.want {
			t.Errorf("Text %q found %q, want %q", tc.text, got, tc.want)
		}
	}
}

// testSearchShortText: a text shorter than ledger.MinIndexedText
// characters is matched against the ledger.ShortTextWindow newest changes
// only; a longer one against every change.
func testSearchShortText(t *testing.T, h Harness) {
	l, _ := open(t, h)
	ctx := ctxFor(t)
	err := l.WithTx(ctx, func(tx *ledger.Tx) error {
		for i := range ledger.ShortTextWindow + 1 {
			c := pendingChange(fmt.Sprintf("chg_%05d", i), t0.Add(time.Duration(i)*time.Millisecond))
			c.Summary = "filler"
			switch i {
			case 0:
				c.Summary = "old qz"
			case ledger.ShortTextWindow:
				c.Summary = "new qz"
			}
			if err := tx.InsertChange(c); err != nil {
				return err
			}
		}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	newest := fmt.Sprintf("chg_%05d", ledger.ShortTextWindow)
	for _, tc := range []struct{ text, want string }{
		{"qz", newest},                 // the oldest is outside the window
		{"QZ", newest},                 //
		{"w qz", newest},               // long enough: every change
		{" qz", newest + " chg_00000"}, // three characters
		{"d qz", "chg_00000"},          //
		{"zz", ""},
	} {
		got := strings.Join(changeIDs(t, l, ledger.ChangeFilter{Text: tc.text}), " ")
		if got != tc.want {
			t.Errorf("Text %q found %q, want %q", tc.text, got, tc.want)
		}
		if n, err := l.CountChanges(ctx, ledger.ChangeFilter{Text: tc.text}); err != nil || n != len(strings.Fields(tc.want)) {
			t.Errorf("CountChanges(Text %q) = %d, %v", tc.text, n, err)
		}
	}
	// A short text matches only within the window, even where every
	// change holds it.
	if n, err := l.CountChanges(ctx, ledger.ChangeFilter{Text: "fi"}); err != nil || n != ledger.ShortTextWindow-1 {
		t.Errorf("CountChanges(Text \"fi\") = %d, %v; want %d", n, err, ledger.ShortTextWindow-1)
	}
}

// testSearchMergedPages: a filter by actor (any of three columns) or on
// several statuses, with a limit, is read as a merge of index ranges;
// page by page it must list what the plain filter lists, each change
// once, whether the actor previewed, applied and undid a change or only
// one of those.
func testSearchMergedPages(t *testing.T, h Harness) {
	l, _ := open(t, h)
	statuses := []ledger.Status{ledger.Pending, ledger.Applied, ledger.ApplyFailed, ledger.Undone, ledger.UndoFailed, ledger.Expired}
	actors := []string{"agent:kim", "agent:bob", "person:ann", ""}
	for i := range 60 {
		c := pendingChange(fmt.Sprintf("chg_%02d", i), sec(i/3)) // three to a second: ties broken by ID
		c.Status = statuses[i%len(statuses)]
		c.PreviewedBy = actors[i%4]
		if c.Status != ledger.Pending && c.Status != ledger.Expired {
			c.AppliedBy, c.AppliedAt = actors[(i/4)%4], sec(i)
		}
		if c.Status == ledger.Undone || c.Status == ledger.UndoFailed {
			c.UndoneBy = actors[(i/7)%4]
		}
		c.Action = []string{"set_setting", "write_note"}[i%2]
		insertChanges(t, l, c)
	}
	for _, f := range []ledger.ChangeFilter{
		{By: "agent:kim"},
		{By: "agent:bob", Action: "write_note"},
		{By: "person:ann", Statuses: []ledger.Status{ledger.Undone, ledger.UndoFailed}},
		{By: "agent:nobody"},
		{Statuses: []ledger.Status{ledger.ApplyFailed, ledger.UndoFailed}},
		{Statuses: []ledger.Status{ledger.Pending, ledger.Applied, ledger.Expired}, Action: "set_setting"},
		{Statuses: []ledger.Status{ledger.Applied, ledger.Undone}, By: "agent:kim", Text: "set_"},
	} {
		got := allWays(t, l, f)
		// The reference: every change, filtered here.
		var want []string
		for _, c := range mustChanges(t, l) {
			if matches(c, f) {
				want = append(want, c.ID)
			}
		}
		if !slices.Equal(got, want) {
			t.Errorf("%+v: got %v, want %v", f, got, want)
		}
		if f.By == "agent:kim" && f.Text == "" && len(got) == 0 {
			t.Errorf("%+v found nothing: the fixture should give it changes", f)
		}
	}
}

// testSearchActorsFollowUpdates: a filter by actor finds a change by its
// actors as they are now, after updates that set an actor, change it to
// another, clear it, or name one actor in two columns and then in one,
// and after the change is deleted; page by page and counted (a backend
// may keep the actors in a table of its own, kept in step by triggers).
func testSearchActorsFollowUpdates(t *testing.T, h Harness) {
	l, _ := open(t, h)
	ctx := context.Background()
	a, b, c := pendingChange("chg_a", sec(1)), pendingChange("chg_b", sec(2)), pendingChange("chg_c", sec(3))
	a.PreviewedBy, b.PreviewedBy, c.PreviewedBy = "agent:kim", "agent:bob", "person:ann"
	insertChanges(t, l, a, b, c)
	check := func(step string) {
		t.Helper()
		every := mustChanges(t, l)
		for _, by := range []string{"agent:kim", "agent:bob", "person:ann", "agent:nobody"} {
			f := ledger.ChangeFilter{By: by}
			var want []string
			for _, ch := range every {
				if matches(ch, f) {
					want = append(want, ch.ID)
				}
			}
			if got := allWays(t, l, f); !slices.Equal(got, want) {
				t.Errorf("%s: By %s lists %v, want %v", step, by, got, want)
			}
		}
	}
	update := func(step string, ch *ledger.Change, from ledger.Status) {
		t.Helper()
		ch.UpdatedAt = ch.UpdatedAt.Add(time.Second)
		if err := driver.BackendOf(l).UpdateChange(ctx, l.DB(), ch, from); err != nil {
			t.Fatalf("%s: %v", step, err)
		}
		check(step)
	}
	check("previewed")
	a.Status, a.AppliedBy = ledger.Applying, "agent:kim"
	update("applied by who previewed it", a, ledger.Pending)
	a.Status, a.AppliedBy, a.AppliedAt = ledger.Applied, "agent:bob", sec(4)
	update("applier changed", a, ledger.Applying)
	b.Status, b.AppliedBy, b.AppliedAt = ledger.Applied, "agent:bob", sec(5)
	update("applied by who previewed it, in one update", b, ledger.Pending)
	b.Status, b.UndoneBy = ledger.Undoing, "person:ann"
	update("undone by another", b, ledger.Applied)
	b.Status, b.AppliedBy = ledger.Undone, ""
	update("applier cleared, still the previewer", b, ledger.Undoing)
	a.Status, a.AppliedBy, a.UndoneBy = ledger.Undoing, "", "agent:bob"
	update("applier cleared and undoer set to the same actor", a, ledger.Applied)
	a.Status, a.UndoneBy = ledger.Undone, ""
	update("undoer cleared", a, ledger.Undoing)
	if n, _, err := driver.BackendOf(l).DeleteChanges(ctx, l.DB(), []string{"chg_b"}, []ledger.Status{ledger.Undone}); err != nil || n != 1 {
		t.Fatalf("delete chg_b: %d, %v", n, err)
	}
	check("deleted")
	// A new change with the deleted one's actors and key is found once.
	b = pendingChange("chg_b", sec(2))
	b.PreviewedBy = "agent:kim"
	insertChanges(t, l, b)
	check("inserted again")
	if got := changeIDs(t, l, ledger.ChangeFilter{By: "agent:kim"}); !slices.Equal(got, []string{"chg_b", "chg_a"}) {
		t.Errorf("By agent:kim at the end lists %v, want [chg_b chg_a]", got)
	}
}

// mustChanges lists every change, newest first.
func mustChanges(t *testing.T, l *ledger.Ledger) []*ledger.Change {
	t.Helper()
	cs, err := l.Changes(context.Background(), ledger.ChangeFilter{})
	if err != nil {
		t.Fatal(err)
	}
	return cs
}

// matches is the filter of testSearchMergedPages, in Go.
func matches(c *ledger.Change, f ledger.ChangeFilter) bool {
	if f.By != "" && c.PreviewedBy != f.By && c.AppliedBy != f.By && c.UndoneBy != f.By {
		return false
	}
	if len(f.Statuses) > 0 && !slices.Contains(f.Statuses, c.Status) {
		return false
	}
	if f.Action != "" && c.Action != f.Action {
		return false
	}
	if f.Text != "" && !strings.Contains(strings.ToLower(c.Summary+"\x00"+c.Action+"\x00"+c.Resource), strings.ToLower(f.Text)) {
		return false
	}
	return true
}
