package dashboard_test

import (
	"io"
	"net/http"
	"net/http/cookiejar"
	"net/http/httptest"
	"net/url"
	"os"
	"path/filepath"
	"strings"
	"testing"

	changeset "github.com/mcp-changeset/changeset-go"
	"github.com/mcp-changeset/changeset-go/dashboard"
	"github.com/mcp-changeset/changeset-go/ledger"
)

// The people of the tests' people file, and their login tokens.
const (
	anaToken = "ana-s-own-token-0123456789abcdef"
	bobToken = "bob-s-own-token-0123456789abcdef"
)

// writePeople writes a people file and returns its path.
func writePeople(t *testing.T, content string) string {
	t.Helper()
	path := filepath.Join(t.TempDir(), "people")
	if err := os.WriteFile(path, []byte(content), 0o600); err != nil {
		t.Fatal(err)
	}
	return path
}

// newPeopleFixture is a fixture whose dashboard signs in ana and bob with
// their own tokens, and no one with a shared one; edit adjusts it further.
func newPeopleFixture(t *testing.T, edit ...func(*changeset.Options, *dashboard.Options)) *fixture {
	t.Helper()
	people, err := dashboard.PeopleFromFile(writePeople(t, "# the team\n"+anaToken+" ana\n"+bobToken+"\tbob\n"), nil)
	if err != nil {
		t.Fatal(err)
	}
	f := newFixture(t, append([]func(*changeset.Options, *dashboard.Options){func(_ *changeset.Options, d *dashboard.Options) {
		d.LoginToken, d.Person, d.People = "", "", people
	}}, edit...)...)
	f.tokens = append(f.tokens, anaToken, bobToken)
	return f
}

// web is a person's browser over real HTTP: a cookie jar, redirects not
// followed, the latest CSRF token kept.
type web struct {
	f    *fixture
	base string
	hc   *http.Client
	csrf string
}

// serve serves f's dashboard on a loopback port for the test, keeping
// every response for the search for secrets.
func (f *fixture) serve() string {
	f.t.Helper()
	rec := &recording{h: f.dash}
	srv := httptest.NewServer(rec)
	f.t.Cleanup(func() {
		srv.Close()
		rec.mu.Lock()
		f.bodies = append(f.bodies, rec.bodies...)
		rec.mu.Unlock()
	})
	return srv.URL
}

func (f *fixture) web(base string) *web {
	jar, _ := cookiejar.New(nil)
	return &web{f: f, base: base, hc: &http.Client{Jar: jar, CheckRedirect: func(*http.Request, []*http.Request) error {
		return http.ErrUseLastResponse
	}}}
}

func (w *web) send(req *http.Request) response {
	w.f.t.Helper()
	res, err := w.hc.Do(req)
	if err != nil {
		w.f.t.Fatal(err)
	}
	defer res.Body.Close()
	body, err := io.ReadAll(res.Body)
	if err != nil {
		w.f.t.Fatal(err)
	}
	if m := csrfField.FindStringSubmatch(string(body)); m != nil {
		w.csrf = m[1]
	}
	return response{Code: res.StatusCode, Header: res.Header, Body: string(body)}
}

func (w *web) get(path string) response {
	w.f.t.Helper()
	req, err := http.NewRequest(http.MethodGet, w.base+path, nil)
	if err != nil {
		w.f.t.Fatal(err)
	}
	return w.send(req)
}

// post sends a form with the latest CSRF token unless form sets its own.
func (w *web) post(path string, form url.Values) response {
	w.f.t.Helper()
	if form == nil {
		form = url.Values{}
	}
	if _, ok := form["csrf"]; !ok {
		form.Set("csrf", w.csrf)
	}
	req, err := http.NewRequest(http.MethodPost, w.base+path, strings.NewReader(form.Encode()))
	if err != nil {
		w.f.t.Fatal(err)
	}
	req.Header.Set("Content-Type", "application/x-www-form-urlencoded")
	return w.send(req)
}

// login signs in with token and loads the runs page.
func (w *web) login(token string) response {
	w.f.t.Helper()
	res := w.get("/login?token=" + url.QueryEscape(token))
	if res.Code != http.StatusSeeOther || res.Header.Get("Location") != "/" {
		w.f.t.Fatalf("login: %d to %q, want 303 to /:\n%s", res.Code, res.Header.Get("Location"), res.Body)
	}
	for _, c := range w.hc.Jar.Cookies(mustURL(w.f.t, w.base)) {
		w.f.tokens = append(w.f.tokens, c.Value) // no page may show a session ID
	}
	home := w.get("/")
	if home.Code != http.StatusOK {
		w.f.t.Fatalf("GET / after login: %d", home.Code)
	}
	return home
}

