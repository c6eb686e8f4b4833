//go:build linux

package clients

import (
	"context"
	"net/http"
	"net/url"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/mcp-changeset/changeset-go/examples/internal/exampletest"
	"github.com/mcp-changeset/changeset-go/internal/pgtest"
	"github.com/modelcontextprotocol/go-sdk/mcp"
)

// replicaOf remembers which replica answered each request through the
// balancer (HAProxy's X-Replica header).
type replicaOf struct {
	next http.RoundTripper
	mu   sync.Mutex
	last string
}

func (r *replicaOf) RoundTrip(req *http.Request) (*http.Response, error) {
	resp, err := r.next.RoundTrip(req)
	if err == nil && req.Method == http.MethodPost {
		r.mu.Lock()
		r.last = resp.Header.Get("X-Replica")
		r.mu.Unlock()
	}
	return resp, err
}

func (r *replicaOf) Last() string {
	r.mu.Lock()
	defer r.mu.Unlock()
	return r.last
}

// Person approval with two stateless replicas on one PostgreSQL ledger
// behind HAProxy (round robin): an agent previews through the balancer, a
// person approves in the dashboard of replica a (real HTTP, CSRF), and the
// apply goes through on replica b; the approval, a row in the shared
// ledger, is what carries the person's yes from one replica to the other.
func TestBalancer_PersonApprovesOnOneReplicaTheOtherApplies(t *testing.T) {
	haproxy := requireHAProxy(t)
	dsn := pgtest.DSN(t)
	dir := t.TempDir()
	tokens, people := filepath.Join(dir, "tokens"), filepath.Join(dir, "people")
	const anaToken = "ana-dashboard-0123456789abcdef0123"
	if err := os.WriteFile(tokens, []byte(balancerToken+" alice\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(people, []byte(anaToken+" ana\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	root := t.TempDir()
	args := []string{"--root", root, "--http", "127.0.0.1:0", "--stateless", "--auth-token-file", tokens,
		"--ledger", dsn, "--approval", "person"}
	a := exampletest.StartHTTP(t, "notes", append(slices.Clone(args), "--dashboard", "127.0.0.1:0", "--dashboard-people", people), exampletest.Guarded)
	line := strings.TrimSpace(a.Stderr.WaitLine(t, "notes: dashboard: ", 10*time.Second))
	base, _, _ := strings.Cut(line, "/login")
	// Every replica names the same dashboard in its links, whichever
	// makes the preview: replica b serves none and points at a's.
	b := exampletest.StartHTTP(t, "notes", append(slices.Clone(args), "--dashboard-url", base), exampletest.Guarded)
	lb := startHAProxy(t, haproxy, [][2]string{{"a", hostPort(t, a.URL)}, {"b", hostPort(t, b.URL)}})

	via := &replicaOf{next: exampletest.BearerClient(balancerToken).Transport}
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	client := mcp.NewClient(&mcp.Implementation{Name: "agent", Version: "1"}, nil)
	cs, err := client.Connect(ctx, &mcp.StreamableClientTransport{Endpoint: lb, HTTPClient: &http.Client{Transport: via},
		DisableStandaloneSSE: true, MaxRetries: -1}, nil)
	if err != nil {
		t.Fatal(err)
	}
	defer cs.Close()
	call := func(tool string, args map[string]any) (*mcp.CallToolResult, string) {
		t.Helper()
		res, err := cs.CallTool(ctx, &mcp.CallToolParams{Name: tool, Arguments: args})
		if err != nil {
			t.Fatalf("%s: %v", tool, err)
		}
		return res, via.Last()
	}

	res, previewedOn := call("preview_write_note", map[string]any{"name": "plan.txt", "content": "ship it\n"})
	out, _ := res.StructuredContent.(map[string]any)
	apr, _ := out["approval"].(map[string]any)
	id, _ := apr["id"].(string)
	if res.IsError || !strings.HasPrefix(id, "apr_") || apr["url"] != base+"/approvals/"+id {
		t.Fatalf("preview through the balancer (on %s): %+v", previewedOn, res)
	}
	ana := loginDashboard(t, base+"/login?token="+url.QueryEscape(anaToken))
	code, page := ana.do("GET", "/approvals/"+id, nil)
	m := csrfField.FindStringSubmatch(page)
	if code != http.StatusOK || m == nil {
		t.Fatalf("the approval's page on replica a: %d\n%s", code, page)
	}
	if code, _ := ana.do("POST", "/approvals/"+id+"/approve", url.Values{"note": {"no csrf"}}); code != http.StatusForbidden {
		t.Fatalf("approve without csrf: %d, want 403", code)
	}
	if code, body := ana.do("POST", "/approvals/"+id+"/approve", url.Values{"csrf": {m[1]}}); code != http.StatusOK {
		t.Fatalf("approve on replica a: %d\n%s", code, body)
	}
	// Round robin alternates: read until the last answer came from a, so
	// that the apply goes to b.
	for i := 0; via.Last() != "a" && i < 4; i++ {
		call("get_change_status", map[string]any{"change_id": out["change_id"]})
	}
	res, appliedOn := call("apply_change", map[string]any{"change_id": out["change_id"], "confirmation_token": out["confirmation_token"]})
	if res.IsError || res.StructuredContent.(map[string]any)["status"] != "applied" {
		t.Fatalf("apply on %s: %+v", appliedOn, res)
	}
	if appliedOn != "b" {
		t.Fatalf("approved on replica a, applied on %q: want b", appliedOn)
	}
	if got := readFile(t, root, "plan.txt"); got != "ship it\n" {
		t.Fatalf("plan.txt = %q after the apply", got)
	}
	t.Logf("change %s: previewed on %s, approved by ana on a's dashboard, applied on %s", out["change_id"], previewedOn, appliedOn)
}
