package serve

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/modelcontextprotocol/go-sdk/auth"
	"github.com/modelcontextprotocol/go-sdk/mcp"
)

func TestCheckListenAddr_RefusesNonLoopbackUnlessAllowed(t *testing.T) {
	for _, ok := range []string{"127.0.0.1:8080", "127.0.0.2:0", "[::1]:8080", "localhost:0", "[::ffff:127.0.0.1]:1"} {
		if err := checkListenAddr(ok, false); err != nil {
			t.Errorf("checkListenAddr(%q) = %v", ok, err)
		}
	}
	for _, remote := range []string{":8080", "0.0.0.0:8080", "[::]:8080", "192.0.2.1:80", "example.com:80"} {
		err := checkListenAddr(remote, false)
		if err == nil || !strings.Contains(err.Error(), "--allow-remote") || !strings.Contains(err.Error(), "unencrypted") {
			t.Errorf("checkListenAddr(%q) = %v, want a refusal that says why", remote, err)
		}
		if err := checkListenAddr(remote, true); err != nil {
			t.Errorf("checkListenAddr(%q, allowRemote) = %v", remote, err)
		}
	}
	if err := checkListenAddr("8080", false); err == nil {
		t.Error("an address without a port was accepted")
	}
}

func TestFlagsCheck_HTTPNeedsATokenFile(t *testing.T) {
	for _, tc := range []struct {
		f    Flags
		want string
	}{
		{Flags{Ledger: "l.db", HTTP: "127.0.0.1:0"}, "--http needs --auth-token-file"},
		{Flags{Ledger: "l.db", AuthTokenFile: "t"}, "only make sense with --http"},
		{Flags{Ledger: "l.db", HTTP: "0.0.0.0:80", AuthTokenFile: "t"}, "not a loopback address"},
		{Flags{Ledger: ""}, "--ledger must not be empty"},
		{Flags{Ledger: "l.db", Stateless: true}, "only make sense with --http"},
		{Flags{Ledger: "l.db", AllowedHosts: []string{"mcp.example.com"}}, "--allowed-hosts only make sense with --http"},
		{Flags{Ledger: "l.db", HTTP: "0.0.0.0:80", ownVerifier: true}, "not a loopback address"},
	} {
		if err := tc.f.Check(); err == nil || !strings.Contains(err.Error(), tc.want) {
			t.Errorf("%+v: %v, want %q", tc.f, err, tc.want)
		}
	}
	for _, ok := range []Flags{
		{Ledger: "l.db", HTTP: "127.0.0.1:0", AuthTokenFile: "t"},
		{Ledger: "l.db", HTTP: "127.0.0.1:0", AuthTokenFile: "t", Stateless: true},
		{Ledger: "l.db", HTTP: "127.0.0.1:0", ownVerifier: true}, // Program.Verifier
		{Ledger: "l.db", Dashboard: "127.0.0.1:0", AllowRemote: true},
	} {
		if err := ok.Check(); err != nil {
			t.Errorf("%+v: %v", ok, err)
		}
	}
}

func writeTokens(t *testing.T, content string) string {
	t.Helper()
	path := filepath.Join(t.TempDir(), "tokens")
	if err := os.WriteFile(path, []byte(content), 0o600); err != nil {
		t.Fatal(err)
	}
	return path
}

var discard = slog.New(slog.DiscardHandler)

func TestBearerTokensFromFile_VerifyMapsTokensToIdentities(t *testing.T) {
	tokens, err := BearerTokensFromFile(writeTokens(t, "# comment\n\ns3cret alice\n  other-token-0123456789\tbob  \n"), discard)
	if err != nil {
		t.Fatal(err)
	}
	for token, want := range map[string]string{"s3cret": "alice", "other-token-0123456789": "bob"} {
		info, err := tokens.Verify(context.Background(), token, nil)
		if err != nil || info.UserID != want || info.Expiration.IsZero() {
			t.Errorf("Verify(%q) = %+v, %v; want %s", token, info, err, want)
		}
	}
	for _, bad := range []string{"", "s3cre", "s3crett", "alice", "S3CRET"} {
		if info, err := tokens.Verify(context.Background(), bad, nil); !errors.Is(err, auth.ErrInvalidToken) || info != nil {
			t.Errorf("Verify(%q) = %+v, %v; want ErrInvalidToken", bad, info, err)
		}
	}
}

func TestBearerTokensFromFile_ErrorsNameLinesNeverTokens(t *testing.T) {
	for _, tc := range []struct {
		content, want string
	}{
		{"topsecret\n", "line 1: want \"TOKEN IDENTITY\""},
		{"topsecret alice extra\n", "line 1: want"},
		{"topsecret alice\ntopsecret bob\n", "line 2: the same token is on line 1"},
		{"topsecret al\x01ice\n", "line 1: the identity holds a control"},
		{"# nothing\n", "holds no tokens"},
	} {
		_, err := BearerTokensFromFile(writeTokens(t, tc.content), discard)
		if err == nil || !strings.Contains(err.Error(), tc.want) {
			t.Errorf("%q: %v, want %q", tc.content, err, tc.want)
		}
		if err != nil && strings.Contains(err.Error(), "topsecret") {
			t.Errorf("%q: the error shows the token: %v", tc.content, err)
		}
	}
	if _, err := BearerTokensFromFile(filepath.Join(t.TempDir(), "missing"), discard); err == nil {
		t.Error("a missing file was accepted")
	}
}

