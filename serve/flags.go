package serve

import (
	"errors"
	"flag"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"strings"

	"github.com/mcp-changeset/changeset-go/ledger"
)

// Flags are the flags [Main] gives every server.
type Flags struct {
	Ledger        string // --ledger: a SQLite file or a postgres:// URL
	HTTP          string // --http: serve Streamable HTTP on this address
	Stateless     bool   // --stateless: stateless Streamable HTTP
	AuthTokenFile string // --auth-token-file: see BearerTokensFromFile
	AllowRemote   bool   // --allow-remote: listen beyond loopback
	Dashboard     string // --dashboard: serve the dashboard on this address
	// DashboardPeople (--dashboard-people FILE): the people who sign in to
	// the dashboard, each with their own token, from a file of "TOKEN
	// NAME" lines (see dashboard.PeopleFromFile). With it the dashboard
	// accepts no shared login token, and records what each person does
	// as "person:<name>".
	DashboardPeople string
	// UserApproval (--user-approval): the user approves every write in the
	// client, through form elicitation; it sets Options.Approval to
	// changeset.UserApproval. See docs/approval.md.
	UserApproval bool
	// AllowedHosts (--allowed-hosts, comma-separated or repeated): see
	// HTTPOptions.AllowedHosts.
	AllowedHosts []string
	// Durability (--durability full|claims): which of the ledger's commits
	// wait for the disk; see changeset.Options.Durability.
	Durability ledger.Durability

	// ownVerifier: the program verifies tokens itself, so --http needs no
	// token file.
	ownVerifier bool
}

// commonFlags names the flags Register adds, so that the usage text can
// list them apart from a program's own.
var commonFlags = map[string]bool{"ledger": true, "http": true, "stateless": true, "auth-token-file": true, "allow-remote": true, "dashboard": true, "dashboard-people": true, "allowed-hosts": true, "user-approval": true, "durability": true}

// Register adds the common flags to fs. name is the program's name, used
// for the default ledger file.
func (f *Flags) Register(fs *flag.FlagSet, name string) {
	// The default is filled in after parsing (see Main), so that --help
	// never prints $MCP_CHANGESET_LEDGER, which may hold a password.
	fs.StringVar(&f.Ledger, "ledger", "",
		"the ledger: a SQLite `file` or a postgres:// URL (default: $MCP_CHANGESET_LEDGER, else "+name+".db under the user's state directory)")
	fs.StringVar(&f.HTTP, "http", "",
		"serve Streamable HTTP at http://`addr`/mcp (e.g. 127.0.0.1:8080) instead of stdio; needs --auth-token-file")
	fs.BoolVar(&f.Stateless, "stateless", false,
		"with --http: keep no sessions, so that replicas behind a load balancer can each take any request")
	fs.StringVar(&f.AuthTokenFile, "auth-token-file", "",
		"the bearer tokens HTTP clients must present: a `file` of lines \"TOKEN IDENTITY\"; the identity scopes the caller's changes")
	fs.BoolVar(&f.AllowRemote, "allow-remote", false,
		"allow --http on an address other than loopback (plain HTTP: put a TLS-terminating proxy in front)")
	fs.Func("allowed-hosts",
		"with --http: the `names` (comma-separated) a TLS proxy on this host forwards in the Host header; other names arriving on loopback get 403",
		func(v string) error {
			for _, h := range strings.Split(v, ",") {
				if h = strings.TrimSpace(h); h != "" {
					f.AllowedHosts = append(f.AllowedHosts, h)
				}
			}
			return nil
		})
	fs.BoolVar(&f.UserApproval, "user-approval", false,
		"the user approves every write in the client (form elicitation) instead of the agent presenting a token; over --stateless only clients on protocol 2026-07-28 can be asked")
	fs.Var(&f.Durability, "durability",
		"the ledger's `durability`: full (every commit waits for the disk) or claims (only the claims of an apply, an undo or a run's undo; a power loss may then lose the latest previews and outcomes, never at-most-once; see docs/reliability.md)")
	fs.StringVar(&f.Dashboard, "dashboard", "",
		"also serve the dashboard for people at http://`addr` (loopback unless --allow-remote); its login URL is printed to stderr")
	fs.StringVar(&f.DashboardPeople, "dashboard-people", "",
		"with --dashboard: the people who may sign in, a `file` of lines \"TOKEN NAME\" (the token file's format); each opens /login?token=THEIR_TOKEN, no shared login token is accepted, and what each does is recorded as person:NAME")
}

