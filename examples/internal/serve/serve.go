// Package serve holds what every example server shares: the common flags
// and their usage text, the default ledger location, bearer-token
// authentication for Streamable HTTP, the change scope taken from the
// caller's identity, and running an MCP server over stdio or HTTP until the
// process is told to stop.
//
// An example describes itself as a [Program] and hands it to [Main].
package serve

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"log/slog"
	"os"
	"path/filepath"
	"strings"

	changeset "github.com/mcp-changeset/changeset-go"
	"github.com/mcp-changeset/changeset-go/dashboard"
	_ "github.com/mcp-changeset/changeset-go/ledger/postgres" // --ledger postgres://…
	"github.com/modelcontextprotocol/go-sdk/mcp"
)

// Version is the version every example reports to its clients.
const Version = "1.0.0"

// Flags are the flags every example takes.
type Flags struct {
	Ledger        string // --ledger
	HTTP          string // --http
	AuthTokenFile string // --auth-token-file
	AllowRemote   bool   // --allow-remote
	Dashboard     string // --dashboard
}

// commonFlags names the flags Register adds, so that the usage text can
// list them apart from an example's own.
var commonFlags = map[string]bool{"ledger": true, "http": true, "auth-token-file": true, "allow-remote": true, "dashboard": true}

// Register adds the common flags to fs. name is the example's name, used
// for the default ledger file.
func (f *Flags) Register(fs *flag.FlagSet, name string) {
	// The default is filled in after parsing (see Main), so that --help
	// never prints $MCP_CHANGESET_LEDGER, which may hold a password.
	fs.StringVar(&f.Ledger, "ledger", "",
		"the ledger: a SQLite `file` or a postgres:// URL (default: $MCP_CHANGESET_LEDGER, else "+name+".db under the user's state directory)")
	fs.StringVar(&f.HTTP, "http", "",
		"serve Streamable HTTP at http://`addr`/mcp (e.g. 127.0.0.1:8080) instead of stdio; needs --auth-token-file")
	fs.StringVar(&f.AuthTokenFile, "auth-token-file", "",
		"the bearer tokens HTTP clients must present: a `file` of lines \"TOKEN IDENTITY\"; the identity scopes the caller's changes")
	fs.BoolVar(&f.AllowRemote, "allow-remote", false,
		"allow --http on an address other than loopback (plain HTTP: put a TLS-terminating proxy in front)")
	fs.StringVar(&f.Dashboard, "dashboard", "",
		"also serve the dashboard for people at http://`addr` (loopback unless --allow-remote); its login URL is printed to stderr")
}