func TestScopeFromRequest(t *testing.T) {
	ctx := context.Background()
	withToken := func(id string) *mcp.CallToolRequest {
		return &mcp.CallToolRequest{Extra: &mcp.RequestExtra{TokenInfo: &auth.TokenInfo{UserID: id}}}
	}
	for _, tc := range []struct {
		req  *mcp.CallToolRequest
		want string
	}{
		{nil, LocalScope},
		{&mcp.CallToolRequest{}, LocalScope},
		{withToken("alice"), "user:alice"},
		{withToken("local"), "user:local"},
	} {
		if got, err := ScopeFromRequest(ctx, tc.req); err != nil || got != tc.want {
			t.Errorf("ScopeFromRequest = %q, %v; want %q", got, err, tc.want)
		}
	}
	if _, err := ScopeFromRequest(ctx, withToken("")); err == nil {
		t.Error("a token without identity got a scope")
	}
}

func TestPrincipalFromRequest(t *testing.T) {
	ctx := context.Background()
	got, err := PrincipalFromRequest(ctx, &mcp.CallToolRequest{Extra: &mcp.RequestExtra{TokenInfo: &auth.TokenInfo{UserID: "alice"}}})
	if err != nil || got != "alice" {
		t.Errorf("with alice's token: %q, %v", got, err)
	}
	if _, err := PrincipalFromRequest(ctx, &mcp.CallToolRequest{Extra: &mcp.RequestExtra{TokenInfo: &auth.TokenInfo{}}}); err == nil {
		t.Error("a token without identity named a principal")
	}
	// Trusted code called from an HTTP handler behind the bearer check
	// passes the request's context, which holds the token.
	tokens, err := BearerTokensFromFile(writeTokens(t, "bobs-token-0123456789 bob\n"), discard)
	if err != nil {
		t.Fatal(err)
	}
	var principal, scope string
	h := auth.RequireBearerToken(tokens.Verify, nil)(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		principal, _ = PrincipalFromRequest(r.Context(), nil)
		scope, _ = ScopeFromRequest(r.Context(), nil)
	}))
	r := httptest.NewRequest("GET", "/", nil)
	r.Header.Set("Authorization", "Bearer bobs-token-0123456789")
	h.ServeHTTP(httptest.NewRecorder(), r)
	if principal != "bob" || scope != "user:bob" {
		t.Errorf("trusted code with bob's request context: principal %q, scope %q", principal, scope)
	}
	if got, err := PrincipalFromRequest(ctx, &mcp.CallToolRequest{}); err != nil || got != "" {
		t.Errorf("without token or session: %q, %v", got, err)
	}
}

func TestHTTPHandler_RefusesANilVerifier(t *testing.T) {
	defer func() {
		if r := recover(); r == nil || !strings.Contains(fmt.Sprint(r), "Verifier") {
			t.Errorf("recover() = %v, want a panic naming the Verifier", r)
		}
	}()
	HTTPHandler(mcp.NewServer(&mcp.Implementation{Name: "t", Version: "1"}, nil), HTTPOptions{})
}

func TestListen_BindsLoopbackOnly(t *testing.T) {
	ln, err := Listen("127.0.0.1:0", false)
	if err != nil {
		t.Fatal(err)
	}
	ln.Close()
	if ln, err := Listen("0.0.0.0:0", false); err == nil {
		ln.Close()
		t.Fatal("Listen on every interface without allowRemote succeeded")
	}
}

// A request that arrives on loopback naming another host is how DNS
// rebinding looks: 403, unless the name is one a proxy on this host
// forwards.
func TestRunHTTP_HostHeaderOnLoopback(t *testing.T) {
	tokens, err := BearerTokensFromFile(writeTokens(t, "alice-token-0123456789 alice\n"), discard)
	if err != nil {
		t.Fatal(err)
	}
	ln, err := Listen("127.0.0.1:0", false)
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	server := mcp.NewServer(&mcp.Implementation{Name: "t", Version: "1"}, nil)
	go func() {
		done <- RunHTTP(ctx, ln, server, HTTPOptions{Verifier: tokens.Verify, Stateless: true, AllowedHosts: []string{"MCP.example.com"}})
	}()
	defer func() {
		cancel()
		if err := <-done; err != nil {
			t.Errorf("RunHTTP after cancel = %v, want nil", err)
		}
	}()
	url := "http://" + ln.Addr().String() + Path
	status := func(host, token string) int {
		t.Helper()
		req, _ := http.NewRequest("POST", url, strings.NewReader(`{"jsonrpc":"2.0","id":1,"method":"tools/list","params":{}}`))
		req.Host = host
		req.Header.Set("Content-Type", "application/json")
		req.Header.Set("Accept", "application/json, text/event-stream")
		if token != "" {
			req.Header.Set("Authorization", "Bearer "+token)
		}
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		resp.Body.Close()
		return resp.StatusCode
	}
	for _, tc := range []struct {
		host, token string
		want        int
	}{
		{"evil.example", "alice-token-0123456789", http.StatusForbidden},
		{"evil.example:8080", "", http.StatusForbidden},
		{"mcp.example.com", "", http.StatusUnauthorized},
		{"mcp.example.com.:443", "alice-token-0123456789", http.StatusOK},
		{ln.Addr().String(), "alice-token-0123456789", http.StatusOK},
		{"localhost:1", "", http.StatusUnauthorized},
	} {
		if got := status(tc.host, tc.token); got != tc.want {
			t.Errorf("Host %q, token %v: status %d, want %d", tc.host, tc.token != "", got, tc.want)
		}
	}
}
