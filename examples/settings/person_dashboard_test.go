package main

import (
	"context"
	"fmt"
	"io"
	"net/http"
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

var csrfField = regexp.MustCompile(`name="csrf" value="([^"]+)"`)

// decide opens the approval's page in b, as a person following the link,
// and approves or declines it with the page's form, after checking that a
// POST without the page's CSRF token is refused (403). It returns what
// went wrong instead of failing the test, so that it can run on the
// goroutine that answers the client's progress notifications.
func decide(b *browser, approvalID, verdict, note string) error {
	resp, err := b.c.Get(b.base + "/approvals/" + approvalID)
	if err != nil {
		return err
	}
	page, _ := io.ReadAll(resp.Body)
	resp.Body.Close()
	m := csrfField.FindSubmatch(page)
	if resp.StatusCode != http.StatusOK || m == nil {
		return fmt.Errorf("the approval's page: %s, no form:\n%s", resp.Status, page)
	}
	for _, form := range []url.Values{{"note": {note}}, {"csrf": {string(m[1])}, "note": {note}}} {
		resp, err := b.c.PostForm(b.base+"/approvals/"+approvalID+"/"+verdict, form)
		if err != nil {
			return err
		}
		resp.Body.Close()
		want := http.StatusOK
		if form.Get("csrf") == "" {
			want = http.StatusForbidden // and nothing decided
		}
		if resp.StatusCode != want {
			return fmt.Errorf("%s (csrf sent: %v): %s, want %d", verdict, form.Get("csrf") != "", resp.Status, want)
		}
	}
	return nil
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
		decided  = make(chan error, 1)
		ana      *browser
	)
	progress := func(context.Context, *mcp.ProgressNotificationClientRequest) {
		once.Do(func() { // ana follows the link while the apply waits
			go func() { decided <- decide(ana, approval, "approve", "looks right") }()
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
	ana = signIn(t, base+"/login?token="+url.QueryEscape(anaToken))

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
	if page := ana.get(t, "/approvals"); !strings.Contains(page, id) {
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
	if err := <-decided; err != nil {
		t.Fatalf("ana's approval in the dashboard: %v", err)
	}
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
	if err := decide(ana, id, "decline", "keep it dark"); err != nil {
		t.Fatal(err)
	}
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
