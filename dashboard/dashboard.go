// Package dashboard is a small web interface for the people behind an agent:
// they review every change and run the agent made, and undo them, without
// going through the agent.
//
// The dashboard is an http.Handler that a server mounts beside its MCP
// endpoint, or serves on a loopback address of its own with Serve:
//
//	d, err := dashboard.New(guard, dashboard.Options{Person: "ana"})
//	if err != nil { ... }
//	login, err := dashboard.Serve(ctx, "127.0.0.1:8080", d, nil)
//	if err != nil { ... }
//	fmt.Fprintln(os.Stderr, "dashboard:", login)
//
// The list of changes is searched and filtered with GET query parameters
// (q, action, status, by, since, run), and every list pages newest first
// with a cursor, so that a week of an agent's work stays readable: no page
// grows with the ledger. Failures are worded by their kind (a refused
// apply that wrote nothing is a refusal, not a failure), a skipped
// change's drift shows what the undo expected and found, and every time
// reads absolute and relative.
//
// Pages are rendered on the server with html/template and work without
// JavaScript; the stylesheet and a few lines of optional script are embedded
// in the binary, and no page fetches anything from elsewhere.
//
// Access starts with a login token: the URL /login?token=… exchanges it for
// an HttpOnly, SameSite=Strict session cookie and redirects to the list of
// runs, so the token leaves the address bar. Every request except the login
// and the static assets needs a session. Every state-changing request is a
// POST carrying the session's CSRF token in the form field "csrf", and
// cross-origin POSTs are refused.
//
// The dashboard knows who is signed in in one of three ways. With
// Options.People (a people file of "TOKEN NAME" lines, PeopleFromFile),
// each person signs in with a token of their own and the shared login
// token is not accepted. With Options.TrustedHeader, a reverse proxy on the
// same host that authenticated the person names them in a request header,
// trusted only from loopback. And a Wrap middleware can name the person of
// each request with WithPerson. Without any of them, everyone who has the
// shared login link acts as Options.Person.
//
// People approve from the dashboard too. Under person approval an agent's
// apply, undo or run undo waits for people to approve it: /approvals lists
// what waits, each with its diff or plan, and a person approves or
// declines it there (a POST with the session's CSRF token), recorded in the
// ledger as "person:<name>". With the shared login link that name is
// Options.Person, and everyone who uses the link counts as that one person.
//
// Undo from the dashboard goes through the Guard's trusted path
// (Guard.UndoRun and Guard.UndoAs) with no agent token, and the ledger
// records that a person did it: "person:<name>". The dashboard never shows a
// token, a token digest, a payload, scope or state hash, or sealed state.
package dashboard

import (
	"context"
	"crypto/rand"
	"encoding/base64"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net/http"
	"net/url"
	"strings"
	"time"
	"unicode"
	"unicode/utf8"

	changeset "github.com/mcp-changeset/changeset-go"
	"github.com/mcp-changeset/changeset-go/ledger"
)

// DefaultSessionTTL is how long a session lasts when Options.SessionTTL is
// zero.
const DefaultSessionTTL = 12 * time.Hour

// DefaultPerson is the name recorded for undos from the dashboard when
// Options.Person is empty.
const DefaultPerson = "dashboard"

// minLoginTokenLen is the shortest login token New accepts from Options.
const minLoginTokenLen = 16

// Options configure a dashboard. The zero value is valid: it generates a
// login token and records undos as done by "person:dashboard".
type Options struct {
	// LoginToken is the shared secret that /login?token=… exchanges for a
	// session whose person is Options.Person. When empty, New generates
	// 256 random bits; read it with Dashboard.LoginToken or
	// Dashboard.LoginURL. A token given here must be at least 16
	// characters long. It must be empty when People is set: then no
	// shared token exists.
	LoginToken string
	// Person names the person who undoes through the dashboard after
	// signing in with the shared login token; the ledger records
	// "person:<Person>" (default "dashboard"). People, TrustedHeader and
	// WithPerson name each person instead.
	Person string
	// People, when set, are the only ones who can sign in: each with
	// /login?token=THEIR_TOKEN, recorded as "person:<name>". The shared
	// login token is then not accepted (LoginToken returns ""), so that
	// no anonymous person can act. Read them with PeopleFromFile.
	People *People
	// TrustedHeader names a request header ("X-Forwarded-User") in which
	// a reverse proxy that authenticates people names the person. It is
	// trusted only on requests whose TCP peer is loopback (the proxy on
	// this host); from any other peer it is ignored and the first such
	// request is logged. It is ignored too on a request whose Host is
	// neither this machine (localhost, a loopback address) nor one of
	// ProxyHosts, for that is how DNS rebinding looks. The proxy must set
	// the header on every request and drop any value the client sent. A
	// request it names needs no login, and its POSTs still need the CSRF
	// token of the pages the dashboard gave that person. Every process on
	// the host can reach loopback: set this only where that is acceptable.
	TrustedHeader string
	// ProxyHosts are the host names a proxy that passes the browser's
	// Host header on forwards ("dashboard.example.com"), for
	// TrustedHeader. A proxy that sends the dashboard's own address as the
	// Host (127.0.0.1:8081) needs none.
	ProxyHosts []string
	// SessionTTL is how long a session lasts after login (default 12 h).
	SessionTTL time.Duration
	// MaxSessions caps the sessions kept in memory (default 100); a new
	// login beyond it ends the oldest session.
	MaxSessions int
	// SecureCookie marks the session cookie Secure even on plain-HTTP
	// requests, for a dashboard behind a proxy that terminates TLS.
	// Requests that arrive over TLS always get a Secure cookie.
	SecureCookie bool
	// Wrap, when set, wraps the whole dashboard, outside its own checks:
	// the operator's own authentication middleware, for example.
	Wrap func(http.Handler) http.Handler
	// Now replaces time.Now for relative times and session expiry (tests).
	Now func() time.Time
	// Logger receives one record per undo, per sign-in of a person, per
	// unexpected error, and the first trusted header of each kind that is
	// ignored. Tokens are never logged. Nil discards.
	Logger *slog.Logger
}

