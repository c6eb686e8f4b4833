package serve

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"net/http"
	"time"
	"unicode"
	"unicode/utf8"

	"github.com/mcp-changeset/changeset-go/dashboard"
	"github.com/mcp-changeset/changeset-go/internal/tokenfile"
	"github.com/modelcontextprotocol/go-sdk/auth"
)

// Tokens are the bearer tokens an HTTP server accepts, each mapped to an
// identity. Only SHA-256 digests of the tokens are kept in memory. Read
// them with [BearerTokensFromFile] and pass [Tokens.Verify] as the
// Verifier of [HTTPOptions].
type Tokens struct {
	file *tokenfile.File
}

// neverExpires is the expiration of every TokenInfo: the token file has no
// expiry, and auth.RequireBearerToken refuses a TokenInfo without one.
var neverExpires = time.Date(9999, time.December, 31, 0, 0, 0, 0, time.UTC)

// bearerFormat is the token file's format: "TOKEN IDENTITY" lines.
var bearerFormat = tokenfile.Format{What: "bearer token file", Field: "IDENTITY", Check: checkIdentity}

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
// The dashboard's people file (--dashboard-people) has the same format:
// give a person's agent the identity that names the person there, and the
// dashboard's "My agents' work" finds what that agent did.
//
// The file is read once: restart the server to change it, or write a
// Verifier of your own.
func BearerTokensFromFile(path string, log *slog.Logger) (*Tokens, error) {
	f, err := tokenfile.Read(path, bearerFormat, log)
	if err != nil {
		return nil, err
	}
	return &Tokens{file: f}, nil
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
func (t *Tokens) Len() int { return t.file.Len() }

// Verify is an auth.TokenVerifier: it returns a TokenInfo whose UserID is
// the token's identity, or auth.ErrInvalidToken. It compares digests in
// constant time and looks at every entry, so that the time it takes says
// nothing about which token, or how much of one, matched.
func (t *Tokens) Verify(_ context.Context, token string, _ *http.Request) (*auth.TokenInfo, error) {
	identity, ok := t.file.Lookup(token)
	if !ok {
		return nil, auth.ErrInvalidToken
	}
	return &auth.TokenInfo{UserID: identity, Expiration: neverExpires}, nil
}

// loadPeople reads --dashboard-people, if set, and refuses a people file
// that shares a token with the bearer token file (tokens, nil without
// one): an agent holding that token could sign in to the dashboard as the
// person and undo, or later approve, as them.
func loadPeople(f Flags, tokens *Tokens, log *slog.Logger) (*dashboard.People, error) {
	if f.DashboardPeople == "" {
		return nil, nil
	}
	people, err := dashboard.PeopleFromFile(f.DashboardPeople, log)
	if err != nil {
		return nil, fmt.Errorf("--dashboard-people: %w", err)
	}
	if tokens != nil {
		// Read again without the name check, which PeopleFromFile made:
		// the dashboard keeps its digests to itself.
		again, err := tokenfile.Read(f.DashboardPeople, tokenfile.Format{What: "people file", Field: "NAME"}, nil)
		if err != nil {
			return nil, fmt.Errorf("--dashboard-people: %w", err)
		}
		if line, other, ok := again.Shared(tokens.file); ok {
			return nil, fmt.Errorf("--dashboard-people: the token on line %d of people file %s is also on line %d of bearer token file %s; "+
				"give each person a dashboard token their agent does not hold (openssl rand -hex 32)", line, f.DashboardPeople, other, f.AuthTokenFile)
		}
	}
	log.Info("dashboard people loaded", "tokens", people.Len())
	return people, nil
}
