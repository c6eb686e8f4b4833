package dashboard_test

import (
	"fmt"
	"html"
	"net/http"
	"net/url"
	"regexp"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/mcp-changeset/changeset-go/ledger"
)

// listed returns the IDs of the changes a list page shows, in page order.
func listed(body string) []string {
	var ids []string
	for _, m := range regexp.MustCompile(`<a class="title" href="/changes/(chg_[0-9a-f]{20})">`).FindAllStringSubmatch(body, -1) {
		ids = append(ids, m[1])
	}
	return ids
}

// pagerLink returns the href of the pager link whose text is label, HTML
// entities decoded, or "".
func pagerLink(body, label string) string {
	i := strings.Index(body, `<nav class="pager"`)
	if i < 0 {
		return ""
	}
	for _, m := range regexp.MustCompile(`<a href="([^"]+)"[^>]*>([^<]+)</a>`).FindAllStringSubmatch(body[i:], -1) {
		if m[2] == label {
			return html.UnescapeString(m[1])
		}
	}
	return ""
}

// fieldValue returns the decoded value of the input with that id, or
// "" when it has none.
func fieldValue(body, id string) string {
	m := regexp.MustCompile(`<input id="` + id + `"[^>]*? value="([^"]*)"`).FindStringSubmatch(body)
	if m == nil {
		return ""
	}
	return html.UnescapeString(m[1])
}

func sameSet(a, b []string) bool {
	a, b = slices.Clone(a), slices.Clone(b)
	slices.Sort(a)
	slices.Sort(b)
	return slices.Equal(a, b)
}

func TestChangesPage_EachFilterAndCombinations(t *testing.T) {
	f := newFixture(t)
	s := f.build()
	c := f.login()
	// A person undoes one change now: it is the only change updated in the
	// last minute, and the only one person:ana acted on.
	c.get("/changes/" + s.single)
	if res := c.post("/changes/"+s.single+"/undo", nil); res.Code != http.StatusSeeOther {
		t.Fatalf("undo = %d:\n%s", res.Code, res.Body)
	}
	f.clock.Advance(10 * time.Second)
	other, err := f.guard.Ledger().Changes(t.Context(), ledger.ChangeFilter{RunID: s.other})
	if err != nil || len(other) != 1 {
		t.Fatalf("the second run's changes: %v, %v", other, err)
	}
	for _, tc := range []struct {
		name, query string
		want        []string
	}{
		{"q in a summary", "q=theme", []string{s.changes[0], s.pending}},
		{"q ignores case", "q=THEME", []string{s.changes[0], s.pending}},
		{"q in a resource", "q=key:language", []string{s.changes[1]}},
		{"q in an action", "q=delete_val", []string{s.changes[3]}},
		{"q is literal: % is no wildcard", "q=" + url.QueryEscape("%"), nil},
		{"action", "action=delete_value", []string{s.changes[3]}},
		{"status", "status=pending", []string{s.pending}},
		{"by", "by=" + url.QueryEscape("person:ana"), []string{s.single}},
		{"since", "since=1m", []string{s.single}},
		{"since in days takes everything", "since=7d", nil}, // want: every change; checked below
		{"run", "run=" + s.other, []string{other[0].ID}},
		{"q and status", "q=theme&status=applied", []string{s.changes[0]}},
		{"action and by", "action=set_value&by=" + url.QueryEscape("person:ana"), []string{s.single}},
		{"action, status and run", "action=set_value&status=applied&run=" + s.run, []string{s.changes[0], s.changes[1], s.changes[2], s.changes[4]}},
		{"q and since", "q=theme&since=1m", nil},
	} {
		t.Run(tc.name, func(t *testing.T) {
			res := c.get("/changes?" + tc.query)
			if res.Code != http.StatusOK {
				t.Fatalf("GET /changes?%s = %d:\n%s", tc.query, res.Code, res.Body)
			}
			got := listed(res.Body)
			want := tc.want
			if tc.query == "since=7d" {
				all, _ := f.guard.Ledger().Changes(t.Context(), ledger.ChangeFilter{})
				want = nil
				for _, ch := range all {
					want = append(want, ch.ID)
				}
			}
			if !sameSet(got, want) {
				t.Errorf("GET /changes?%s lists %v, want %v", tc.query, got, want)
			}
			if len(want) == 0 && !strings.Contains(res.Body, "No change matches these filters.") {
				t.Errorf("an empty filtered list does not say so")
			}
			// The form shows the filters as given.
			q, _ := url.ParseQuery(tc.query)
			for k, field := range map[string]string{"q": "f-q", "action": "f-action", "by": "f-by", "since": "f-since"} {
				if got := fieldValue(res.Body, field); got != q.Get(k) {
					t.Errorf("the %s field holds %q, want %q", k, got, q.Get(k))
				}
			}
			if st := q.Get("status"); st != "" {
				mustContain(t, "status select", res.Body, `<option value="`+st+`" selected>`)
			}
		})
	}
}

