package main

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"net/http/cookiejar"
	"net/url"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/mcp-changeset/changeset-go/examples/internal/exampletest"
	"github.com/mcp-changeset/changeset-go/internal/testbin"
	"github.com/mcp-changeset/changeset-go/ledger"
	"github.com/modelcontextprotocol/go-sdk/mcp"
)

// Who did what, end to end: two bearer identities over Streamable HTTP, a
// person on the dashboard, and a stdio client known by its name. Each
// step is then read back from the ledger's rows, the operator's CLI
// (show, list --by, log --json, log --since) and the dashboard's pages.

// move is one expected transition of a change or run: from, to, by.
type move struct{ from, to, by string }

func (m move) String() string { return m.from + "→" + m.to + " by " + m.by }

// lifeOf lists the moves of a change previewed and applied by by, and
// undone by undoneBy ("" when not undone).
func lifeOf(by, undoneBy string) []move {
	ms := []move{{"", "pending", by}, {"pending", "applying", by}, {"applying", "applied", by}}
	if undoneBy != "" {
		ms = append(ms, move{"applied", "undoing", undoneBy}, move{"undoing", "undone", undoneBy})
	}
	return ms
}

func TestWhoDidWhat_TwoBearerIdentitiesAndAPerson(t *testing.T) {
	dir := t.TempDir()
	ledgerPath := filepath.Join(dir, "ledger.db")
	tokens := filepath.Join(dir, "tokens")
	if err := os.WriteFile(tokens, []byte(aliceToken+" alice\n"+bobToken+" bob\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	p := exampletest.StartHTTP(t, "settings", []string{"--ledger", ledgerPath, "--http", "127.0.0.1:0",
		"--auth-token-file", tokens, "--dashboard", "127.0.0.1:0"}, exampletest.Guarded)
	login := strings.TrimSpace(p.Stderr.WaitLine(t, "settings: dashboard: ", 10*time.Second))
	alice, bob := p.Connect(t, aliceToken), p.Connect(t, bobToken)
	secrets := []string{aliceToken, bobToken, login[strings.Index(login, "token=")+len("token="):]}

	// Alice, in a task run: sets the theme and the language, and leaves a
	// third preview pending.
	run := alice.StartRun("alice's task")
	aTheme := alice.Preview("set_setting", map[string]any{"key": "theme", "value": "dark", "run_id": run})
	aThemeApplied := alice.Apply(aTheme)
	aLang := alice.Preview("set_setting", map[string]any{"key": "language", "value": "fr", "run_id": run})
	alice.Apply(aLang)
	aPending := alice.Preview("set_setting", map[string]any{"key": "language", "value": "de", "run_id": run})
	secrets = append(secrets, aTheme.ConfirmationToken, aThemeApplied.UndoToken, aLang.ConfirmationToken, aPending.ConfirmationToken)
	phase1 := time.Now()
	time.Sleep(3 * time.Second) // log --since must tell the two phases apart

	// Bob cannot touch alice's changes, even holding her tokens: her
	// changes are not in his scope.
	bob.ApplyRefused(aPending, "not found")
	bob.UndoRefused(aThemeApplied, "not found")
	bob.Refused("get_change_status", map[string]any{"change_id": aTheme.ChangeID}, "not found")

	// Bob, in his session run: sets the theme and undoes it, then sets
	// the language.
	bTheme := bob.Preview("set_setting", map[string]any{"key": "theme", "value": "blue"})
	bThemeApplied := bob.Apply(bTheme)
	bob.Undo(bThemeApplied)
	bLang := bob.Preview("set_setting", map[string]any{"key": "language", "value": "es"})
	bob.Apply(bLang)
	secrets = append(secrets, bTheme.ConfirmationToken, bThemeApplied.UndoToken, bLang.ConfirmationToken)
	bobRun, _ := bob.Must("get_change_status", map[string]any{"change_id": bTheme.ChangeID})["run_id"].(string)
	if bobRun == "" || bobRun == run {
		t.Fatalf("bob's change is in run %q; want a session run of his own (alice's is %s)", bobRun, run)
	}
	st := alice.Must("get_change_status", map[string]any{"change_id": aLang.ChangeID})
	if st["previewed_by"] != "agent:alice" || st["applied_by"] != "agent:alice" {
		t.Errorf("get_change_status of alice's change: previewed_by %v, applied_by %v", st["previewed_by"], st["applied_by"])
	}

	// A person undoes alice's theme from the dashboard.
	web := signIn(t, login)
	page := web.get(t, "/changes/"+aTheme.ChangeID)
	csrf := regexp.MustCompile(`name="csrf" value="([^"]+)"`).FindStringSubmatch(page)
	if csrf == nil {
		t.Fatalf("the change page has no undo form:\n%s", page)
	}
	web.post(t, "/changes/"+aTheme.ChangeID+"/undo", url.Values{"csrf": {csrf[1]}})
	const person = "person:" + "dashboard" // serve.Main's dashboard names no person of its own

	want := map[string][]move{
		aTheme.ChangeID:   lifeOf("agent:alice", person),
		aLang.ChangeID:    lifeOf("agent:alice", ""),
		aPending.ChangeID: {{"", "pending", "agent:alice"}},
		bTheme.ChangeID:   lifeOf("agent:bob", "agent:bob"),
		bLang.ChangeID:    lifeOf("agent:bob", ""),
		run:               {{"", "open", "agent:alice"}},
		bobRun:            {{"", "open", "agent:bob"}},
	}

	// The ledger's rows.
	l, err := ledger.Open(context.Background(), ledgerPath, ledger.OpenOptions{ReadOnly: true})
	if err != nil {
		t.Fatal(err)
	}
	defer l.Close()
	for id, ms := range want {
		if strings.HasPrefix(id, "run_") {
			continue
		}
		c, err := l.Change(context.Background(), id)
		if err != nil {
			t.Fatal(err)
		}
		wantUndone := ""
		if ms[len(ms)-1].to == "undone" {
			wantUndone = ms[len(ms)-1].by
		}
		wantApplied := ""
		if len(ms) > 1 {
			wantApplied = ms[1].by
		}
		if c.PreviewedBy != ms[0].by || c.AppliedBy != wantApplied || c.UndoneBy != wantUndone || string(c.Status) != ms[len(ms)-1].to {
			t.Errorf("row %s: %s previewed by %q, applied by %q, undone by %q; want %s, %q, %q, %q",
				id, c.Status, c.PreviewedBy, c.AppliedBy, c.UndoneBy, ms[len(ms)-1].to, ms[0].by, wantApplied, wantUndone)
		}
	}

	// The CLI: show --json, list --by.
	var shown struct {
		Change struct {
			PreviewedBy string `json:"previewed_by"`
			AppliedBy   string `json:"applied_by"`
			UndoneBy    string `json:"undone_by"`
			History     []struct{ From, To, By string }
		}
	}
	if err := json.Unmarshal(cli(t, ledgerPath, "show", "--json", aTheme.ChangeID), &shown); err != nil {
		t.Fatal(err)
	}
	if c := shown.Change; c.PreviewedBy != "agent:alice" || c.AppliedBy != "agent:alice" || c.UndoneBy != person {
		t.Errorf("show --json: previewed_by %q, applied_by %q, undone_by %q", c.PreviewedBy, c.AppliedBy, c.UndoneBy)
	}
	var shownMoves []move
	for _, e := range shown.Change.History {
		shownMoves = append(shownMoves, move{e.From, e.To, e.By})
	}
	if !slices.Equal(shownMoves, want[aTheme.ChangeID]) {
		t.Errorf("show --json history = %v, want %v", shownMoves, want[aTheme.ChangeID])
	}
	all5 := []string{aTheme.ChangeID, aLang.ChangeID, aPending.ChangeID, bTheme.ChangeID, bLang.ChangeID}
	for filter, ids := range map[string][]string{
		"--by agent:alice":                    {aTheme.ChangeID, aLang.ChangeID, aPending.ChangeID},
		"--by agent:bob":                      {bTheme.ChangeID, bLang.ChangeID},
		"--by " + person:                      {aTheme.ChangeID},
		"--by agent":                          nil,
		"--action set_setting --by agent:bob": {bTheme.ChangeID, bLang.ChangeID},
		"--action set_settings":               nil,
		"--since 1h":                          all5,
		"--since 1h --status pending --action set_setting": {aPending.ChangeID},
	} {
		var listed struct {
			Changes []struct {
				ChangeID string `json:"change_id"`
			}
		}
		args := append([]string{"list", "--json"}, strings.Fields(filter)...)
		if err := json.Unmarshal(cli(t, ledgerPath, args...), &listed); err != nil {
			t.Fatal(err)
		}
		var got []string
		for _, c := range listed.Changes {
			got = append(got, c.ChangeID)
		}
		slices.Sort(got)
		slices.Sort(ids)
		if !slices.Equal(got, ids) {
			t.Errorf("list %s = %v, want %v", filter, got, ids)
		}
	}

	// The CLI: log --json holds every transition, in order, with its by;
	// log --since keeps the second phase only.
	all := logLines(t, ledgerPath)
	got := map[string][]move{}
	for _, e := range all {
		id := e.ChangeID
		if id == "" {
			id = e.RunID
		}
		got[id] = append(got[id], move{e.From, e.To, e.By})
	}
	for id, ms := range want {
		if !slices.Equal(got[id], ms) {
			t.Errorf("log of %s = %v, want %v", id, got[id], ms)
		}
	}
	if len(got) != len(want) {
		t.Errorf("log names %d changes and runs, want %d: %v", len(got), len(want), got)
	}
	since := fmt.Sprintf("%ds", int(time.Since(phase1.Add(1500*time.Millisecond)).Seconds()+1))
	recent := logLines(t, ledgerPath, "--since", since)
	var wantRecent []int64
	for _, e := range all {
		if e.At.After(phase1) {
			wantRecent = append(wantRecent, e.Seq)
		}
	}
	var gotRecent []int64
	for _, e := range recent {
		gotRecent = append(gotRecent, e.Seq)
	}
	if len(wantRecent) == 0 || len(wantRecent) == len(all) || !slices.Equal(gotRecent, wantRecent) {
		t.Errorf("log --since %s = entries %v, want %v (of %d)", since, gotRecent, wantRecent, len(all))
	}

	// The dashboard: each run's page names its own agent, on the page and
	// in the timeline, and never the other's; the change's timeline names
	// alice and the person.
	runPage := web.get(t, "/runs/"+run)
	mustHold(t, "alice's run page", runPage, `by <span class="who agent" title="an agent, with a token">agent:alice</span>`,
		"Applied: Set theme to &#34;dark&#34;", "Undone: Set theme to &#34;dark&#34;", "person:dashboard</span>")
	if strings.Contains(runPage, "agent:bob") {
		t.Error("alice's run page names bob")
	}
	bobPage := web.get(t, "/runs/"+bobRun)
	mustHold(t, "bob's run page", bobPage, ">agent:bob</span>", "Undone: Set theme to &#34;blue&#34;")
	if strings.Contains(bobPage, "agent:alice") {
		t.Error("bob's run page names alice")
	}
	changePage := web.get(t, "/changes/"+aTheme.ChangeID)
	tl := changePage[strings.Index(changePage, `id="timeline"`):]
	for _, s := range []string{"Previewed", "Apply started", "Applied", "Undo started", "Undone"} {
		if !strings.Contains(tl, s+` <span class="by">by <span class="who`) {
			t.Errorf("the change's timeline lacks %q with who made it", s)
		}
	}
	if strings.Count(tl, ">agent:alice</span>") != 3 || strings.Count(tl, ">person:dashboard</span>") != 2 {
		t.Errorf("the change's timeline should name alice three times and the person twice:\n%s", tl)
	}
	for _, body := range web.bodies {
		for _, s := range secrets {
			if strings.Contains(body, s) {
				t.Errorf("a dashboard page holds a token (%.8s…)", s)
			}
		}
	}
}

