package dashboard_test

import (
	"encoding/json"
	"fmt"
	"net/url"
	"slices"
	"strings"
	"testing"

	"github.com/chromedp/chromedp"
	"github.com/mcp-changeset/changeset-go/ledger"
)

// listed returns the change IDs the list in the browser shows.
func (b *browser) listed() []string {
	b.t.Helper()
	raw := b.eval(`JSON.stringify([...document.querySelectorAll("a.title[href^='/changes/']")].map(a => a.getAttribute("href").slice(9)))`)
	var ids []string
	json.Unmarshal([]byte(raw), &ids)
	return ids
}

// The pages pass axe-core with no serious or critical violation, and a
// person who uses only the keyboard (Tab and Enter, no clicks) can review
// a run's undo and confirm it.
func TestBrowser_AxeAndAKeyboardOnlyUndo(t *testing.T) {
	exe := needBrowser(t, true)
	src := axeSource(t)
	f := newFixture(t)
	s := f.build()
	refused := f.refusedApply()
	b := newBrowser(t, exe, f)

	for _, p := range []struct{ name, path, ready string }{
		{"runs", "/", "table.list"},
		{"run", "/runs/" + s.run, "#timeline"},
		{"changes-filtered", "/changes?q=set&status=applied&since=7d", "table.list"},
		{"changes-invalid-filter", "/changes?since=soon", "#problem"},
		{"change", "/changes/" + s.changes[0], "dl.facts"},
		{"change-refused", "/changes/" + refused, ".banner.failure"},
		{"change-failed", "/changes/" + s.failed, ".banner.failure"},
		{"approvals-empty", "/approvals", ".empty"},
	} {
		b.step(p.name, chromedp.Navigate(b.url+p.path), chromedp.WaitVisible(chromedp.CSS(p.ready)))
		b.axe(p.name, src)
		b.shot("a11y-" + p.name + ".png")
	}

	// Keyboard only, from the list of runs.
	b.step("runs", chromedp.Navigate(b.url+"/"), chromedp.WaitVisible(chromedp.CSS("table.list")))
	b.tabTo(`a.title[href="/runs/` + s.run + `"]`)
	b.step("open the run", chromedp.KeyEvent("\r"), chromedp.WaitVisible(chromedp.CSS(`form[action="/runs/`+s.run+`/dry-run"] button`)))
	before := f.snapshot()
	b.tabTo(`form[action="/runs/` + s.run + `/dry-run"] button`)
	b.shot("keyboard-review-focused.png")
	b.step("dry run", chromedp.KeyEvent("\r"), chromedp.WaitVisible(chromedp.CSS(`form[action="/runs/`+s.run+`/undo"] button.danger`)))
	if f.snapshot() != before {
		t.Fatal("the dry run changed something")
	}
	if got := b.text("main"); !strings.Contains(got, dryRunMessage) {
		t.Errorf("the dry-run page lacks %q", dryRunMessage)
	}
	b.axe("dry-run", src)
	b.tabTo(`form[action="/runs/` + s.run + `/undo"] button.danger`)
	b.shot("keyboard-confirm-focused.png")
	b.step("confirm", chromedp.KeyEvent("\r"), chromedp.WaitVisible(chromedp.CSS(`#report`)))
	b.shot("keyboard-undone.png")
	b.axe("run-undone", src)
	run, err := f.guard.Ledger().Run(t.Context(), s.run)
	if err != nil || run.Status != ledger.RunPartiallyUndone || run.UndoneBy != "person:ana" {
		t.Fatalf("run after the keyboard-only undo: %+v, %v", run, err)
	}
	if v, _ := f.store.get("theme"); v != "light" {
		t.Errorf("theme = %q after the undo, want light", v)
	}
}

