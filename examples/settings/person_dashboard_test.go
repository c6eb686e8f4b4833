package main

import (
	"context"
	"io"
	"net/http"
	"net/http/cookiejar"
	"net/url"
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/mcp-changeset/changeset-go/examples/internal/exampletest"
	"github.com/mcp-changeset/changeset-go/ledger"
	"github.com/modelcontextprotocol/go-sdk/mcp"
)

// person is one signed-in browser of the dashboard, over real HTTP.
type person struct {
	t      *testing.T
	base   string
	client *http.Client
}

func signInAs(t *testing.T, base, token string) *person {
	t.Helper()
	jar, _ := cookiejar.New(nil)
	p := &person{t: t, base: base, client: &http.Client{Jar: jar}}
	resp, err := p.client.Get(base + "/login?token=" + url.QueryEscape(token))
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		t.Fatalf("login: %s", resp.Status)
	}
	return p
}

func (p *person) get(path string) string {
	p.t.Helper()
	resp, err := p.client.Get(p.base + path)
	if err != nil {
		p.t.Fatal(err)
	}
	defer resp.Body.Close()
	body, _ := io.ReadAll(resp.Body)
	if resp.StatusCode != http.StatusOK {
		p.t.Fatalf("GET %s: %s\n%s", path, resp.Status, body)
	}
	return string(body)
}

// post sends a form as the dashboard's own page would, and returns the
// status of the answer (after redirects).
func (p *person) post(path string, form url.Values) int {
	p.t.Helper()
	req, _ := http.NewRequest(http.MethodPost, p.base+path, strings.NewReader(form.Encode()))
	req.Header.Set("Content-Type", "application/x-www-form-urlencoded")
	req.Header.Set("Sec-Fetch-Site", "same-origin")
	resp, err := p.client.Do(req)
	if err != nil {
		p.t.Fatal(err)
	}
	resp.Body.Close()
	return resp.StatusCode
}

var csrfField = regexp.MustCompile(`name="csrf" value="([^"]+)"`)

// decide opens the approval's page, as a person following the link, and
// approves or declines it with the page's form.
func (p *person) decide(approvalID, verdict, note string) {
	p.t.Helper()
	page := p.get("/approvals/" + approvalID)
	m := csrfField.FindStringSubmatch(page)
	if m == nil {
		p.t.Fatalf("the approval's page has no form:\n%s", page)
	}
	// Without the page's CSRF token the dashboard refuses and decides
	// nothing.
	if code := p.post("/approvals/"+approvalID+"/"+verdict, url.Values{"note": {note}}); code != http.StatusForbidden {
		p.t.Fatalf("%s without csrf: %d, want 403", verdict, code)
	}
	if code := p.post("/approvals/"+approvalID+"/"+verdict, url.Values{"csrf": {m[1]}, "note": {note}}); code != http.StatusOK {
		p.t.Fatalf("%s: %d", verdict, code)
	}
}