// Check validates the common flags after parsing.
func (f *Flags) Check() error {
	if f.Ledger == "" {
		return errors.New("--ledger must not be empty")
	}
	if f.HTTP == "" {
		if f.AuthTokenFile != "" || (f.AllowRemote && f.Dashboard == "") {
			return errors.New("--auth-token-file only makes sense with --http, and --allow-remote with --http or --dashboard")
		}
		return nil
	}
	if f.AuthTokenFile == "" {
		return errors.New("--http needs --auth-token-file: every HTTP caller must present a bearer token, whose identity becomes the scope of its changes")
	}
	return checkListenAddr(f.HTTP, f.AllowRemote)
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

// EnsureDir creates the directory of a ledger file, so that the default
// location works on a fresh machine. A database URL needs nothing.
func EnsureDir(ledgerPath string) error {
	if strings.Contains(ledgerPath, "://") {
		return nil
	}
	return os.MkdirAll(filepath.Dir(ledgerPath), 0o700)
}

// Logger writes to stderr: stdout belongs to the MCP stdio transport.
func Logger() *slog.Logger {
	return slog.New(slog.NewTextHandler(os.Stderr, &slog.HandlerOptions{Level: slog.LevelInfo}))
}

// Program is one example server, as Main runs it.
type Program struct {
	// Name is the command's name ("notes"); it also names the default
	// ledger file.
	Name string
	// Synopsis follows the name on the usage line, e.g. "--root DIR [flags]".
	// Empty means "[flags]".
	Synopsis string
	// About says what the server does and which tools it has, for --help.
	About string
	// Flags adds the example's own flags to fs. Optional.
	Flags func(fs *flag.FlagSet)
	// Check validates the example's own flags after parsing, given the
	// common ones. Its error is a usage error (exit status 2). Optional.
	Check func(f Flags) error
	// Options adjusts the Guard's options before New (e.g. to turn on user
	// approval); LedgerPath, Logger and ScopeFunc are already set. Optional.
	Options func(o *changeset.Options)
	// Setup registers the example's tools once the ledger is open. Its error
	// ends the process with exit status 1.
	Setup func(server *mcp.Server, guard *changeset.Guard, log *slog.Logger) error
}

// Main parses the command line, opens the ledger, calls p.Setup and serves
// until the client disconnects or the process gets SIGINT or SIGTERM. It
// exits the process: 0 on a clean stop, 1 on an error, 2 on a usage error.
// --help prints the usage text on stdout and exits 0.
func Main(p Program) {
	fs := flag.NewFlagSet(p.Name, flag.ContinueOnError)
	fs.SetOutput(os.Stderr)
	var f Flags
	f.Register(fs, p.Name)
	if p.Flags != nil {
		p.Flags(fs)
	}
	fs.Usage = func() {} // printed below: asked for on stdout, after an error on stderr
	if err := fs.Parse(os.Args[1:]); err != nil {
		if errors.Is(err, flag.ErrHelp) {
			usage(os.Stdout, fs, p)
			os.Exit(0)
		}
		usage(os.Stderr, fs, p) // after the flag package's error line
		os.Exit(2)
	}
	if fs.NArg() > 0 {
		usageError(p.Name, fmt.Errorf("unexpected argument %q", fs.Arg(0)))
	}
	ledgerSet := false
	fs.Visit(func(fl *flag.Flag) { ledgerSet = ledgerSet || fl.Name == "ledger" })
	if !ledgerSet {
		f.Ledger = DefaultLedger(p.Name)
	}
	if err := f.Check(); err != nil {
		usageError(p.Name, err)
	}
	if p.Check != nil {
		if err := p.Check(f); err != nil {
			usageError(p.Name, err)
		}
	}
	if err := run(p, f); err != nil {
		fmt.Fprintf(os.Stderr, "%s: %v\n", p.Name, err)
		os.Exit(1)
	}
}

// run opens the ledger, builds the server and serves it.
func run(p Program, f Flags) error {
	log := Logger()
	var verifier *Tokens
	if f.HTTP != "" {
		t, err := LoadTokens(f.AuthTokenFile, log)
		if err != nil {
			return err
		}
		verifier = t
	}
	if err := EnsureDir(f.Ledger); err != nil {
		return err
	}
	server := mcp.NewServer(&mcp.Implementation{Name: p.Name, Version: Version}, nil)
	opts := changeset.Options{LedgerPath: f.Ledger, Logger: log, ScopeFunc: ScopeFromRequest}
	if p.Options != nil {
		p.Options(&opts)
	}
	guard, err := changeset.New(server, opts)
	if err != nil {
		return err
	}
	defer guard.Close()
	if err := p.Setup(server, guard, log); err != nil {
		return err
	}
	if f.Dashboard != "" {
		ctx, cancel := context.WithCancel(context.Background())
		defer cancel()
		d, err := dashboard.New(guard, dashboard.Options{Logger: log})
		if err != nil {
			return err
		}
		login, err := dashboard.Serve(ctx, f.Dashboard, d, &dashboard.ServeOptions{AllowRemote: f.AllowRemote})
		if err != nil {
			return err
		}
		// Printed once, to stderr only: the URL holds the login token.
		fmt.Fprintf(os.Stderr, "%s: dashboard: %s\n", p.Name, login)
	}
	return Run(server, f, verifier, log)
}

func usageError(name string, err error) {
	fmt.Fprintf(os.Stderr, "%s: %v\nRun '%s --help' for usage.\n", name, err, name)
	os.Exit(2)
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
