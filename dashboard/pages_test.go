package dashboard_test

import (
	"fmt"
	"net/http"
	"regexp"
	"strings"
	"testing"

	changeset "github.com/mcp-changeset/changeset-go"
	"github.com/mcp-changeset/changeset-go/dashboard"
)

func TestRunsPage_ListsRunsNewestFirstWithCounts(t *testing.T) {
	f := newFixture(t)
	s := f.build()
	res := f.login().get("/")
	if res.Code != http.StatusOK {
		t.Fatalf("GET / = %d", res.Code)
	}
	second, first := strings.Index(res.Body, "Second task"), strings.Index(res.Body, "Tidy up settings")
	if second < 0 || first < 0 || second > first {
		t.Errorf("runs not listed newest first (Second task at %d, Tidy up settings at %d)", second, first)
	}
	mustContain(t, "runs page", res.Body,
		`href="/runs/`+s.run+`"`, "set_value <b>4</b>", "delete_value <b>1</b>", "log_line <b>1</b>",
		`<span class="badge st-open">open</span>`, `<time datetime="2026-11-30T09:01:00Z">2026-11-30 09:01:00 UTC</time>`, "min ago)")
}

func TestRunPage_ShowsGlanceTimelineAndDiffs_FirstFormIsDryRun(t *testing.T) {
	f := newFixture(t)
	s := f.build()
	res := f.login().get("/runs/" + s.run)
	if res.Code != http.StatusOK {
		t.Fatalf("GET run = %d", res.Code)
	}
	if got := firstForm(res.Body); got != "/runs/"+s.run+"/dry-run" {
		t.Errorf("first form posts to %q, want the dry run", got)
	}
	mustContain(t, "run page", res.Body,
		"Tidy up settings", "Review undo", "At a glance", `<span class="num">6</span>`,
		"Timeline", "Run started", "Applied: Set theme to &#34;dark&#34;",
		// the diff, side by side
		`<div class="field" role="rowheader">theme</div>`, `<span class="val">&#34;light&#34;</span>`, `<span class="val">&#34;dark&#34;</span>`,
		`<span class="absent">(none)</span>`,
		// newest first: the log line before the theme
		"State before and after", `<span class="who agent"`)
	if strings.Index(res.Body, "Log tidied") > strings.Index(res.Body, "Set theme to") {
		t.Error("the run's changes are not newest first")
	}
	if strings.Contains(res.Body, "Undo report") {
		t.Error("an open run shows an undo report")
	}
}

func TestChangesPage_FiltersByStatus(t *testing.T) {
	f := newFixture(t)
	s := f.build()
	c := f.login()
	all := c.get("/changes")
	mustContain(t, "all changes", all.Body, s.single, s.pending, s.failed, s.changes[0])
	applied := c.get("/changes?status=applied")
	mustContain(t, "applied changes", applied.Body, s.single, s.changes[0], `<option value="applied" selected>applied</option>`)
	for _, id := range []string{s.pending, s.failed} {
		if strings.Contains(applied.Body, id) {
			t.Errorf("?status=applied lists %s", id)
		}
	}
	pending := c.get("/changes?status=pending")
	if !strings.Contains(pending.Body, s.pending) || strings.Contains(pending.Body, s.single) {
		t.Error("?status=pending lists the wrong changes")
	}
	if res := c.get("/changes?status=bogus"); res.Code != http.StatusBadRequest {
		t.Errorf("?status=bogus = %d, want 400", res.Code)
	}
	inRun := c.get("/changes?run=" + s.run)
	if !strings.Contains(inRun.Body, s.changes[0]) || strings.Contains(inRun.Body, s.single) {
		t.Error("?run= lists the wrong changes")
	}
}

func TestChangePage_ShowsEverythingButDigests(t *testing.T) {
	f := newFixture(t)
	s := f.build()
	c := f.login()
	res := c.get("/changes/" + s.changes[0])
	if res.Code != http.StatusOK {
		t.Fatalf("GET change = %d", res.Code)
	}
	mustContain(t, "applied change", res.Body, "Set theme to &#34;dark&#34;", "Undo this change",
		"Tidy up settings", "key:theme", "Payload", "&#34;key&#34;: &#34;theme&#34;", "Result",
		"Before", "After", "Applied", `<span class="who agent"`, "Undo window closes")
	if firstForm(res.Body) != "/changes/"+s.changes[0]+"/undo" {
		t.Errorf("first form = %q, want the undo", firstForm(res.Body))
	}

	failed := c.get("/changes/" + s.failed)
	mustContain(t, "failed change", failed.Body, "apply failed", "errors.errorString",
		"open /srv/private/values.db: permission denied")
	if strings.Contains(failed.Body, "Undo this change") {
		t.Error("a failed change offers an undo")
	}
	noUndo := c.get("/changes/" + s.changes[5])
	mustContain(t, "change without inverse", noUndo.Body, "cannot be undone")
	if strings.Contains(noUndo.Body, `action="/changes/`+s.changes[5]+`/undo"`) {
		t.Error("a change without inverse offers an undo")
	}
	pending := c.get("/changes/" + s.pending)
	mustContain(t, "pending change", pending.Body, "pending", "Preview expires")
}