// TestWhoDidWhat_StdioClientIsKnownByItsName: over stdio there is no
// bearer identity; the client's name from its initialize request is the
// principal.
func TestWhoDidWhat_StdioClientIsKnownByItsName(t *testing.T) {
	const name = "desk-assistant"
	ledgerPath := filepath.Join(t.TempDir(), "ledger.db")
	cmd, _ := exampletest.Command(t, "settings", []string{"--ledger", ledgerPath}, exampletest.Guarded)
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	cs, err := mcp.NewClient(&mcp.Implementation{Name: name, Version: "1"}, nil).Connect(ctx, &mcp.CommandTransport{Command: cmd}, nil)
	if err != nil {
		t.Fatal(err)
	}
	defer cs.Close()
	call := func(tool string, args map[string]any) map[string]any {
		t.Helper()
		res, err := cs.CallTool(ctx, &mcp.CallToolParams{Name: tool, Arguments: args})
		if err != nil || res.IsError {
			t.Fatalf("%s: %v %v", tool, err, res)
		}
		out := map[string]any{}
		exampletest.Decode(t, res.StructuredContent, &out)
		return out
	}
	p := call("preview_set_setting", map[string]any{"key": "theme", "value": "dark"})
	id, _ := p["change_id"].(string)
	a := call("apply_change", map[string]any{"change_id": id, "confirmation_token": p["confirmation_token"]})
	call("undo_change", map[string]any{"change_id": id, "undo_token": a["undo_token"]})
	st := call("get_change_status", map[string]any{"change_id": id})
	for _, k := range []string{"previewed_by", "applied_by", "undone_by"} {
		if st[k] != "agent:"+name {
			t.Errorf("get_change_status %s = %v, want agent:%s", k, st[k], name)
		}
	}
	runID, _ := st["run_id"].(string)
	cs.Close()

	want := map[string][]move{id: lifeOf("agent:"+name, "agent:"+name), runID: {{"", "open", "agent:" + name}}}
	got := map[string][]move{}
	for _, e := range logLines(t, ledgerPath) {
		key := e.ChangeID
		if key == "" {
			key = e.RunID
		}
		got[key] = append(got[key], move{e.From, e.To, e.By})
	}
	for k, ms := range want {
		if !slices.Equal(got[k], ms) {
			t.Errorf("log of %s = %v, want %v", k, got[k], ms)
		}
	}
	if out := string(cli(t, ledgerPath, "list", "--by", "agent:"+name, "--json")); !strings.Contains(out, id) {
		t.Errorf("list --by agent:%s does not list %s:\n%s", name, id, out)
	}
}