func TestChangesPage_InvalidFiltersAre400WithAMessage(t *testing.T) {
	f := newFixture(t)
	f.build()
	c := f.login()
	for _, tc := range []struct {
		name, query, field, msg string
	}{
		{"q over the limit", "q=" + strings.Repeat("a", ledger.MaxFilterText+1), "q", "The search text is 201 bytes long; at most 200 are allowed."},
		{"q over the limit in runes", "q=" + url.QueryEscape(strings.Repeat("é", 101)), "q", "at most 200 are allowed"},
		{"q with a control character", "q=a%00b", "q", "holds control characters"},
		{"q not UTF-8", "q=%ff", "q", "is not valid UTF-8"},
		{"unknown status", "status=bogus", "status", `There is no status &#34;bogus&#34;. Choose one of: pending`},
		{"since unreadable", "since=soon", "since", "is not a length of time (write e.g. 90m, 24h or 7d)"},
		{"since negative", "since=-5m", "since", "cannot be negative"},
		{"since in days, malformed", "since=xd", "since", "days are a whole number before d"},
		{"since over 100 years", "since=50000d", "since", "longer than 100 years"},
		{"since beyond a duration", "since=99999999d", "since", "is too long"},
		{"action too long", "action=" + strings.Repeat("x", 201), "action", "at most 200 are allowed"},
		{"by with a newline", "by=agent%0Aalice", "by", "holds control characters"},
		{"run malformed", "run=run_nope", "run", "is not a run ID"},
		{"before damaged", "before=123.chg_zz", "before", "This page link is damaged."},
		{"before without a time", "before=chg_0123456789abcdef0123", "before", "This page link is damaged."},
	} {
		t.Run(tc.name, func(t *testing.T) {
			res := c.get("/changes?" + tc.query)
			if res.Code != http.StatusBadRequest {
				t.Fatalf("GET /changes?%s = %d, want 400", tc.query, res.Code)
			}
			mustContain(t, "the page", res.Body, `role="alert" id="problem"`, tc.msg, `<form method="get" action="/changes"`)
			if tc.field != "before" && tc.field != "run" {
				want := map[string]string{"q": "f-q", "status": "f-status", "since": "f-since", "action": "f-action", "by": "f-by"}[tc.field]
				if !regexp.MustCompile(`id="` + want + `"[^>]*aria-invalid="true"`).MatchString(res.Body) {
					t.Errorf("the %s field is not marked invalid", tc.field)
				}
			}
			if len(listed(res.Body)) != 0 {
				t.Error("an invalid filter still lists changes")
			}
		})
	}
}

// What a person types into the search is echoed escaped, and matched
// literally: markup stays text, SQL stays text.
func TestChangesPage_InjectionInQIsEscapedAndLiteral(t *testing.T) {
	f := newFixture(t)
	s := f.build()
	c := f.login()
	for _, q := range []string{
		`"><script>alert(1)</script>`,
		`' OR '1'='1`,
		`%' OR 1=1 --`,
		`theme'); DROP TABLE changes; --`,
		"\u202etheme",
	} {
		res := c.get("/changes?q=" + url.QueryEscape(q))
		if res.Code != http.StatusOK {
			t.Fatalf("q=%q = %d:\n%s", q, res.Code, res.Body)
		}
		if strings.Contains(res.Body, "<script>alert") || strings.Contains(res.Body, `"><script>`) {
			t.Errorf("q=%q is echoed unescaped", q)
		}
		if got := listed(res.Body); len(got) != 0 {
			t.Errorf("q=%q matches %v; it should match nothing literally", q, got)
		}
		if got := fieldValue(res.Body, "f-q"); got != q {
			t.Errorf("q=%q is echoed into the search field as %q", q, got)
		}
	}
	// The ledger is intact after all that.
	if res := c.get("/changes?q=theme"); !sameSet(listed(res.Body), []string{s.changes[0], s.pending}) {
		t.Errorf("after the injection attempts q=theme lists %v", listed(res.Body))
	}
}

