package dashboard_test

import (
	"context"
	"encoding/json"
	"net/http"
	"net/url"
	"reflect"
	"regexp"
	"strings"
	"testing"

	"github.com/mcp-changeset/changeset-go/ledger"
)

var planField = regexp.MustCompile(`name="plan" value="([^"]+)"`)

// planOf returns the plan fingerprint of a dry-run page.
func planOf(t *testing.T, body string) string {
	t.Helper()
	m := planField.FindStringSubmatch(body)
	if m == nil {
		t.Fatalf("dry-run page has no confirm form:\n%s", body)
	}
	return m[1]
}

// changeField finds the changes a dry-run page's confirm form hands back.
var changeField = regexp.MustCompile(`<input type="hidden" name="change" value="([^"]+)">`)

// confirmForm is what a browser posts from a dry-run page's confirm form:
// the plan's fingerprint and the changes the plan acts on.
func confirmForm(t *testing.T, body string) url.Values {
	t.Helper()
	v := url.Values{"plan": {planOf(t, body)}}
	for _, m := range changeField.FindAllStringSubmatch(body, -1) {
		v.Add("change", m[1])
	}
	return v
}

const dryRunMessage = "This is what undoing will do. Nothing has been changed yet."

func TestDryRun_ShowsThePlanAndChangesNothing(t *testing.T) {
	f := newFixture(t)
	s := f.build()
	c := f.login()
	c.get("/runs/" + s.run)
	before := f.snapshot()
	res := c.post("/runs/"+s.run+"/dry-run", nil)
	if res.Code != http.StatusOK {
		t.Fatalf("dry run = %d:\n%s", res.Code, res.Body)
	}
	if after := f.snapshot(); after != before {
		t.Fatalf("the dry run changed the ledger or the store:\nbefore %s\nafter  %s", before, after)
	}
	mustContain(t, "dry-run page", res.Body, dryRunMessage,
		"Will be undone", "Set language to &#34;fr&#34;", "Set theme to &#34;dark&#34;",
		"No net change", "Set banner to &#34;welcome&#34;", "Delete banner",
		"Skipped", "its resource changed after it was applied",
		"Cannot be undone exactly", "its operation has no undo",
		`action="/runs/`+s.run+`/undo"`, "Undo this run", "Cancel")
	planOf(t, res.Body)
	if i, j := strings.Index(res.Body, "Set language to"), strings.Index(res.Body, "Set theme to"); i > j {
		t.Error("the plan is not newest first")
	}
}

func TestUndoRun_ConfirmUndoesAsAPersonAndShowsTheStoredReport(t *testing.T) {
	f := newFixture(t)
	s := f.build()
	c := f.login()
	dry := c.post("/runs/"+s.run+"/dry-run", nil)
	res := c.post("/runs/"+s.run+"/undo", confirmForm(t, dry.Body))
	if res.Code != http.StatusSeeOther || res.Header.Get("Location") != "/runs/"+s.run {
		t.Fatalf("confirm = %d to %q, want 303 to the run:\n%s", res.Code, res.Header.Get("Location"), res.Body)
	}
	want := "theme=\"light\"\nlanguage=\"en\"\nmotd=\"edited by a person\"\nlog=\"tidied\"\n"
	if got := f.store.dump(); !sameLines(got, want+"colour=\"blue\"\nvolume=\"11\"\n") {
		t.Errorf("store after undo:\n%s", got)
	}
	run, err := f.guard.Ledger().Run(context.Background(), s.run)
	if err != nil {
		t.Fatal(err)
	}
	if run.Status != ledger.RunPartiallyUndone || run.UndoneBy != "person:ana" {
		t.Errorf("run = %s by %q, want partially_undone by person:ana", run.Status, run.UndoneBy)
	}
	for _, id := range s.changes[:2] {
		if rec, _ := f.guard.Record(context.Background(), id); rec.Status != ledger.Undone || rec.UndoneBy != "person:ana" {
			t.Errorf("change %s = %s by %q, want undone by person:ana", id, rec.Status, rec.UndoneBy)
		}
	}

	page := c.get("/runs/" + s.run)
	mustContain(t, "run page after undo", page.Body,
		"Run partly undone by person:ana", "Undo report", "This report is stored with the run",
		`<span class="badge st-partially_undone">partially undone</span>`, `<span class="who person"`, ">person:ana</span>",
		"Undone", "Skipped", "its resource changed after it was applied", "No net change", "Cannot be undone exactly",
		"Undone: Set theme to")
	if strings.Contains(page.Body, "/dry-run") {
		t.Error("an undone run still offers a dry run")
	}
	if again := c.get("/runs/" + s.run); strings.Contains(again.Body, "Run partly undone by") {
		t.Error("the success message is shown twice")
	}
	// Confirming again undoes nothing more and points to the report.
	before := f.snapshot()
	res = c.post("/runs/"+s.run+"/undo", confirmForm(t, dry.Body))
	if res.Code != http.StatusSeeOther || f.snapshot() != before {
		t.Errorf("second confirm = %d, or it changed something", res.Code)
	}
	mustContain(t, "run page", c.get("/runs/"+s.run).Body, "already been undone")
}

