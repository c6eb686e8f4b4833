package serve

import (
	"bufio"
	"context"
	"crypto/sha256"
	"crypto/subtle"
	"errors"
	"fmt"
	"log/slog"
	"net/http"
	"os"
	"runtime"
	"strings"
	"time"
	"unicode"
	"unicode/utf8"

	"github.com/modelcontextprotocol/go-sdk/auth"
	"github.com/modelcontextprotocol/go-sdk/mcp"
)

// LocalScope is the scope of every change made over stdio: the one client
// is the person who started the server.
const LocalScope = "local"

// ScopeFromRequest is a changeset.ScopeFunc for the examples. Over HTTP it
// returns "user:" followed by the identity that the caller's bearer token
// maps to (req.Extra.TokenInfo.UserID), so that a change previewed by one
// identity cannot be applied, undone or even seen by another. Over stdio,
// where there is no token, it returns LocalScope. The prefix keeps an HTTP
// identity named "local" apart from the stdio scope of a shared ledger.
func ScopeFromRequest(ctx context.Context, req *mcp.CallToolRequest) (string, error) {
	var info *auth.TokenInfo
	if req != nil && req.Extra != nil {
		info = req.Extra.TokenInfo
	} else if req == nil {
		info = auth.TokenInfoFromContext(ctx) // trusted code passing the caller along
	}
	if info == nil {
		return LocalScope, nil
	}
	if info.UserID == "" {
		return "", errors.New("the bearer token has no identity")
	}
	return "user:" + info.UserID, nil
}

// Tokens are the bearer tokens an HTTP server accepts, each mapped to an
// identity. Only SHA-256 digests of the tokens are kept in memory.
type Tokens struct {
	entries []tokenEntry
}

type tokenEntry struct {
	digest   [sha256.Size]byte
	identity string
}

// neverExpires is the expiration of every TokenInfo: the token file has no
// expiry, and auth.RequireBearerToken refuses a TokenInfo without one.
var neverExpires = time.Date(9999, time.December, 31, 0, 0, 0, 0, time.UTC)

// minTokenLen is the length below which LoadTokens warns that a token is
// easy to guess.
const minTokenLen = 16

// LoadTokens reads a token file: one "TOKEN IDENTITY" pair per line, for
// example "s3cret alice", separated by spaces or tabs. Blank lines and lines
// starting with '#' are skipped. Error messages name line numbers, never a
// token. It warns on log about short tokens and a file that other users can
// read.
func LoadTokens(path string, log *slog.Logger) (*Tokens, error) {
	f, err := os.Open(path)
	if err != nil {
		return nil, fmt.Errorf("--auth-token-file: %w", err)
	}
	defer f.Close()
	if fi, err := f.Stat(); err == nil && runtime.GOOS != "windows" && fi.Mode().Perm()&0o077 != 0 {
		log.Warn("the token file can be read by other users; chmod 600 it", "file", path)
	}
	t := &Tokens{}
	seen := map[[sha256.Size]byte]int{}
	sc := bufio.NewScanner(f)
	for n := 1; sc.Scan(); n++ {
		line := strings.TrimSpace(sc.Text())
		if line == "" || strings.HasPrefix(line, "#") {
			continue
		}
		fields := strings.Fields(line)
		if len(fields) != 2 {
			return nil, fmt.Errorf("--auth-token-file %s, line %d: want \"TOKEN IDENTITY\" (two fields)", path, n)
		}
		token, identity := fields[0], fields[1]
		if err := checkIdentity(identity); err != nil {
			return nil, fmt.Errorf("--auth-token-file %s, line %d: %v", path, n, err)
		}
		d := sha256.Sum256([]byte(token))
		if prev, dup := seen[d]; dup {
			return nil, fmt.Errorf("--auth-token-file %s, line %d: the same token is on line %d; each token must name one identity", path, n, prev)
		}
		seen[d] = n
		if len(token) < minTokenLen {
			log.Warn("a bearer token is short and easy to guess; use 32 or more random characters", "file", path, "line", n, "identity", identity)
		}
		t.entries = append(t.entries, tokenEntry{digest: d, identity: identity})
	}
	if err := sc.Err(); err != nil {
		return nil, fmt.Errorf("--auth-token-file %s: %w", path, err)
	}
	if len(t.entries) == 0 {
		return nil, fmt.Errorf("--auth-token-file %s holds no tokens", path)
	}
	return t, nil
}

// checkIdentity accepts printable UTF-8 identities of at most 128 bytes.
func checkIdentity(id string) error {
	if !utf8.ValidString(id) || len(id) > 128 {
		return errors.New("the identity must be valid UTF-8 of at most 128 bytes")
	}
	for _, r := range id {
		if !unicode.IsPrint(r) {
			return errors.New("the identity holds a control or invisible character")
		}
	}
	return nil
}

// Len is the number of tokens.
func (t *Tokens) Len() int { return len(t.entries) }

// Verify is an auth.TokenVerifier. It compares digests in constant time
// and looks at every entry, so that the time it takes says nothing about
// which token, or how much of one, matched.
func (t *Tokens) Verify(_ context.Context, token string, _ *http.Request) (*auth.TokenInfo, error) {
	d := sha256.Sum256([]byte(token))
	identity := ""
	for _, e := range t.entries {
		if subtle.ConstantTimeCompare(d[:], e.digest[:]) == 1 {
			identity = e.identity
		}
	}
	if identity == "" {
		return nil, auth.ErrInvalidToken
	}
	return &auth.TokenInfo{UserID: identity, Expiration: neverExpires}, nil
}