func mustURL(t *testing.T, s string) *url.URL {
	u, err := url.Parse(s)
	if err != nil {
		t.Fatal(err)
	}
	return u
}

// undoneBy returns who the ledger's history says undid the change or the
// run (the entry that moved it to undone or partially_undone).
func undoneBy(t *testing.T, f *fixture, changeID, runID string) []string {
	t.Helper()
	entries, err := f.guard.Ledger().History(t.Context(), ledger.HistoryFilter{ChangeID: changeID, RunID: runID})
	if err != nil {
		t.Fatal(err)
	}
	var by []string
	for _, e := range entries {
		if e.ChangeID == changeID && (e.To == string(ledger.Undone) || e.To == string(ledger.RunUndone) || e.To == string(ledger.RunPartiallyUndone)) {
			by = append(by, e.By)
		}
	}
	return by
}

// Two people sign in over HTTP with their own tokens; each one's undo is
// recorded in the history as person:<their name>.
func TestPeople_EachSignsInWithTheirOwnTokenAndUndoesAsThemselves(t *testing.T) {
	f := newPeopleFixture(t)
	s := f.build()
	base := f.serve()
	ana, bob := f.web(base), f.web(base)
	mustContain(t, "ana's home", ana.login(anaToken).Body, "Signed in as <strong>ana</strong>", `action="/logout"`, "recorded in the ledger as <code>person:ana</code>")
	mustContain(t, "bob's home", bob.login(bobToken).Body, "Signed in as <strong>bob</strong>", "recorded in the ledger as <code>person:bob</code>")

	ana.get("/changes/" + s.single)
	if res := ana.post("/changes/"+s.single+"/undo", nil); res.Code != http.StatusSeeOther {
		t.Fatalf("ana's undo = %d:\n%s", res.Code, res.Body)
	}
	mustContain(t, "ana's change page", ana.get("/changes/"+s.single).Body, "Change undone by person:ana.")
	dry := bob.post("/runs/"+s.run+"/dry-run", nil)
	if res := bob.post("/runs/"+s.run+"/undo", confirmForm(t, dry.Body)); res.Code != http.StatusSeeOther {
		t.Fatalf("bob's run undo = %d:\n%s", res.Code, res.Body)
	}

	if by := undoneBy(t, f, s.single, ""); len(by) != 1 || by[0] != "person:ana" {
		t.Errorf("the history of ana's undo names %q, want [person:ana]", by)
	}
	if by := undoneBy(t, f, "", s.run); len(by) != 1 || by[0] != "person:bob" {
		t.Errorf("the history of bob's run undo names %q, want [person:bob]", by)
	}
	for _, id := range s.changes[:2] {
		if by := undoneBy(t, f, id, ""); len(by) != 1 || by[0] != "person:bob" {
			t.Errorf("the history of %s names %q, want [person:bob]", id, by)
		}
	}
}

// With People set there is no shared token: LoginToken is empty, the login
// link carries none, and a token that is not a person's is refused.
func TestPeople_SharedTokenIsRefusedAndAWrongTokenSignsNobodyIn(t *testing.T) {
	f := newPeopleFixture(t)
	s := f.build()
	if f.dash.LoginToken() != "" {
		t.Error("LoginToken is not empty with People set")
	}
	if got := f.dash.LoginURL("http://127.0.0.1:8080/"); got != "http://127.0.0.1:8080/login" {
		t.Errorf("LoginURL = %q, want the link without a token", got)
	}
	base := f.serve()
	before := f.snapshot()
	for _, token := range []string{loginToken, "", "ana", anaToken + "x", strings.ToUpper(anaToken), anaToken[:len(anaToken)-1]} {
		w := f.web(base)
		res := w.get("/login?token=" + url.QueryEscape(token))
		if res.Code != http.StatusUnauthorized || res.Header.Get("Set-Cookie") != "" {
			t.Errorf("login with %.8q… = %d (cookie %q), want 401 and no cookie", token, res.Code, res.Header.Get("Set-Cookie"))
		}
		mustContain(t, "refused login", res.Body, "/login?token=YOUR_TOKEN")
		if token != "" {
			mustContain(t, "refused login", res.Body, "not in the dashboard&#39;s people file")
		}
		if res := w.post("/changes/"+s.single+"/undo", url.Values{"csrf": {"x"}}); res.Code != http.StatusUnauthorized {
			t.Errorf("an undo after a refused login = %d, want 401", res.Code)
		}
	}
	if f.snapshot() != before {
		t.Error("a refused login changed something")
	}
	// Bob's token signs in bob, never ana: a token is its person's.
	bob := f.web(base)
	home := bob.login(bobToken)
	if strings.Contains(home.Body, "ana") {
		t.Error("bob's page names ana")
	}
	bob.get("/changes/" + s.single)
	bob.post("/changes/"+s.single+"/undo", nil)
	if rec, _ := f.guard.Record(t.Context(), s.single); rec.UndoneBy != "person:bob" {
		t.Errorf("undone_by = %q, want person:bob", rec.UndoneBy)
	}
}