// Dashboard is the dashboard's http.Handler. Create one with New.
type Dashboard struct {
	guard    *changeset.Guard
	opts     Options
	token    string // the shared login token; "" when People is set
	people   *People
	header   *headerGate
	named    bool // Options.Person was given, not defaulted
	sessions *sessionStore
	pages    *pages
	handler  http.Handler // everything, Wrap included
}

// New returns a dashboard over guard. It returns an error for invalid
// options.
func New(guard *changeset.Guard, opts Options) (*Dashboard, error) {
	if guard == nil {
		return nil, errors.New("dashboard: nil Guard")
	}
	named := opts.Person != ""
	if !named {
		opts.Person = DefaultPerson
	}
	if err := validPerson(opts.Person); err != nil {
		return nil, fmt.Errorf("dashboard: Options.Person: %w", err)
	}
	if opts.SessionTTL < 0 || opts.MaxSessions < 0 {
		return nil, errors.New("dashboard: SessionTTL and MaxSessions must not be negative")
	}
	if opts.SessionTTL == 0 {
		opts.SessionTTL = DefaultSessionTTL
	}
	if opts.MaxSessions == 0 {
		opts.MaxSessions = 100
	}
	if opts.Now == nil {
		opts.Now = time.Now
	}
	if opts.Logger == nil {
		opts.Logger = slog.New(slog.NewTextHandler(io.Discard, nil))
	}
	if err := validHeaderName(opts.TrustedHeader); err != nil {
		return nil, fmt.Errorf("dashboard: Options.TrustedHeader: %w", err)
	}
	token := opts.LoginToken
	switch {
	case opts.People != nil && token != "":
		return nil, errors.New("dashboard: Options.LoginToken and Options.People exclude each other: with People, each person signs in with their own token and no shared one is accepted")
	case opts.People != nil:
		if opts.People.file == nil {
			return nil, errors.New("dashboard: Options.People is empty; read it with PeopleFromFile")
		}
	case token == "":
		token = randomString(32)
	case len(token) < minLoginTokenLen:
		return nil, fmt.Errorf("dashboard: Options.LoginToken must be at least %d characters long", minLoginTokenLen)
	case strings.ContainsFunc(token, func(r rune) bool { return r <= ' ' || r >= 0x7f }):
		return nil, errors.New("dashboard: Options.LoginToken must be printable ASCII without spaces")
	}
	opts.LoginToken = ""
	p, err := parsePages()
	if err != nil {
		return nil, err
	}
	d := &Dashboard{
		guard:    guard,
		opts:     opts,
		token:    token,
		people:   opts.People,
		header:   &headerGate{name: opts.TrustedHeader, hosts: opts.ProxyHosts, logger: opts.Logger},
		named:    named,
		sessions: newSessionStore(opts.SessionTTL, opts.MaxSessions, opts.Now),
		pages:    p,
	}
	d.handler = d.routes()
	if opts.Wrap != nil {
		d.handler = opts.Wrap(d.handler)
	}
	return d, nil
}

// Handler returns the dashboard over guard as an http.Handler. Use New
// instead to read a generated login token.
func Handler(guard *changeset.Guard, opts Options) (http.Handler, error) {
	d, err := New(guard, opts)
	if err != nil {
		return nil, err
	}
	return d, nil
}

// ServeHTTP serves the dashboard.
func (d *Dashboard) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	d.handler.ServeHTTP(w, r)
}

// LoginToken returns the shared secret that /login exchanges for a
// session. Print it only where the operator alone can read it (the
// server's standard error), never into a log that others read. It returns
// "" when Options.People is set: then there is no shared token, and each
// person signs in with their own.
func (d *Dashboard) LoginToken() string { return d.token }