func TestUndoRun_PlanChangedSinceReviewUndoesNothing(t *testing.T) {
	f := newFixture(t)
	s := f.build()
	c := f.login()
	dry := c.post("/runs/"+s.run+"/dry-run", nil)
	other := "de"
	f.store.put("language", &other) // a person edits it while the dry run is on screen
	before := f.snapshot()
	for _, plan := range []url.Values{{"plan": {planOf(t, dry.Body)}}, nil} {
		res := c.post("/runs/"+s.run+"/undo", plan)
		if res.Code != http.StatusConflict {
			t.Fatalf("confirm of an outdated plan = %d, want 409", res.Code)
		}
		mustContain(t, "refused confirm", res.Body, "has changed since you reviewed it", dryRunMessage)
		if f.snapshot() != before {
			t.Fatal("a confirm of an outdated plan changed something")
		}
		dry = res
	}
	res := c.post("/runs/"+s.run+"/undo", confirmForm(t, dry.Body))
	if res.Code != http.StatusSeeOther {
		t.Fatalf("confirm of the new plan = %d", res.Code)
	}
	if v, _ := f.store.get("language"); v != "de" {
		t.Errorf("language = %q: the undo overwrote a person's edit", v)
	}
}

func TestUndoRun_FromDashboardEqualsAgentsUndoRun(t *testing.T) {
	a, b := newFixture(t), newFixture(t)
	sa, sb := a.build(), b.build()

	c := a.login()
	dry := c.post("/runs/"+sa.run+"/dry-run", nil)
	if res := c.post("/runs/"+sa.run+"/undo", confirmForm(t, dry.Body)); res.Code != http.StatusSeeOther {
		t.Fatalf("dashboard undo = %d", res.Code)
	}
	out := b.callTool("undo_run", map[string]any{"run_id": sb.run})
	tok := out["confirmation_token"].(string)
	b.tokens = append(b.tokens, tok)
	b.callTool("undo_run", map[string]any{"run_id": sb.run, "dry_run": false, "confirmation_token": tok})

	if a.store.dump() != b.store.dump() {
		t.Errorf("state differs:\ndashboard:\n%s\nagent:\n%s", a.store.dump(), b.store.dump())
	}
	for i := range sa.changes {
		ra, _ := a.guard.Record(context.Background(), sa.changes[i])
		rb, _ := b.guard.Record(context.Background(), sb.changes[i])
		if ra.Status != rb.Status || strings.ReplaceAll(ra.Note, sa.run, "RUN") != strings.ReplaceAll(rb.Note, sb.run, "RUN") {
			t.Errorf("change %d: dashboard %s %q, agent %s %q", i, ra.Status, ra.Note, rb.Status, rb.Note)
		}
		if ra.UndoneBy != "" && (ra.UndoneBy != "person:ana" || rb.UndoneBy != "agent:agent") {
			t.Errorf("change %d undone by %q and %q, want person:ana and agent:agent (the agent's client is named agent)", i, ra.UndoneBy, rb.UndoneBy)
		}
	}
	ra, rb := storedReport(t, a, sa), storedReport(t, b, sb)
	if ra["undone_by"] != "person:ana" || rb["undone_by"] != "agent:agent" {
		t.Errorf("undone_by = %v and %v", ra["undone_by"], rb["undone_by"])
	}
	delete(ra, "undone_by")
	delete(rb, "undone_by")
	if !reflect.DeepEqual(ra, rb) {
		ja, _ := json.MarshalIndent(ra, "", " ")
		jb, _ := json.MarshalIndent(rb, "", " ")
		t.Errorf("reports differ:\ndashboard %s\nagent %s", ja, jb)
	}
}