func TestUnknownAndMalformedIDsAre404(t *testing.T) {
	f := newFixture(t)
	f.build()
	c := f.login()
	before := f.snapshot()
	for _, p := range []string{
		"/runs/run_00000000000000000000", "/runs/run_0000", "/runs/RUN_00000000000000000000", "/runs/chg_00000000000000000000",
		"/runs/run_0000000000000000000g", "/runs/%00", "/changes/chg_00000000000000000000", "/changes/chg_ABCDEF00000000000000",
		"/changes/run_00000000000000000000", "/changes/x", "/nope", "/runs/",
	} {
		if res := c.get(p); res.Code != http.StatusNotFound {
			t.Errorf("GET %s = %d, want 404", p, res.Code)
		}
	}
	for _, p := range []string{
		"/runs/run_00000000000000000000/dry-run", "/runs/run_00000000000000000000/undo", "/runs/bogus/undo",
		"/changes/chg_00000000000000000000/undo", "/changes/bogus/undo",
	} {
		if res := c.post(p, nil); res.Code != http.StatusNotFound {
			t.Errorf("POST %s = %d, want 404", p, res.Code)
		}
	}
	if f.snapshot() != before {
		t.Error("a request for an unknown ID changed something")
	}
}

func TestPages_MakeHiddenCharactersVisible(t *testing.T) {
	f := newFixture(t)
	run := f.startRun("evil\u202eexe.txt")
	f.do(run, "set_value", "name", "a\u200bb\u2028c")
	res := f.login().get("/runs/" + run)
	mustContain(t, "run page", res.Body, "evil⟨U&#43;202E⟩exe.txt", "a⟨U&#43;200B⟩b⟨U&#43;2028⟩c")
	if strings.ContainsAny(res.Body, "\u202e\u200b\u2028") {
		t.Error("a page holds an invisible control or format character")
	}
}

func TestWritesDisabled_BannerShownAndUndoRefusedWithNothingChanged(t *testing.T) {
	t.Setenv("MCP_CHANGESET_WRITE_MODE", "guarded")
	f := newFixture(t, func(o *changeset.Options, _ *dashboard.Options) { o.WriteMode = "" })
	s := f.build()
	c := f.login()
	t.Setenv("MCP_CHANGESET_WRITE_MODE", "disabled")
	before := f.snapshot()
	run := c.get("/runs/" + s.run)
	mustContain(t, "run page", run.Body, "Writes are disabled")
	dry := c.post("/runs/"+s.run+"/dry-run", nil)
	if dry.Code != http.StatusOK {
		t.Fatalf("dry run with writes disabled = %d, want 200", dry.Code)
	}
	undo := c.post("/runs/"+s.run+"/undo", confirmForm(t, dry.Body))
	if undo.Code != http.StatusServiceUnavailable {
		t.Fatalf("undo with writes disabled = %d, want 503", undo.Code)
	}
	mustContain(t, "refused undo", undo.Body, "Refused: writes are off on this server")
	one := c.post("/changes/"+s.single+"/undo", nil)
	if one.Code != http.StatusServiceUnavailable {
		t.Fatalf("undo change with writes disabled = %d, want 503", one.Code)
	}
	mustContain(t, "refused change undo", one.Body, "was not undone: writes are off")
	if f.snapshot() != before {
		t.Error("a refused undo changed something")
	}
}

// A run's page shows its changes a page at a time, newest first, with
// links to the older and the newest ones.
func TestRunPage_PagesItsChanges(t *testing.T) {
	f := newFixture(t)
	run := f.startRun("Many")
	var ids []string
	for i := range 230 {
		ids = append(ids, f.preview(run, "set_value", fmt.Sprintf("k%03d", i), "v"))
	}
	c := f.login()
	seen := map[string]bool{}
	next, pages := "/runs/"+run, 0
	for next != "" {
		res := c.get(next)
		if res.Code != http.StatusOK {
			t.Fatalf("%s = %d", next, res.Code)
		}
		pages++
		n := 0
		for _, id := range ids {
			if strings.Contains(res.Body, `<article class="card change" id="`+id+`">`) {
				if seen[id] {
					t.Fatalf("%s shown on two pages", id)
				}
				seen[id] = true
				n++
			}
		}
		if n > 50 {
			t.Fatalf("page %d shows %d changes", pages, n)
		}
		next = ""
		if m := regexp.MustCompile(`href="(/runs/` + run + `\?before=chg_[0-9a-f]+)" rel="next">Older →`).FindStringSubmatch(res.Body); m != nil {
			next = m[1]
			if !strings.Contains(c.get(next).Body, "← Newest") {
				t.Fatal("an older page has no link back to the newest")
			}
		}
	}
	if pages != 5 || len(seen) != len(ids) {
		t.Fatalf("%d pages showed %d of %d changes", pages, len(seen), len(ids))
	}
}
