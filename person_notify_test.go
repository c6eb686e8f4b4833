package changeset_test

import (
	"context"
	"encoding/json"
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"testing"
	"time"

	changeset "github.com/mcp-changeset/changeset-go"
	"github.com/mcp-changeset/changeset-go/notify"
	"github.com/modelcontextprotocol/go-sdk/mcp"
)

// TestPerson_WebhookToldOfARequest: with Options.Notify set, a preview
// under person approval reaches a receiver on loopback as a signed
// approval.requested event that links to the approval's page and carries
// neither the token nor the payload.
func TestPerson_WebhookToldOfARequest(t *testing.T) {
	secret := []byte("a webhook secret of thirty-two bytes.")
	type delivery struct {
		event, signature string
		body             []byte
	}
	var (
		mu  sync.Mutex
		got []delivery
	)
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		body, _ := io.ReadAll(r.Body)
		mu.Lock()
		got = append(got, delivery{r.Header.Get(notify.HeaderEvent), r.Header.Get(notify.HeaderSignature), body})
		mu.Unlock()
		w.WriteHeader(http.StatusNoContent)
	}))
	defer srv.Close()

	onEachBackendInTurn(t, func(t *testing.T, kit backendKit) {
		mu.Lock()
		got = nil
		mu.Unlock()
		f := newPersonFixture(t, kit, func(o *changeset.Options) {
			o.Notify = &notify.Webhook{URL: srv.URL, Secret: secret, Poll: 20 * time.Millisecond}
		})
		out := mustCall(t, f.session, "preview_set", map[string]any{"key": "theme", "value": "payload-secret-value"})
		aid, url, _ := approvalOf(t, out)
		tok := out["confirmation_token"].(string)

		var d delivery
		for deadline := time.Now().Add(30 * time.Second); ; time.Sleep(20 * time.Millisecond) {
			mu.Lock()
			if len(got) > 0 {
				d = got[0]
			}
			mu.Unlock()
			if d.event != "" {
				break
			}
			if time.Now().After(deadline) {
				t.Fatal("no event reached the webhook")
			}
		}
		if d.event != "approval.requested" || !notify.Verify(secret, d.body, d.signature) {
			t.Fatalf("event %q, signature valid: %t", d.event, notify.Verify(secret, d.body, d.signature))
		}
		var body map[string]any
		if err := json.Unmarshal(d.body, &body); err != nil {
			t.Fatal(err)
		}
		if body["approval_id"] != aid || body["url"] != url || body["change_id"] != out["change_id"] {
			t.Fatalf("the event's body: %s", d.body)
		}
		if strings.Contains(string(d.body), tok) || strings.Contains(string(d.body), "payload-secret-value") {
			t.Fatalf("the event carries the token or the payload: %s", d.body)
		}
	})
}

// TestPerson_URLElicitationOpensTheLink: a client that declares URL-mode
// elicitation is asked, while the apply waits, to open the approval's
// page; the person decides there (here, from the client's handler), and
// the waiting apply goes through.
func TestPerson_URLElicitationOpensTheLink(t *testing.T) {
	f := newPersonFixture(t, sqliteKit(t), func(o *changeset.Options) { o.ApprovalWait = changeset.MaxApprovalWait })
	out := mustCall(t, f.session, "preview_set", map[string]any{"key": "theme", "value": "dark"})
	aid, url, _ := approvalOf(t, out)
	var asked []*mcp.ElicitParams
	handler := func(ctx context.Context, req *mcp.ElicitRequest) (*mcp.ElicitResult, error) {
		asked = append(asked, req.Params)
		if _, err := f.guard.Approve(ctx, aid, "alice", "opened from the client"); err != nil {
			return nil, err
		}
		return &mcp.ElicitResult{Action: "accept"}, nil
	}
	cs := connectServer(t, f.server, &mcp.ClientOptions{
		ElicitationHandler: handler,
		Capabilities:       &mcp.ClientCapabilities{Elicitation: &mcp.ElicitationCapabilities{URL: &mcp.URLElicitationCapabilities{}}},
	}, &mcp.ClientSessionOptions{ProtocolVersion: "2025-11-25"})
	res := mustCall(t, cs, "apply_change", map[string]any{"change_id": out["change_id"], "confirmation_token": out["confirmation_token"]})
	if res["status"] != "applied" {
		t.Fatalf("apply: %v", res)
	}
	if len(asked) != 1 || asked[0].Mode != "url" || asked[0].URL != url || asked[0].ElicitationID != aid {
		t.Fatalf("the client was asked %+v, want one URL elicitation of %s", asked, url)
	}
}

// TestPerson_OptionsAreValidated: New refuses person approval's options
// out of range, and Register an override the server cannot serve.
func TestPerson_OptionsAreValidated(t *testing.T) {
	for name, o := range map[string]changeset.Options{
		"wait too long":  {ApprovalWait: changeset.MaxApprovalWait + time.Second},
		"negative wait":  {ApprovalWait: -time.Second},
		"no approvers":   {Approvers: -1},
		"too many":       {Approvers: 21},
		"relative link":  {DashboardURL: "/approvals"},
		"link with a ?":  {DashboardURL: "https://x.example/?a=b"},
		"unknown mode":   {Approval: changeset.Approval(9)},
		"ftp dashboard":  {DashboardURL: "ftp://x.example"},
		"webhook no key": {Notify: &notify.Webhook{URL: "https://hooks.example/x"}},
	} {
		o.LedgerPath = t.TempDir() + "/ledger.db"
		if g, err := changeset.New(nil, o); err == nil {
			g.Close()
			t.Errorf("%s: New accepted %+v", name, o)
		}
	}
	for _, mode := range []string{"token", "user", "person"} {
		if a, err := changeset.ParseApproval(mode); err != nil || a.String() != mode {
			t.Errorf("ParseApproval(%q) = %v, %v", mode, a, err)
		}
	}
	if _, err := changeset.ParseApproval("admin"); err == nil {
		t.Error("ParseApproval accepted admin")
	}

	panics := func(server changeset.Approval, op changeset.Approval, n int) (msg string) {
		g, err := changeset.New(nil, changeset.Options{LedgerPath: t.TempDir() + "/l.db", Approval: server})
		if err != nil {
			t.Fatal(err)
		}
		defer g.Close()
		defer func() {
			if r := recover(); r != nil {
				msg, _ = r.(string)
			}
		}()
		changeset.Register(g, &mcp.Tool{Name: "op"}, changeset.Operation[setIn, setIn, setOut]{
			Approval: op, Approvers: n,
			Preview: func(context.Context, setIn) (*changeset.Proposal[setIn], error) { return nil, nil },
			Apply:   func(context.Context, setIn) (setOut, error) { return setOut{}, nil },
		})
		return ""
	}
	for _, c := range []struct {
		server, op changeset.Approval
		n          int
		want       string
	}{
		{changeset.TokenApproval, 0, 2, "needs PersonApproval"},
		{changeset.UserApproval, changeset.PersonApproval, 0, "takes no approval override"},
		{changeset.TokenApproval, changeset.UserApproval, 0, "needs a server with UserApproval"},
		{changeset.PersonApproval, 0, 21, "outside 0 to 20"},
	} {
		if msg := panics(c.server, c.op, c.n); !strings.Contains(msg, c.want) {
			t.Errorf("server %v, operation %v with %d approvers: panic %q, want %q", c.server, c.op, c.n, msg, c.want)
		}
	}
	if msg := panics(changeset.PersonApproval, changeset.TokenApproval, 0); msg != "" {
		t.Errorf("a token operation on a person server panicked: %s", msg)
	}
}