// storedReport reads a run's stored report with its change and run IDs
// replaced by their position in the scenario, so that two setups compare.
func storedReport(t *testing.T, f *fixture, s scenario) map[string]any {
	t.Helper()
	run, err := f.guard.Ledger().Run(context.Background(), s.run)
	if err != nil || run.Report == nil {
		t.Fatalf("run %s has no stored report (%v)", s.run, err)
	}
	text := strings.ReplaceAll(string(run.Report), s.run, "RUN")
	for i, id := range s.changes {
		text = strings.ReplaceAll(text, id, "#"+string(rune('0'+i)))
	}
	var m map[string]any
	if err := json.Unmarshal([]byte(text), &m); err != nil {
		t.Fatal(err)
	}
	return m
}

func TestUndoChange_UndoesOneChangeAsAPerson(t *testing.T) {
	f := newFixture(t)
	s := f.build()
	c := f.login()
	c.get("/changes/" + s.single)
	res := c.post("/changes/"+s.single+"/undo", nil)
	if res.Code != http.StatusSeeOther || res.Header.Get("Location") != "/changes/"+s.single {
		t.Fatalf("undo = %d to %q:\n%s", res.Code, res.Header.Get("Location"), res.Body)
	}
	if v, _ := f.store.get("volume"); v != "5" {
		t.Errorf("volume = %q after undo, want 5", v)
	}
	if rec, _ := f.guard.Record(context.Background(), s.single); rec.Status != ledger.Undone || rec.UndoneBy != "person:ana" {
		t.Errorf("change = %s by %q, want undone by person:ana", rec.Status, rec.UndoneBy)
	}
	page := c.get("/changes/" + s.single)
	mustContain(t, "change page", page.Body, "Change undone by person:ana.", `<span class="badge st-undone">undone</span>`,
		"Undone", `<span class="who person"`)
	if strings.Contains(page.Body, `action="/changes/`+s.single+`/undo"`) {
		t.Error("an undone change still offers an undo")
	}
	before := f.snapshot()
	again := c.post("/changes/"+s.single+"/undo", nil)
	if again.Code != http.StatusConflict || f.snapshot() != before {
		t.Fatalf("second undo = %d (or it changed something), want 409", again.Code)
	}
	mustContain(t, "refusal", again.Body, "Refused: change "+s.single+" cannot be undone (status: undone)")
}

func TestUndoChange_LaterEditIsRefusedWithTheLibrarysReason(t *testing.T) {
	f := newFixture(t)
	s := f.build()
	c := f.login()
	c.get("/changes/" + s.single)
	mine := "7"
	f.store.put("volume", &mine)
	res := c.post("/changes/"+s.single+"/undo", nil)
	if res.Code != http.StatusConflict {
		t.Fatalf("undo over a later edit = %d, want 409", res.Code)
	}
	mustContain(t, "refusal", res.Body, "Refused: change "+s.single+" was not undone: the resource changed after the change was applied")
	if v, _ := f.store.get("volume"); v != "7" {
		t.Errorf("volume = %q: the undo overwrote a later edit", v)
	}
}