// logEntry is one line of mcp-changeset log --json.
type logEntry struct {
	Seq      int64     `json:"seq"`
	At       time.Time `json:"at"`
	ChangeID string    `json:"change_id"`
	RunID    string    `json:"run_id"`
	From     string    `json:"from"`
	To       string    `json:"to"`
	By       string    `json:"by"`
	Note     string    `json:"note"`
}

func logLines(t *testing.T, ledgerPath string, args ...string) []logEntry {
	t.Helper()
	var out []logEntry
	dec := json.NewDecoder(bytes.NewReader(cli(t, ledgerPath, append([]string{"log", "--json", "--limit", "0"}, args...)...)))
	for dec.More() {
		var e logEntry
		if err := dec.Decode(&e); err != nil {
			t.Fatal(err)
		}
		out = append(out, e)
	}
	return out
}

// cli runs the operator's CLI on the ledger and returns its stdout.
func cli(t *testing.T, ledgerPath string, args ...string) []byte {
	t.Helper()
	bin := testbin.Build(t, "github.com/mcp-changeset/changeset-go/cmd/mcp-changeset")
	cmd := exec.Command(bin, append(args, "--ledger", ledgerPath)...)
	var stderr bytes.Buffer
	cmd.Stderr = &stderr
	out, err := cmd.Output()
	if err != nil {
		t.Fatalf("mcp-changeset %v: %v\n%s", args, err, stderr.String())
	}
	return out
}

