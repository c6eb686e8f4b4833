package serve

import (
	"errors"
	"flag"
	"fmt"
	"io"
	"net"
	"os"
	"path/filepath"
	"strings"
	"time"

	changeset "github.com/mcp-changeset/changeset-go"
	"github.com/mcp-changeset/changeset-go/checkpoint"
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
	// Approval (--approval token|user|person): who approves a write;
	// "" is token. --user-approval is another spelling of --approval user.
	// See docs/approval.md.
	Approval string
	// UserApproval (--user-approval): the user approves every write in the
	// client, through form elicitation; the same as --approval user, which
	// Check sets Approval to.
	UserApproval bool
	// Approvers (--approvers N): how many distinct people approve each
	// write under --approval person (changeset.Options.Approvers); 0 is 1.
	Approvers int
	// DashboardURL (--dashboard-url URL): the base of approval links
	// (changeset.Options.DashboardURL); default the dashboard's own
	// address when --dashboard names a port.
	DashboardURL string
	// NotifyWebhook (--notify-webhook URL) receives the ledger's events,
	// signed with the secret in NotifySecretFile (--notify-secret-file
	// FILE); see package notify.
	NotifyWebhook, NotifySecretFile string
	// CheckpointKey (--checkpoint-key FILE) and CheckpointDir
	// (--checkpoint-dir DIR): sign a checkpoint of the ledger's history
	// with the key in FILE (created, mode 0600, when missing) into DIR
	// every CheckpointEvery (--checkpoint-every D, default 1h); see
	// package checkpoint.
	CheckpointKey, CheckpointDir string
	CheckpointEvery              time.Duration
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
var commonFlags = map[string]bool{"ledger": true, "http": true, "stateless": true, "auth-token-file": true, "allow-remote": true, "dashboard": true, "dashboard-people": true, "allowed-hosts": true, "user-approval": true, "durability": true,
	"approval": true, "approvers": true, "dashboard-url": true, "notify-webhook": true, "notify-secret-file": true,
	"checkpoint-key": true, "checkpoint-dir": true, "checkpoint-every": true}

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
	fs.StringVar(&f.Approval, "approval", "",
		"who approves a write: `mode` token (the agent presents the preview's token; the default), user (the user approves in the client, as --user-approval) or person (a named person approves at a link, in the dashboard or with mcp-changeset approve, as well as the token)")
	fs.IntVar(&f.Approvers, "approvers", 0,
		"with --approval person: how many different people must approve each write (default 1; 2 is the two-person rule)")
	fs.StringVar(&f.DashboardURL, "dashboard-url", "",
		"with --approval person or --notify-webhook: the `URL` people open the dashboard at, the base of approval links (default: the dashboard's own address, http://ADDR of --dashboard)")
	fs.StringVar(&f.NotifyWebhook, "notify-webhook", "",
		"POST the ledger's events (approval requested or decided, change failed, run undone) as signed JSON to this `URL`; needs --notify-secret-file")
	fs.StringVar(&f.NotifySecretFile, "notify-secret-file", "",
		"the `file` holding the secret that signs --notify-webhook's events (X-Changeset-Signature: sha256=HMAC of the body)")
	fs.StringVar(&f.CheckpointKey, "checkpoint-key", "",
		"sign checkpoints of the ledger's history with the Ed25519 key in this `file` (created, mode 0600, when missing; its public key is logged at start); needs --checkpoint-dir")
	fs.StringVar(&f.CheckpointDir, "checkpoint-dir", "",
		"write each checkpoint to this `directory` as checkpoint-SEQ.json (created when missing); copy them where the ledger's writers cannot reach, and check them with mcp-changeset verify --checkpoint")
	fs.DurationVar(&f.CheckpointEvery, "checkpoint-every", checkpoint.DefaultEvery,
		"with --checkpoint-key: sign a checkpoint at start and then every `duration` (nothing when no entry was written since the last)")
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
	if err := f.checkApproval(); err != nil {
		return err
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

// checkApproval validates --approval and the flags that go with it, and
// settles --user-approval into Approval.
func (f *Flags) checkApproval() error {
	switch {
	case f.UserApproval && f.Approval != "" && f.Approval != "user":
		return fmt.Errorf("--user-approval means --approval user, not --approval %s", f.Approval)
	case f.UserApproval:
		f.Approval = "user"
	}
	if f.Approval != "" {
		if _, err := changeset.ParseApproval(f.Approval); err != nil {
			return fmt.Errorf("--approval %q: want token, user or person", f.Approval)
		}
	}
	switch {
	case f.Approvers != 0 && f.Approval != "person":
		return errors.New("--approvers only makes sense with --approval person")
	case f.Approvers < 0 || f.Approvers > ledger.MaxApprovers:
		return fmt.Errorf("--approvers %d: want 1 to %d", f.Approvers, ledger.MaxApprovers)
	case (f.NotifyWebhook == "") != (f.NotifySecretFile == ""):
		return errors.New("--notify-webhook and --notify-secret-file go together: the secret signs every event")
	case (f.CheckpointKey == "") != (f.CheckpointDir == ""):
		return errors.New("--checkpoint-key and --checkpoint-dir go together: the key signs the checkpoints written to the directory")
	case f.CheckpointEvery < 0 || f.CheckpointKey != "" && f.CheckpointEvery == 0:
		return fmt.Errorf("--checkpoint-every %s: want a positive duration such as 1h", f.CheckpointEvery)
	case f.CheckpointKey == "" && f.CheckpointEvery != 0 && f.CheckpointEvery != checkpoint.DefaultEvery:
		return errors.New("--checkpoint-every only makes sense with --checkpoint-key and --checkpoint-dir")
	case f.NotifyWebhook != "" && !strings.HasPrefix(f.NotifyWebhook, "http://") && !strings.HasPrefix(f.NotifyWebhook, "https://"):
		return fmt.Errorf("--notify-webhook %q: want an http:// or https:// URL", f.NotifyWebhook)
	}
	return nil
}

// dashboardURL is the base of approval links: --dashboard-url, else the
// dashboard's own address when --dashboard names a port ("" otherwise).
func (f *Flags) dashboardURL() string {
	if f.DashboardURL != "" || f.Dashboard == "" {
		return f.DashboardURL
	}
	host, port, err := net.SplitHostPort(f.Dashboard)
	if err != nil || port == "0" || port == "" {
		return ""
	}
	if host == "" {
		host = "localhost"
	}
	return "http://" + net.JoinHostPort(host, port)
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
