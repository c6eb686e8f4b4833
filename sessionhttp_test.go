package changeset_test

import (
	"context"
	"errors"
	"net/http"
	"net/http/httptest"
	"testing"
	"time"

	changeset "github.com/mcp-changeset/changeset-go"
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

// exerciseSessionRunHTTP checks session runs over Streamable HTTP on
// loopback: in stateless mode every request is a session of its own, so
// the session run is the principal's (the bearer token's user).
func exerciseSessionRunHTTP(t *testing.T, kit backendKit) {
	t.Run("SessionRun_StatelessHTTPKeysByPrincipal", func(t *testing.T) {
		t.Parallel()
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
