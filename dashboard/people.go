package dashboard

import (
	"log/slog"
	"net/http"
	"sync"

	"github.com/mcp-changeset/changeset-go/internal/hostport"
	"github.com/mcp-changeset/changeset-go/internal/tokenfile"
)

// People are the people who may sign in to a dashboard, each with a login
// token of their own: the people file's "TOKEN NAME" lines. Only SHA-256
// digests of the tokens are kept in memory. Set Options.People to one
// and each person signs in with /login?token=THEIR_TOKEN; what they do is
// recorded as "person:<name>".
type People struct {
	file *tokenfile.File
}

// peopleFormat is the people file's format: the bearer token file's, with
// a person's name where the identity goes.
var peopleFormat = tokenfile.Format{What: "people file", Field: "NAME", Check: validPerson}

// PeopleFromFile reads a people file: one "TOKEN NAME" pair per line,
// separated by spaces or tabs, the format of the server's bearer token
// file, for example
//
//	# made with: openssl rand -hex 32
//	3f0c…9a ana
//	b71e…04 bob
//
// Blank lines and lines starting with '#' are skipped. A name is 1 to 64
// bytes of UTF-8 without spaces, control or format characters; a token
// may appear once, a name on several lines (one person, several
// devices). Errors name the file and the line, never a token. logger
// (nil discards) gets a warning for a token shorter than 16 characters
// and for a file that other users can read (chmod 600 it).
//
// Give a person's agent the same name as its identity in the bearer token
// file: the dashboard's "My agents' work" lists the changes of
// "agent:<name>". The file is read once; restart to change it.
func PeopleFromFile(path string, logger *slog.Logger) (*People, error) {
	f, err := tokenfile.Read(path, peopleFormat, logger)
	if err != nil {
		return nil, err
	}
	return &People{file: f}, nil
}

// Len is the number of tokens in the file.
func (p *People) Len() int { return p.file.Len() }

// lookup returns the person a login token names.
func (p *People) lookup(token string) (string, bool) { return p.file.Lookup(token) }

// headerGate reads the trusted header of Options.TrustedHeader. It trusts
// the header only on a request whose TCP peer is loopback (the reverse
// proxy on this host that authenticated the person) and whose Host is
// this machine or one of Options.ProxyHosts. From any other peer the
// header is ignored, and so is a request that names another host: that is
// how DNS rebinding looks, a web page whose own name now resolves to
// 127.0.0.1 and whose script could set any header. The first request of
// each kind is logged.
type headerGate struct {
	name   string   // the header's name; "" when none is trusted
	hosts  []string // Options.ProxyHosts
	logger *slog.Logger
	peer   sync.Once // the warning for a header from another peer
	host   sync.Once // the warning for a header with a Host not listed
	bad    sync.Once // the warning for a header that holds no valid name
}

// person returns the name the trusted header gives r, or "".
func (g *headerGate) person(r *http.Request) string {
	if g.name == "" {
		return ""
	}
	name := r.Header.Get(g.name)
	if name == "" {
		return ""
	}
	if !hostport.Loopback(r.RemoteAddr) {
		g.peer.Do(func() {
			g.logger.Warn("dashboard: ignoring the trusted header on a request that did not come from loopback; only a reverse proxy on this host may name the person",
				"header", g.name, "peer", r.RemoteAddr)
		})
		return ""
	}
	if !hostport.Loopback(r.Host) && !hostport.Listed(r.Host, g.hosts) {
		g.host.Do(func() {
			g.logger.Warn("dashboard: ignoring the trusted header on a request for a host that is neither this machine nor in Options.ProxyHosts (DNS rebinding looks like this; list the name your proxy forwards)",
				"header", g.name, "host", r.Host)
		})
		return ""
	}
	if err := validPerson(name); err != nil {
		g.bad.Do(func() {
			g.logger.Warn("dashboard: ignoring a trusted header that names no valid person", "header", g.name, "err", err)
		})
		return ""
	}
	return name
}