func TestNoSecretInAnyResponse_EveryPageAndAction(t *testing.T) {
	f := newFixture(t)
	s := f.build()
	c := f.login()
	changes, runs := f.rows()
	for _, r := range runs {
		c.get("/runs/" + r.ID)
		c.post("/runs/"+r.ID+"/dry-run", nil)
	}
	for _, ch := range changes {
		c.get("/changes/" + ch.ID)
	}
	for _, st := range ledger.Statuses {
		c.get("/changes?status=" + string(st))
	}
	dry := c.post("/runs/"+s.run+"/dry-run", nil)
	c.post("/runs/"+s.run+"/undo", confirmForm(t, dry.Body))
	c.get("/runs/" + s.run)
	c.post("/changes/"+s.single+"/undo", nil)
	c.get("/changes/" + s.single)
	c.post("/changes/"+s.pending+"/undo", nil)
	c.get("/")
	f.anonymous().get("/login?token=wrong-token-0123456789")
	if len(f.bodies) < 25 {
		t.Fatalf("only %d responses searched", len(f.bodies))
	}
	f.assertNoSecrets() // and again at cleanup, after every test
}

// sameLines reports whether a and b hold the same lines in any order.
func sameLines(a, b string) bool {
	la, lb := strings.Split(strings.TrimSpace(a), "\n"), strings.Split(strings.TrimSpace(b), "\n")
	if len(la) != len(lb) {
		return false
	}
	seen := map[string]int{}
	for _, l := range la {
		seen[l]++
	}
	for _, l := range lb {
		seen[l]--
	}
	for _, n := range seen {
		if n != 0 {
			return false
		}
	}
	return true
}

// The confirm carries out the changes the person reviewed and no others:
// a form that hands back fewer changes than the plan undoes fewer.
func TestUndoRun_ConfirmCarriesOutOnlyTheReviewedChanges(t *testing.T) {
	f := newFixture(t)
	s := f.build()
	c := f.login()
	dry := c.post("/runs/"+s.run+"/dry-run", nil)
	form := confirmForm(t, dry.Body)
	planned := form["change"]
	if len(planned) < 2 {
		t.Fatalf("the confirm form lists %d changes, want the plan's (at least 2)", len(planned))
	}
	form["change"] = planned[:1]
	if res := c.post("/runs/"+s.run+"/undo", form); res.Code != http.StatusSeeOther {
		t.Fatalf("confirm = %d:\n%s", res.Code, res.Body)
	}
	ctx := context.Background()
	for _, id := range planned {
		rec, err := f.guard.Record(ctx, id)
		if err != nil {
			t.Fatal(err)
		}
		if want := id == planned[0]; (rec.Status == ledger.Undone) != want {
			t.Errorf("change %s = %s; undone should be %v", id, rec.Status, want)
		}
	}
	page := c.get("/runs/" + s.run)
	mustContain(t, "run page", page.Body, "not part of the plan that was reviewed")
}

// The quickstart's case through the dashboard: two edits of one setting
// whose proposals name no resource. The dry run plans both undos, and the
// confirm carries out exactly that plan.
func TestUndoRun_TwoEditsOfAnUnnamedSettingAreBothUndone(t *testing.T) {
	f := newFixture(t)
	run := f.startRun("Theme twice")
	first := f.do(run, "set_plain", "theme", "dark")
	second := f.do(run, "set_plain", "theme", "blue")
	c := f.login()
	dry := c.post("/runs/"+run+"/dry-run", nil)
	form := confirmForm(t, dry.Body)
	if got := form["change"]; len(got) != 2 || got[0] != second || got[1] != first {
		t.Fatalf("the reviewed plan = %v, want both changes, newest first", got)
	}
	mustContain(t, "dry-run page", dry.Body, "Will be undone", "neither this change nor change")
	if res := c.post("/runs/"+run+"/undo", form); res.Code != http.StatusSeeOther {
		t.Fatalf("confirm = %d", res.Code)
	}
	if v, _ := f.store.get("theme"); v != "light" {
		t.Fatalf("theme = %q after the undo, want light as before the run", v)
	}
}
