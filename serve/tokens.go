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
)

// Tokens are the bearer tokens an HTTP server accepts, each mapped to an
// identity. Only SHA-256 digests of the tokens are kept in memory. Read
// them with [BearerTokensFromFile] and pass [Tokens.Verify] as the
// Verifier of [HTTPOptions].
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

// minTokenLen is the length below which BearerTokensFromFile warns that a
// token is easy to guess.
const minTokenLen = 16

// BearerTokensFromFile reads a token file: one "TOKEN IDENTITY" pair per
// line, separated by spaces or tabs, for example
//
//	# made with: openssl rand -hex 32
//	3f0c…9a alice
//	b71e…04 bob
//
// Blank lines and lines starting with '#' are skipped. An identity is
// printable UTF-8 of at most 128 bytes; a token may appear once. Error
// messages name the file and line, never a token. log (nil discards) gets
// a warning for a token shorter than 16 characters and for a file that
// other users can read (chmod 600 it).
//
// The file is read once: restart the server to change it, or write a
// Verifier of your own.
func BearerTokensFromFile(path string, log *slog.Logger) (*Tokens, error) {
	if log == nil {
		log = slog.New(slog.DiscardHandler)
	}
	f, err := os.Open(path)
	if err != nil {
		return nil, fmt.Errorf("bearer token file: %w", err)
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
			return nil, fmt.Errorf("bearer token file %s, line %d: want \"TOKEN IDENTITY\" (two fields)", path, n)
		}
		token, identity := fields[0], fields[1]
		if err := checkIdentity(identity); err != nil {
			return nil, fmt.Errorf("bearer token file %s, line %d: %v", path, n, err)
		}
		d := sha256.Sum256([]byte(token))
		if prev, dup := seen[d]; dup {
			return nil, fmt.Errorf("bearer token file %s, line %d: the same token is on line %d; each token must name one identity", path, n, prev)
		}
		seen[d] = n
		if len(token) < minTokenLen {
			log.Warn("a bearer token is short and easy to guess; use 32 or more random characters", "file", path, "line", n, "identity", identity)
		}
		t.entries = append(t.entries, tokenEntry{digest: d, identity: identity})
	}
	if err := sc.Err(); err != nil {
		return nil, fmt.Errorf("bearer token file %s: %w", path, err)
	}
	if len(t.entries) == 0 {
		return nil, fmt.Errorf("bearer token file %s holds no tokens", path)
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

// Verify is an auth.TokenVerifier: it returns a TokenInfo whose UserID is
// the token's identity, or auth.ErrInvalidToken. It compares digests in
// constant time and looks at every entry, so that the time it takes says
// nothing about which token, or how much of one, matched.
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