// Check validates the common flags after parsing.
func (f *Flags) Check() error {
	if f.Ledger == "" {
		return errors.New("--ledger must not be empty")
	}
	if f.DashboardPeople != "" && f.Dashboard == "" {
		return errors.New("--dashboard-people only makes sense with --dashboard ADDR, the dashboard it signs people in to")
	}
	if f.HTTP == "" {
		if f.AuthTokenFile != "" || f.Stateless || len(f.AllowedHosts) > 0 || (f.AllowRemote && f.Dashboard == "") {
			return errors.New("--auth-token-file, --stateless and --allowed-hosts only make sense with --http, and --allow-remote with --http or --dashboard")
		}
		return nil
	}
	if f.AuthTokenFile == "" && !f.ownVerifier {
		return errors.New("--http needs --auth-token-file: every HTTP caller must present a bearer token, whose identity becomes the scope of its changes")
	}
	if err := checkListenAddr(f.HTTP, f.AllowRemote); err != nil {
		return fmt.Errorf("--http: %w", err)
	}
	return nil
}

// DefaultLedger is $MCP_CHANGESET_LEDGER, or name.db under the user's state
// directory ($XDG_STATE_HOME, else ~/.local/state) in mcp-changeset/.
func DefaultLedger(name string) string {
	if p := os.Getenv("MCP_CHANGESET_LEDGER"); p != "" {
		return p
	}
	dir := os.Getenv("XDG_STATE_HOME")
	if dir == "" {
		home, err := os.UserHomeDir()
		if err != nil {
			return name + ".db"
		}
		dir = filepath.Join(home, ".local", "state")
	}
	return filepath.Join(dir, "mcp-changeset", name+".db")
}

// ensureDir creates the directory of a ledger file, so that the default
// location works on a fresh machine. A database URL needs nothing.
func ensureDir(ledgerPath string) error {
	if strings.Contains(ledgerPath, "://") {
		return nil
	}
	return os.MkdirAll(filepath.Dir(ledgerPath), 0o700)
}

// usage prints the --help text: the synopsis, what the server does, its
// own flags and then the common ones.
func usage(w io.Writer, fs *flag.FlagSet, p Program) {
	synopsis := p.Synopsis
	if synopsis == "" {
		synopsis = "[flags]"
	}
	fmt.Fprintf(w, "Usage: %s %s\n\n%s\n", p.Name, synopsis, strings.TrimSpace(p.About))
	fmt.Fprintf(w, "\nWrites stay off until the server runs with MCP_CHANGESET_WRITE_MODE=guarded;\npreviews always work.\n")
	var own, common strings.Builder
	fs.VisitAll(func(fl *flag.Flag) {
		b := &own
		if commonFlags[fl.Name] {
			b = &common
		}
		printFlag(b, fl)
	})
	if own.Len() > 0 {
		fmt.Fprintf(w, "\nFlags:\n%s", own.String())
	}
	fmt.Fprintf(w, "\nCommon flags:\n%s", common.String())
}

// printFlag writes one flag the way flag.PrintDefaults does, with the two
// dashes the examples' documentation uses.
func printFlag(w io.Writer, fl *flag.Flag) {
	arg, text := flag.UnquoteUsage(fl)
	line := "  --" + fl.Name
	if arg != "" {
		line += " " + arg
	}
	fmt.Fprintf(w, "%s\n    \t%s", line, strings.ReplaceAll(text, "\n", "\n    \t"))
	if fl.DefValue != "" && fl.DefValue != "false" && fl.DefValue != "[]" {
		fmt.Fprintf(w, " (default %q)", fl.DefValue)
	}
	fmt.Fprintln(w)
}