// A POST without the session's CSRF token is refused with 403 and changes
// nothing, for a person signed in with their own token.
func TestPeople_PostWithoutCSRFIs403AndChangesNothing(t *testing.T) {
	f := newPeopleFixture(t)
	s := f.build()
	ana := f.web(f.serve())
	ana.login(anaToken)
	other := f.web(ana.base)
	other.login(bobToken) // bob's CSRF token is not ana's
	before := f.snapshot()
	for _, form := range []url.Values{{"csrf": nil}, {"csrf": {""}}, {"csrf": {"forged"}}, {"csrf": {other.csrf}}} {
		for _, path := range []string{"/changes/" + s.single + "/undo", "/runs/" + s.run + "/undo", "/runs/" + s.run + "/dry-run"} {
			res := ana.post(path, form)
			if res.Code != http.StatusForbidden || !strings.Contains(res.Body, "Nothing was changed") {
				t.Errorf("POST %s with csrf %q = %d, want 403", path, form["csrf"], res.Code)
			}
		}
	}
	if f.snapshot() != before {
		t.Error("a POST without a valid CSRF token changed something")
	}
}

func TestPeople_OptionsThatConflictAreRefused(t *testing.T) {
	f := newPeopleFixture(t)
	people, err := dashboard.PeopleFromFile(writePeople(t, anaToken+" ana\n"), nil)
	if err != nil {
		t.Fatal(err)
	}
	for name, o := range map[string]dashboard.Options{
		"shared token and people": {LoginToken: loginToken, People: people},
		"empty people":            {People: &dashboard.People{}},
		"header with a space":     {TrustedHeader: "X Forwarded User"},
		"header a browser sets":   {TrustedHeader: "cookie"},
		"header with a colon":     {TrustedHeader: "X-User:"},
	} {
		if _, err := dashboard.New(f.guard, o); err == nil {
			t.Errorf("%s: New accepted it", name)
		} else if strings.Contains(err.Error(), loginToken) {
			t.Errorf("%s: the error shows the token: %v", name, err)
		}
	}
	if _, err := dashboard.New(f.guard, dashboard.Options{People: people, TrustedHeader: "X-Forwarded-User"}); err != nil {
		t.Errorf("people and a trusted header together: %v", err)
	}
}

// A people file with a duplicate token, a bad line or a bad name is a
// clear error that names the file and the line, never the token.
func TestPeopleFromFile_ErrorsNameFileAndLineNeverTheToken(t *testing.T) {
	for _, tc := range []struct{ content, want string }{
		{"topsecret-token-0123 ana\ntopsecret-token-0123 bob\n", "line 2: the same token is on line 1"},
		{"# team\ntopsecret-token-0123\n", `line 2: want "TOKEN NAME" (two fields)`},
		{"topsecret-token-0123 ana bob\n", `line 1: want "TOKEN NAME"`},
		{"topsecret-token-0123 an\u202ea\n", "line 1: a person's name must not hold control or format characters"},
		{"topsecret-token-0123 " + strings.Repeat("a", 65) + "\n", "line 1: a person's name must be 1 to 64 bytes"},
		{"topsecret-token-0123 an\xffa\n", "line 1: a person's name must be valid UTF-8"},
		{"\n# nobody yet\n", "holds no tokens"},
	} {
		path := writePeople(t, tc.content)
		_, err := dashboard.PeopleFromFile(path, nil)
		if err == nil || !strings.Contains(err.Error(), tc.want) || !strings.Contains(err.Error(), "people file "+path) {
			t.Errorf("%q: %v; want the path and %q", tc.content, err, tc.want)
		}
		if err != nil && strings.Contains(err.Error(), "topsecret") {
			t.Errorf("%q: the error shows the token: %v", tc.content, err)
		}
	}
	if _, err := dashboard.PeopleFromFile(filepath.Join(t.TempDir(), "missing"), nil); err == nil || !strings.Contains(err.Error(), "people file") {
		t.Errorf("a missing file: %v", err)
	}
}