// The whole of person approval over real transports: an agent's client
// over stdio that declares no elicitation, whose first apply is refused
// while nobody has decided (token not spent), and a person who signs in
// to the server's dashboard with their own token (real HTTP, CSRF) and
// approves while the next apply waits, then declines another change.
func TestPerson_OverStdioAPersonApprovesInTheDashboard(t *testing.T) {
	dir := t.TempDir()
	ledgerPath := filepath.Join(dir, "ledger.db")
	people := filepath.Join(dir, "people")
	const anaToken = "ana-token-0123456789abcdef0123456789"
	if err := os.WriteFile(people, []byte(anaToken+" ana\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	cmd, stderr := exampletest.Command(t, "settings", []string{"--ledger", ledgerPath, "--approval", "person",
		"--dashboard", "127.0.0.1:0", "--dashboard-people", people}, exampletest.Guarded)
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()

	var (
		once     sync.Once
		approval string
		decided  = make(chan struct{})
		ana      *person
	)
	progress := func(context.Context, *mcp.ProgressNotificationClientRequest) {
		once.Do(func() { // ana follows the link while the apply waits
			go func() {
				defer close(decided)
				ana.decide(approval, "approve", "looks right")
			}()
		})
	}
	client := mcp.NewClient(&mcp.Implementation{Name: "no-elicitation", Version: "1"}, &mcp.ClientOptions{ProgressNotificationHandler: progress})
	cs, err := client.Connect(ctx, &mcp.CommandTransport{Command: cmd}, nil)
	if err != nil {
		t.Fatalf("connect: %v\n%s", err, stderr)
	}
	defer cs.Close()
	line := stderr.WaitLine(t, "settings: dashboard: ", 10*time.Second)
	base, _, _ := strings.Cut(strings.TrimSpace(line), "/login")
	ana = signInAs(t, base, anaToken)

	preview := func(value string) (map[string]any, string) {
		t.Helper()
		res, err := cs.CallTool(ctx, &mcp.CallToolParams{Name: "preview_set_setting", Arguments: map[string]any{"key": "theme", "value": value}})
		if err != nil || res.IsError {
			t.Fatalf("preview: %v %+v", err, res)
		}
		out := res.StructuredContent.(map[string]any)
		a, _ := out["approval"].(map[string]any)
		id, _ := a["id"].(string)
		if !strings.HasPrefix(id, "apr_") || a["url"] != base+"/approvals/"+id {
			t.Fatalf("the preview's approval: %v (dashboard at %s)", out, base)
		}
		return out, id
	}
	out, id := preview("dark")
	approval = id
	if page := ana.get("/approvals"); !strings.Contains(page, id) {
		t.Fatalf("the waiting approval is not on /approvals:\n%s", page)
	}
	// Before anyone decides, the apply waits its ApprovalWait (20 s) and
	// is refused: it names the approval and its link, nothing is written
	// and the token is not spent (the same token applies below).
	res, err := cs.CallTool(ctx, &mcp.CallToolParams{Name: "apply_change", Arguments: map[string]any{"change_id": out["change_id"], "confirmation_token": out["confirmation_token"]}})
	if err != nil || !res.IsError {
		t.Fatalf("the apply before anyone decided: %v %+v", err, res)
	}
	if text := res.Content[0].(*mcp.TextContent).Text; !strings.Contains(text, id) || !strings.Contains(text, base+"/approvals/"+id) || !strings.Contains(text, "no token was spent") {
		t.Fatalf("the refusal while the approval waits reads %q", text)
	}
	params := &mcp.CallToolParams{Name: "apply_change", Arguments: map[string]any{"change_id": out["change_id"], "confirmation_token": out["confirmation_token"]}}
	params.SetProgressToken("apply")
	res, err = cs.CallTool(ctx, params)
	<-decided
	if err != nil || res.IsError || res.StructuredContent.(map[string]any)["status"] != "applied" {
		t.Fatalf("the apply that waited for ana: %v %+v", err, res)
	}

	l, err := ledger.Open(ctx, ledgerPath, ledger.OpenOptions{ReadOnly: true})
	if err != nil {
		t.Fatal(err)
	}
	defer l.Close()
	entries, err := l.History(ctx, ledger.HistoryFilter{ApprovalID: id})
	if err != nil {
		t.Fatal(err)
	}
	approvedBy := ""
	for _, e := range entries {
		if e.To == string(ledger.ApprovalApproved) {
			approvedBy = e.By
		}
	}
	if approvedBy != "person:ana" {
		t.Fatalf("the approval's history %+v: approved by %q, want person:ana", entries, approvedBy)
	}

	// A change ana declines ends declined, and the agent reads who and why.
	out, id = preview("light")
	ana.decide(id, "decline", "keep it dark")
	res, err = cs.CallTool(ctx, &mcp.CallToolParams{Name: "apply_change", Arguments: map[string]any{"change_id": out["change_id"], "confirmation_token": out["confirmation_token"]}})
	if err != nil || !res.IsError {
		t.Fatalf("apply of a declined change: %v %+v", err, res)
	}
	if text := res.Content[0].(*mcp.TextContent).Text; !strings.Contains(text, `"person:ana" declined it`) || !strings.Contains(text, `"keep it dark"`) {
		t.Fatalf("the decline reads %q", text)
	}
	if c, err := l.Change(ctx, out["change_id"].(string)); err != nil || c.Status != ledger.Declined {
		t.Fatalf("the declined change: %+v, %v", c, err)
	}
}