// browser is a dashboard session: a cookie jar signed in with the login
// URL, keeping every page it was sent.
type browser struct {
	c      *http.Client
	base   string
	bodies []string
}

func signIn(t *testing.T, login string) *browser {
	t.Helper()
	jar, _ := cookiejar.New(nil)
	b := &browser{c: &http.Client{Jar: jar}, base: strings.Split(login, "/login")[0]}
	resp, err := b.c.Get(login)
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	if resp.StatusCode != http.StatusOK || resp.Request.URL.Path != "/" {
		t.Fatalf("login: %s at %s", resp.Status, resp.Request.URL)
	}
	return b
}

func (b *browser) get(t *testing.T, path string) string {
	t.Helper()
	return b.read(t, "GET "+path)(b.c.Get(b.base + path))
}

func (b *browser) post(t *testing.T, path string, form url.Values) string {
	t.Helper()
	return b.read(t, "POST "+path)(b.c.PostForm(b.base+path, form))
}

func (b *browser) read(t *testing.T, what string) func(*http.Response, error) string {
	return func(resp *http.Response, err error) string {
		t.Helper()
		if err != nil {
			t.Fatal(err)
		}
		defer resp.Body.Close()
		body, _ := io.ReadAll(resp.Body)
		b.bodies = append(b.bodies, string(body))
		if resp.StatusCode != http.StatusOK {
			t.Fatalf("%s: %s\n%s", what, resp.Status, body)
		}
		return string(body)
	}
}

func mustHold(t *testing.T, what, body string, wants ...string) {
	t.Helper()
	for _, w := range wants {
		if !strings.Contains(body, w) {
			t.Errorf("%s lacks %q", what, w)
		}
	}
}