// LoginURL returns the login link for a dashboard served at base, for
// example "http://127.0.0.1:8080/login?token=…". When Options.People is
// set it returns the link without a token ("http://127.0.0.1:8080/login"):
// each person adds "?token=" and their own token from the people file.
func (d *Dashboard) LoginURL(base string) string {
	u := strings.TrimSuffix(base, "/") + "/login"
	if d.people != nil {
		return u
	}
	return u + "?token=" + url.QueryEscape(d.token)
}

// routes registers every page and action on a ServeMux and puts the
// security headers and the session check in front of them.
func (d *Dashboard) routes() http.Handler {
	mux := http.NewServeMux()
	mux.Handle("GET /assets/", http.StripPrefix("/assets/", assetServer()))
	mux.HandleFunc("GET /login", d.login)
	authed := func(pattern string, h http.HandlerFunc) {
		mux.Handle(pattern, d.requireSession(h))
	}
	authed("GET /{$}", d.runsPage)
	authed("GET /runs/{id}", d.runPage)
	authed("POST /runs/{id}/dry-run", d.dryRun)
	authed("POST /runs/{id}/undo", d.undoRun)
	authed("GET /changes", d.changesPage)
	authed("GET /changes/{id}", d.changePage)
	authed("POST /changes/{id}/undo", d.undoChange)
	authed("GET /approvals", d.approvalsPage)
	authed("GET /approvals/{id}", d.approvalPage)
	authed("POST /approvals/{id}/approve", d.decide(ledger.Approve))
	authed("POST /approvals/{id}/decline", d.decide(ledger.Decline))
	authed("POST /logout", d.logout)
	authed("/", d.notFound)

	cop := http.NewCrossOriginProtection()
	cop.SetDenyHandler(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		d.renderError(w, r, http.StatusForbidden, "Cross-origin request refused",
			"This form was sent from another site. Use the dashboard's own pages.")
	}))
	return securityHeaders(cop.Handler(mux))
}

// personKey is the context key of WithPerson.
type personKey struct{}

// WithPerson returns a context that names the person acting on this
// request. A Wrap middleware that has authenticated the user calls it:
//
//	r = r.WithContext(dashboard.WithPerson(r.Context(), user.Login))
//
// The request still needs a session (or Options.TrustedHeader). Of the
// ways to name a person, the first that names one wins: WithPerson, then
// Options.TrustedHeader (from loopback), then the person whose token from
// Options.People opened the session, then Options.Person. Names that are
// empty, longer than 64 bytes or hold control or format characters are
// ignored.
func WithPerson(ctx context.Context, name string) context.Context {
	return context.WithValue(ctx, personKey{}, name)
}

// person returns the name of the person acting on r.
func (d *Dashboard) person(r *http.Request) string {
	name, _ := d.identify(r)
	return name
}

// identify returns the name of the person acting on r, and whether
// someone named them (WithPerson, the trusted header, a person's own
// token, or an Options.Person given) rather than the default applying.
func (d *Dashboard) identify(r *http.Request) (string, bool) {
	if name, ok := r.Context().Value(personKey{}).(string); ok && validPerson(name) == nil {
		return name, true
	}
	if s := sessionOf(r); s != nil && s.person != "" {
		return s.person, true // a person's token, or the trusted header
	}
	return d.opts.Person, d.named
}

func validPerson(name string) error {
	switch {
	case name == "" || len(name) > 64:
		return errors.New("a person's name must be 1 to 64 bytes")
	case !utf8.ValidString(name):
		return errors.New("a person's name must be valid UTF-8")
	case strings.ContainsFunc(name, func(r rune) bool { return unicode.IsControl(r) || unicode.Is(unicode.Cf, r) }):
		return errors.New("a person's name must not hold control or format characters")
	}
	return nil
}

// validHeaderName accepts "" (no header) and HTTP header names made of
// letters, digits and '-'; it refuses the headers a browser or the
// dashboard itself sets.
func validHeaderName(name string) error {
	if name == "" {
		return nil
	}
	for _, r := range name {
		if !(r == '-' || r >= '0' && r <= '9' || r >= 'a' && r <= 'z' || r >= 'A' && r <= 'Z') {
			return fmt.Errorf("%q is not a header name (letters, digits and '-')", name)
		}
	}
	switch http.CanonicalHeaderKey(name) {
	case "Cookie", "Authorization", "Host", "Origin", "Referer", "User-Agent", "Content-Type", "Content-Length":
		return fmt.Errorf("%q is set by browsers, not by a proxy; name the header your proxy sets, e.g. X-Forwarded-User", name)
	}
	return nil
}

// randomString returns n random bytes from crypto/rand as unpadded URL-safe
// base64.
func randomString(n int) string {
	b := make([]byte, n)
	rand.Read(b) // never fails (crypto/rand panics rather than return an error)
	return base64.RawURLEncoding.EncodeToString(b)
}