// Chromium drives the search and each filter through the form, pages
// through the list, and reads a skipped change's drift and a refused
// apply's wording.
func TestBrowser_FiltersPagingDriftAndWording(t *testing.T) {
	exe := needBrowser(t, false)
	f := newFixture(t)
	s := f.build()
	bulk := f.startRun("Bulk")
	for i := range 60 {
		f.preview(bulk, "set_value", fmt.Sprintf("bulk%02d", i), "v")
	}
	refused := f.refusedApply() // the only change updated in the last 90 seconds
	b := newBrowser(t, exe, f)

	// Each filter, typed into the form and sent with Enter.
	for _, tc := range []struct {
		field, value string
		want         []string
	}{
		{"#f-q", "theme", []string{s.pending, s.changes[0]}},
		{"#f-action", "delete_value", []string{s.changes[3]}},
		{"#f-by", "agent", nil}, // every change previewed through the Guard's API: checked by count
		{"#f-since", "90s", []string{refused}},
	} {
		b.step("open the list", chromedp.Navigate(b.url+"/changes"), chromedp.WaitVisible(chromedp.CSS("#f-q")))
		b.step("type "+tc.field, chromedp.SendKeys(chromedp.CSS(tc.field), tc.value+"\r"), chromedp.WaitVisible(chromedp.CSS(`#f-q`)))
		b.step("wait for the filtered list", b.until(`location.search.includes("`+strings.TrimPrefix(tc.field, "#f-")+`=")`))
		got := b.listed()
		switch {
		case tc.want != nil && !sameSet(got, tc.want):
			t.Errorf("%s=%s lists %v, want %v", tc.field, tc.value, got, tc.want)
		case tc.want == nil && len(got) != 50:
			t.Errorf("%s=%s lists %d changes, want a full page", tc.field, tc.value, len(got))
		}
		if v := b.eval(`document.querySelector("` + tc.field + `").value`); v != tc.value {
			t.Errorf("after the search %s holds %q", tc.field, v)
		}
	}
	b.step("status", chromedp.Navigate(b.url+"/changes?q=theme"), chromedp.WaitVisible(chromedp.CSS("#f-status")),
		chromedp.SetValue(chromedp.CSS("#f-status"), "applied"), chromedp.Submit(chromedp.CSS("#f-q")),
		b.until(`location.search.includes("status=applied")`))
	if got := b.listed(); !slices.Equal(got, []string{s.changes[0]}) {
		t.Errorf("q=theme&status=applied lists %v", got)
	}
	b.shot("changes-filtered.png")

	// An invalid filter: the page says what is wrong, the field is marked.
	b.step("invalid since", chromedp.Navigate(b.url+"/changes"), chromedp.WaitVisible(chromedp.CSS("#f-since")),
		chromedp.SendKeys(chromedp.CSS("#f-since"), "soon\r"), chromedp.WaitVisible(chromedp.CSS("#problem")))
	if got := b.text("#problem"); !strings.Contains(got, "is not a length of time") {
		t.Errorf("the problem reads %q", got)
	}
	if b.eval(`document.querySelector("#f-since").getAttribute("aria-invalid")`) != "true" {
		t.Error("the since field is not marked invalid")
	}
	b.shot("changes-invalid.png")

	// Paging: Older, then back to Newest, the filter kept.
	b.step("page 1", chromedp.Navigate(b.url+"/changes?action=set_value"), chromedp.WaitVisible(chromedp.CSS(`a[rel="next"]`)))
	first := b.listed()
	b.step("older", chromedp.Click(chromedp.CSS(`a[rel="next"]`)), b.until(`location.search.includes("before=")`))
	second := b.listed()
	if loc, _ := chromedp.Run(b.ctx, chromedp.Location()); !strings.Contains(loc, "action=set_value") {
		t.Errorf("the older page lost the filter: %s", loc)
	}
	if len(first) != 50 || len(second) == 0 || slices.ContainsFunc(second, func(id string) bool { return slices.Contains(first, id) }) {
		t.Errorf("pages of %d and %d changes, or overlapping", len(first), len(second))
	}
	b.shot("changes-older.png")
	b.step("newest", chromedp.Click(chromedp.CSS(`nav.pager a:not([rel])`)), b.until(`!location.search.includes("before=")`))
	if got := b.listed(); !slices.Equal(got, first) {
		t.Error("Newest does not lead back to the first page")
	}

	// A skipped change's drift, on the dry-run page.
	b.step("dry run", chromedp.Navigate(b.url+"/runs/"+s.run), chromedp.Click(chromedp.CSS(`form[action$="/dry-run"] button`)),
		chromedp.WaitVisible(chromedp.CSS(`.rs-skip .drift`)))
	if got := b.text(".rs-skip"); !strings.Contains(strings.ToLower(got), "expected (left by this change)") || !strings.Contains(got, `"edited by a person"`) ||
		!strings.Contains(got, `"updated by the agent"`) {
		t.Errorf("the skipped change's drift reads:\n%s", got)
	}
	b.shot("dry-run-drift.png")

	// A refused apply: worded, amber, not red.
	b.step("refused", chromedp.Navigate(b.url+"/changes/"+url.PathEscape(refused)), chromedp.WaitVisible(chromedp.CSS(".banner.failure")))
	if got := b.text(".banner.failure"); !strings.Contains(got, "Refused: the state changed since the preview; nothing was written.") {
		t.Errorf("the refused apply reads %q", got)
	}
	if bg := b.eval(`getComputedStyle(document.querySelector(".banner.failure")).backgroundColor`); bg != "rgb(255, 246, 224)" {
		t.Errorf("the refused apply's banner is %s, want the amber of a refusal", bg)
	}
	b.shot("change-refused.png")
}