// agentWork makes the agent named name start a run labelled label and
// set key to value in it, over MCP; it returns the run and the change.
func (f *fixture) agentWork(name, label, key, value string) (runID, changeID string) {
	f.t.Helper()
	cs := connectAs(f.t, f.server, name)
	runID, _ = f.callToolOn(cs, "start_run", map[string]any{"label": label})["run_id"].(string)
	p := f.callToolOn(cs, "preview_set_value", map[string]any{"key": key, "value": value, "run_id": runID})
	changeID, _ = p["change_id"].(string)
	tok, _ := p["confirmation_token"].(string)
	f.tokens = append(f.tokens, tok)
	res := f.callToolOn(cs, "apply_change", map[string]any{"change_id": changeID, "confirmation_token": tok})
	if u, _ := res["undo_token"].(string); u != "" {
		f.tokens = append(f.tokens, u)
	}
	if runID == "" || changeID == "" {
		f.t.Fatalf("agent %s: run %q, change %q", name, runID, changeID)
	}
	return runID, changeID
}

// "My agents' work" lists only the changes of agent:<the person>; the
// lists say whose agent started each run and each change's run label.
func TestPeople_MyAgentsWorkAndWhoseAgentDidIt(t *testing.T) {
	f := newPeopleFixture(t)
	f.build()
	anaRun, anaChange := f.agentWork("ana", "Ana's clean-up", "theme", "ana-blue")
	_, bobChange := f.agentWork("bob", "Bob's clean-up", "theme", "bob-green")
	ana := f.web(f.serve())
	home := ana.login(anaToken)
	mustContain(t, "runs page", home.Body,
		`<th scope="col">Started by</th>`,
		`<a class="actor-link" href="/changes?by=agent%3Aana"><span class="who agent" title="an agent, with a token">agent:ana</span></a>`,
		`<a class="actor-link" href="/changes?by=agent%3Abob"><span class="who agent" title="an agent, with a token">agent:bob</span></a>`)
	// The runs list filters to the runs ana's agent started, from the
	// runs' own started_by (an index, not each run's history).
	mustContain(t, "runs page", home.Body, `<a class="button" href="/?by=agent%3aana">My agents' work</a>`)
	myRuns := ana.get("/?by=agent%3aana")
	mustContain(t, "ana's runs", myRuns.Body, "Showing your agents' runs", `href="/runs/`+anaRun+`"`, `<a href="/">Show everyone's</a>`)
	if strings.Contains(myRuns.Body, "Bob&#39;s clean-up") {
		t.Error("ana's agents' runs list bob's run")
	}
	mustContain(t, "nobody's runs", ana.get("/?by=agent%3anobody").Body, "No runs started by <code>agent:nobody</code>")

	all := ana.get("/changes")
	mustContain(t, "changes page", all.Body,
		`<a class="button" href="/changes?by=agent%3aana">My agents' work</a>`,
		`<a href="/runs/`+anaRun+`">Ana&#39;s clean-up</a>`, `<a href="/runs/`+anaRun+`">`)
	if got := listed(all.Body); len(got) < 3 {
		t.Fatalf("the unfiltered list shows %d changes", len(got))
	}
	mine := ana.get("/changes?by=agent%3aana")
	if got := listed(mine.Body); len(got) != 1 || got[0] != anaChange {
		t.Errorf("ana's agents' work lists %v, want only %s (not bob's %s)", got, anaChange, bobChange)
	}
	mustContain(t, "ana's agents' work", mine.Body, "Showing your agents' work", `<a href="/changes">Show everyone's</a>`)

	// With the shared login token under the default name nobody in
	// particular is signed in: no "My agents' work". An Options.Person
	// that was set, or WithPerson, names someone.
	g := newFixture(t, func(_ *changeset.Options, d *dashboard.Options) { d.Person = "" })
	g.build()
	if body := g.login().get("/changes").Body; strings.Contains(body, "My agents") || !strings.Contains(body, "Signed in as <strong>dashboard</strong>") {
		t.Error("the shared login offers My agents' work, or does not say who is signed in")
	}
	named := newFixture(t) // Options.Person: "ana"
	mustContain(t, "shared login as ana", named.login().get("/changes").Body, `href="/changes?by=agent%3aana">My agents' work</a>`)
	wrapped := newFixture(t, func(_ *changeset.Options, d *dashboard.Options) {
		d.Person = ""
		d.Wrap = func(h http.Handler) http.Handler {
			return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
				h.ServeHTTP(w, r.WithContext(dashboard.WithPerson(r.Context(), "erin")))
			})
		}
	})
	mustContain(t, "WithPerson erin", wrapped.login().get("/changes").Body, "Signed in as <strong>erin</strong>", `href="/changes?by=agent%3aerin">My agents' work</a>`)
}