// The list pages newest first, 50 at a time, with "Older →" to the next
// page and "← Newest" back; the filters hold across pages.
func TestChangesPage_PagesBothWaysKeepingFilters(t *testing.T) {
	f := newFixture(t)
	run := f.startRun("Many")
	var ids []string
	for i := range 120 {
		ids = append(ids, f.preview(run, "set_value", fmt.Sprintf("k%03d", i), "v"))
	}
	f.preview("", "log_line", "", "not in the filter") // newest, and filtered out
	slices.Reverse(ids)                                // newest first
	c := f.login()
	first := c.get("/changes?action=set_value")
	if pagerLink(first.Body, "← Newest") != "" {
		t.Error("the first page links to the newest")
	}
	var seen []string
	next, pages := "/changes?action=set_value", 0
	for next != "" {
		res := c.get(next)
		if res.Code != http.StatusOK {
			t.Fatalf("%s = %d:\n%s", next, res.Code, res.Body)
		}
		pages++
		got := listed(res.Body)
		if len(got) > 50 {
			t.Fatalf("page %d lists %d changes", pages, len(got))
		}
		seen = append(seen, got...)
		if pages > 1 {
			back := pagerLink(res.Body, "← Newest")
			if back != "/changes?action=set_value" {
				t.Fatalf("page %d: Newest links to %q", pages, back)
			}
			if again := listed(c.get(back).Body); !slices.Equal(again, ids[:50]) {
				t.Fatalf("Newest shows %d changes, not the first page", len(again))
			}
		}
		next = pagerLink(res.Body, "Older →")
		if next != "" && !strings.Contains(next, "action=set_value") {
			t.Fatalf("Older drops the filter: %q", next)
		}
	}
	if pages != 3 || !slices.Equal(seen, ids) {
		t.Fatalf("%d pages listed %d changes; want 3 pages of all %d, newest first, none twice", pages, len(seen), len(ids))
	}
}

// Each actor in the list links to the changes it acted on.
func TestChangesPage_WhoLinksToTheirChanges(t *testing.T) {
	f := newFixture(t)
	f.build()
	id, _ := f.callTool("preview_set_value", map[string]any{"key": "theme", "value": "mcp"})["change_id"].(string)
	c := f.login()
	res := c.get("/changes")
	mustContain(t, "changes page", res.Body, `previewed by <a class="actor-link" href="/changes?by=agent%3Aagent"><span class="who agent" title="an agent, with a token">agent:agent</span></a>`)
	if got := listed(c.get("/changes?by=agent%3Aagent").Body); !slices.Equal(got, []string{id}) {
		t.Errorf("by=agent:agent lists %v, want the change previewed over MCP (%s)", got, id)
	}
}

// The runs list pages newest first, 50 at a time, by a cursor (the last
// run of a page), so that any page costs its own rows; a cursor naming no
// run is a clear 400.
func TestRunsPage_PagesByCursor(t *testing.T) {
	f := newFixture(t)
	var ids []string
	for i := range 120 {
		ids = append(ids, f.startRun(fmt.Sprintf("run %03d", i)))
	}
	slices.Reverse(ids) // newest first
	c := f.login()
	runsOn := func(body string) []string {
		var out []string
		for _, m := range regexp.MustCompile(`<a class="title" href="/runs/(run_[0-9a-f]{20})">`).FindAllStringSubmatch(body, -1) {
			out = append(out, m[1])
		}
		return out
	}
	var seen []string
	next, pages := "/", 0
	for next != "" {
		res := c.get(next)
		if res.Code != http.StatusOK {
			t.Fatalf("%s = %d", next, res.Code)
		}
		pages++
		seen = append(seen, runsOn(res.Body)...)
		if back := pagerLink(res.Body, "← Newest"); (pages > 1) != (back == "/") {
			t.Fatalf("page %d: Newest link %q", pages, back)
		}
		next = pagerLink(res.Body, "Older →")
	}
	if pages != 3 || !slices.Equal(seen, ids) {
		t.Fatalf("%d pages listed %d runs; want 3 pages of all %d, newest first, none twice", pages, len(seen), len(ids))
	}
	if res := c.get("/?before=run_00000000000000000000"); res.Code != http.StatusBadRequest || !strings.Contains(res.Body, "not in the ledger") {
		t.Errorf("a cursor naming no run: %d", res.Code)
	}
}
