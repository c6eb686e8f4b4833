package serve

import (
	"context"
	"errors"
	"log/slog"
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
		{Flags{Ledger: "l.db", AuthTokenFile: "t"}, "only makes sense with --http"},
		{Flags{Ledger: "l.db", HTTP: "0.0.0.0:80", AuthTokenFile: "t"}, "not a loopback address"},
		{Flags{Ledger: ""}, "--ledger must not be empty"},
	} {
		if err := tc.f.Check(); err == nil || !strings.Contains(err.Error(), tc.want) {
			t.Errorf("%+v: %v, want %q", tc.f, err, tc.want)
		}
	}
	if err := (&Flags{Ledger: "l.db", HTTP: "127.0.0.1:0", AuthTokenFile: "t"}).Check(); err != nil {
		t.Error(err)
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

func TestLoadTokens_VerifyMapsTokensToIdentities(t *testing.T) {
	tokens, err := LoadTokens(writeTokens(t, "# comment\n\ns3cret alice\n  other-token-0123456789\tbob  \n"), discard)
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

func TestLoadTokens_ErrorsNameLinesNeverTokens(t *testing.T) {
	for _, tc := range []struct {
		content, want string
	}{
		{"topsecret\n", "line 1: want \"TOKEN IDENTITY\""},
		{"topsecret alice extra\n", "line 1: want"},
		{"topsecret alice\ntopsecret bob\n", "line 2: the same token is on line 1"},
		{"topsecret al\x01ice\n", "line 1: the identity holds a control"},
		{"# nothing\n", "holds no tokens"},
	} {
		_, err := LoadTokens(writeTokens(t, tc.content), discard)
		if err == nil || !strings.Contains(err.Error(), tc.want) {
			t.Errorf("%q: %v, want %q", tc.content, err, tc.want)
		}
		if err != nil && strings.Contains(err.Error(), "topsecret") {
			t.Errorf("%q: the error shows the token: %v", tc.content, err)
		}
	}
	if _, err := LoadTokens(filepath.Join(t.TempDir(), "missing"), discard); err == nil {
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
