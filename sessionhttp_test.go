package changeset_test

import (
	"context"
	"errors"
	"net/http"
	"net/http/httptest"
	"testing"
	"time"

	changeset "github.com/mcp-changeset/changeset-go"
	"github.com/mcp-changeset/changeset-go/internal/testkit"
	"github.com/modelcontextprotocol/go-sdk/auth"
	"github.com/modelcontextprotocol/go-sdk/mcp"
)

// bearer adds an Authorization header to every request.
type bearer struct {
	token string
	next  http.RoundTripper
}

func (b bearer) RoundTrip(r *http.Request) (*http.Response, error) {
	r = r.Clone(r.Context())
	r.Header.Set("Authorization", "Bearer "+b.token)
	return b.next.RoundTrip(r)
}

// The SessionRun cases in this file check session runs over Streamable
// HTTP on loopback: in stateless mode every request is a session of its
// own, so the session run is the principal's (the bearer token's user).

func TestSessionRun_StatelessHTTPKeysByPrincipal(t *testing.T) {
	t.Parallel()
	onEachBackend(t, func(t *testing.T, kit backendKit) {
		server := mcp.NewServer(&mcp.Implementation{Name: "test", Version: "1"}, nil)
		g, err := changeset.New(server, changeset.Options{Ledger: kit.Ledger(t), WriteMode: changeset.WriteGuarded})
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { g.Close() })
		registerTestOps(g, &kv{m: map[string]string{"theme": "light"}})
		users := map[string]string{"token-ana": "ana", "token-bo": "bo"}
		verify := func(ctx context.Context, token string, r *http.Request) (*auth.TokenInfo, error) {
			if u, ok := users[token]; ok {
				return &auth.TokenInfo{UserID: u, Expiration: time.Now().Add(time.Hour)}, nil
			}
			return nil, auth.ErrInvalidToken
		}
		h := mcp.NewStreamableHTTPHandler(func(*http.Request) *mcp.Server { return server }, &mcp.StreamableHTTPOptions{Stateless: true})
		srv := httptest.NewServer(auth.RequireBearerToken(verify, nil)(h))
		t.Cleanup(srv.Close)

		connectAs := func(token string) *mcp.ClientSession {
			client := mcp.NewClient(&mcp.Implementation{Name: "http-client", Version: "1"}, nil)
			cs, err := client.Connect(context.Background(), &mcp.StreamableClientTransport{Endpoint: srv.URL,
				HTTPClient: &http.Client{Transport: bearer{token, http.DefaultTransport}}, DisableStandaloneSSE: true}, nil)
			if err != nil {
				t.Fatal(err)
			}
			t.Cleanup(func() { cs.Close() })
			return cs
		}
		ana1, ana2, bo := connectAs("token-ana"), connectAs("token-ana"), connectAs("token-bo")
		var runs []any
		for _, cs := range []*mcp.ClientSession{ana1, ana2, bo, ana1, bo} {
			runs = append(runs, mustCall(t, cs, "preview_set", map[string]any{"key": "theme", "value": "dark"})["run_id"])
		}
		if runs[0] == nil || runs[0] != runs[1] || runs[0] != runs[3] || runs[2] != runs[4] || runs[0] == runs[2] {
			t.Fatalf("session runs by principal = %v; want ana's three previews in one run and bo's two in another", runs)
		}
		if _, err := g.Run(context.Background(), runs[0].(string), changeset.RunPage{}); errors.Is(err, changeset.ErrNotFound) {
			t.Fatal("the session run is not in the ledger")
		}
	})
}

// Two Guards on one ledger (two replicas behind a balancer), one
// principal. Each Guard remembers its own last preview in the session run;
// the run must still count the other's previews: a replica whose own last
// preview is older than the idle time but whose peer previewed since must
// join the same run.
func TestSessionRun_ReplicasShareTheRunAndSeeEachOthersPreviews(t *testing.T) {
	t.Parallel()
	onEachBackend(t, func(t *testing.T, kit backendKit) {
		led := kit.Ledger(t)
		clock := testkit.NewClock(time.Date(2026, 12, 1, 9, 0, 0, 0, time.UTC))
		verify := func(ctx context.Context, token string, r *http.Request) (*auth.TokenInfo, error) {
			return &auth.TokenInfo{UserID: "ana", Expiration: time.Now().Add(time.Hour)}, nil
		}
		replica := func() *mcp.ClientSession {
			server := mcp.NewServer(&mcp.Implementation{Name: "test", Version: "1"}, nil)
			g, err := changeset.New(server, changeset.Options{Ledger: led, WriteMode: changeset.WriteGuarded, Clock: clock.Now})
			if err != nil {
				t.Fatal(err)
			}
			t.Cleanup(func() { g.Close() })
			registerTestOps(g, &kv{m: map[string]string{"theme": "light"}})
			h := mcp.NewStreamableHTTPHandler(func(*http.Request) *mcp.Server { return server }, &mcp.StreamableHTTPOptions{Stateless: true})
			srv := httptest.NewServer(auth.RequireBearerToken(verify, nil)(h))
			t.Cleanup(srv.Close)
			client := mcp.NewClient(&mcp.Implementation{Name: "http-client", Version: "1"}, nil)
			cs, err := client.Connect(context.Background(), &mcp.StreamableClientTransport{Endpoint: srv.URL,
				HTTPClient: &http.Client{Transport: bearer{"token", http.DefaultTransport}}, DisableStandaloneSSE: true}, nil)
			if err != nil {
				t.Fatal(err)
			}
			t.Cleanup(func() { cs.Close() })
			return cs
		}
		a, b := replica(), replica()
		preview := func(cs *mcp.ClientSession) any {
			return mustCall(t, cs, "preview_set", map[string]any{"key": "theme", "value": "dark"})["run_id"]
		}
		run := preview(a) // 09:00 on a
		clock.Advance(20 * time.Minute)
		if got := preview(b); got != run { // 09:20 on b
			t.Fatalf("replica b started %v, want the session run %v", got, run)
		}
		clock.Advance(20 * time.Minute)
		if got := preview(a); got != run { // 09:40 on a: its own last was 40 min ago, b's 20
			t.Fatalf("replica a started %v after b's preview 20 minutes ago, want %v", got, run)
		}
		clock.Advance(10 * time.Minute)
		if got := preview(a); got != run { // 09:50: a's own memory says 10 minutes
			t.Fatalf("replica a started %v, want %v", got, run)
		}
		clock.Advance(31 * time.Minute)
		if got := preview(b); got == run || got == nil { // 10:21: idle on every replica
			t.Fatalf("after 31 idle minutes replica b joined %v, want a new session run", got)
		}
	})
}
