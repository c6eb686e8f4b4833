package serve

import (
	"context"
	"crypto/ed25519"
	"errors"
	"flag"
	"fmt"
	"log/slog"
	"net"
	"os"
	"os/signal"
	"syscall"

	changeset "github.com/mcp-changeset/changeset-go"
	"github.com/mcp-changeset/changeset-go/checkpoint"
	"github.com/mcp-changeset/changeset-go/dashboard"
	"github.com/mcp-changeset/changeset-go/notify"
	"github.com/modelcontextprotocol/go-sdk/auth"
	"github.com/modelcontextprotocol/go-sdk/mcp"
)

// Program describes a server for [Main]: its name, its help text, its own
// flags and the code that registers its tools.
type Program struct {
	// Name is the command's name ("notes"). It names the server to its
	// clients and the default ledger file.
	Name string
	// Version is reported to clients (default "1.0.0").
	Version string
	// Synopsis follows the name on the usage line, e.g. "--root DIR [flags]".
	// Empty means "[flags]".
	Synopsis string
	// About says what the server does and which tools it has, for --help.
	About string
	// Flags adds the program's own flags to fs. Optional.
	Flags func(fs *flag.FlagSet)
	// Check validates the program's own flags after parsing, given the
	// common ones. Its error is a usage error (exit status 2). Optional.
	Check func(f Flags) error
	// Options adjusts the Guard's options before changeset.New, for
	// example to turn on user approval. LedgerPath, Logger, ScopeFunc
	// (ScopeFromRequest) and Principal (PrincipalFromRequest) are already
	// set, and so are Approval, Approvers, DashboardURL, Notify and
	// Checkpoints from --approval (or --user-approval), --approvers,
	// --dashboard-url, --notify-webhook and --checkpoint-key. Optional.
	Options func(o *changeset.Options)
	// Verifier, when set, checks HTTP callers' bearer tokens instead of
	// --auth-token-file (which then becomes optional): plug in your own
	// identity provider here. The UserID of the TokenInfo it returns
	// becomes the caller's scope and principal. Optional.
	Verifier auth.TokenVerifier
	// Setup registers the program's tools once the ledger is open. Its
	// error ends the process with exit status 1.
	Setup func(server *mcp.Server, guard *changeset.Guard, log *slog.Logger) error
}

// Main is the whole main function of a guarded MCP server. It parses the
// command line (the common [Flags] and p's own), opens the ledger, creates
// the server and its Guard, calls p.Setup and serves:
//
//   - over stdio by default, through [Stdio], so that no input line can
//     end the session;
//   - with --http ADDR, over Streamable HTTP at http://ADDR/mcp (see
//     [RunHTTP]), loopback unless --allow-remote, every caller presenting a
//     bearer token from --auth-token-file (or accepted by p.Verifier), whose
//     identity becomes the scope and the principal of its changes;
//     --stateless keeps no sessions, for replicas behind a load balancer;
//   - with --dashboard ADDR, the dashboard for people beside it, its login
//     URL printed once to standard error; with --dashboard-people FILE,
//     each person signs in with their own token from FILE instead, and
//     no shared login token exists;
//   - with --approval user (or --user-approval), the user approves every
//     write in the client (changeset.UserApproval) instead of the agent
//     presenting a token; with --approval person, a named person approves
//     every write as well, at a link to the dashboard (--dashboard-url,
//     default the dashboard's own address), --approvers N of them;
//   - with --notify-webhook URL and --notify-secret-file FILE, the
//     ledger's events (an approval requested, a change failed, …) are
//     POSTed, signed, to URL (see package notify);
//   - with --checkpoint-key FILE and --checkpoint-dir DIR, a checkpoint
//     of the ledger's history is signed with the key in FILE (made on
//     first use) into DIR at start and every --checkpoint-every (1h)
//     (see package checkpoint).
//
// It serves until the client disconnects (stdio) or the process gets
// SIGINT or SIGTERM, then stops gracefully and returns, so that main
// ends with exit status 0. On an error it exits the process with status 1,
// on a usage error with status 2; --help prints the usage text on standard
// output and exits 0. Logs go to standard error.
//
// A PostgreSQL ledger (--ledger postgres://…) needs the driver, which
// Main does not import: add
//
//	import _ "github.com/mcp-changeset/changeset-go/ledger/postgres"
func Main(p Program) {
	fs := flag.NewFlagSet(p.Name, flag.ContinueOnError)
	fs.SetOutput(os.Stderr)
	f := Flags{ownVerifier: p.Verifier != nil}
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

// approvalOptions sets the Guard's approval options from the flags:
// --approval (or --user-approval), --approvers, --dashboard-url and the
// webhook of --notify-webhook with the secret of --notify-secret-file.
//
// dashboardAddr is the address the dashboard listens on ("" without one):
// the base of approval links when --dashboard-url is not given.
func approvalOptions(f Flags, opts *changeset.Options, log *slog.Logger, dashboardAddr string) error {
	if f.Approval != "" {
		a, err := changeset.ParseApproval(f.Approval)
		if err != nil {
			return err
		}
		opts.Approval = a
	}
	opts.Approvers = f.Approvers
	opts.DashboardURL = f.dashboardURL()
	if opts.DashboardURL == "" && dashboardAddr != "" {
		opts.DashboardURL = "http://" + dashboardAddr
	}
	if opts.Approval == changeset.PersonApproval && opts.DashboardURL == "" {
		log.Warn("person approval without a dashboard address: approvals carry no link; give --dashboard ADDR or --dashboard-url URL, or approve with mcp-changeset approve")
	}
	if f.NotifyWebhook != "" {
		secret, err := notify.ReadSecretFile(f.NotifySecretFile)
		if err != nil {
			return fmt.Errorf("--notify-secret-file: %w", err)
		}
		opts.Notify = &notify.Webhook{URL: f.NotifyWebhook, Secret: secret, Logger: log}
	}
	return nil
}

// checkpointOptions sets the Guard's checkpoint schedule from
// --checkpoint-key, --checkpoint-dir and --checkpoint-every: the key is
// read, or made on first use, and the directory created when missing.
func checkpointOptions(f Flags, opts *changeset.Options, log *slog.Logger) error {
	if f.CheckpointKey == "" {
		return nil
	}
	key, created, err := checkpoint.LoadOrCreateKey(f.CheckpointKey)
	if err != nil {
		return fmt.Errorf("--checkpoint-key: %w", err)
	}
	pub := checkpoint.FormatPublicKey(key.Public().(ed25519.PublicKey))
	if created {
		log.Info("checkpoint key created (mode 0600); give its public key to mcp-changeset verify --public-key", "file", f.CheckpointKey, "public_key", pub)
	}
	if err := os.MkdirAll(f.CheckpointDir, 0o755); err != nil {
		return fmt.Errorf("--checkpoint-dir: %w", err)
	}
	opts.Checkpoints = &checkpoint.Schedule{Key: key, Dir: f.CheckpointDir, Every: f.CheckpointEvery, Logger: log}
	log.Info("signing checkpoints of the ledger's history", "dir", f.CheckpointDir, "every", f.CheckpointEvery.String(), "public_key", pub)
	return nil
}

func usageError(name string, err error) {
	fmt.Fprintf(os.Stderr, "%s: %v\nRun '%s --help' for usage.\n", name, err, name)
	os.Exit(2)
}

// run opens the ledger, builds the server and serves it.
func run(p Program, f Flags) error {
	log := slog.New(slog.NewTextHandler(os.Stderr, &slog.HandlerOptions{Level: slog.LevelInfo}))
	verifier := p.Verifier
	var tokens *Tokens
	if f.HTTP != "" && f.AuthTokenFile != "" {
		var err error
		if tokens, err = BearerTokensFromFile(f.AuthTokenFile, log); err != nil {
			return fmt.Errorf("--auth-token-file: %w", err)
		}
		verifier = tokens.Verify
		log.Info("bearer tokens loaded", "identities", tokens.Len())
	}
	people, err := loadPeople(f, tokens, log)
	if err != nil {
		return err
	}
	if err := ensureDir(f.Ledger); err != nil {
		return err
	}
	version := p.Version
	if version == "" {
		version = "1.0.0"
	}
	server := mcp.NewServer(&mcp.Implementation{Name: p.Name, Version: version}, nil)
	opts := changeset.Options{LedgerPath: f.Ledger, Logger: log, ScopeFunc: ScopeFromRequest, Principal: PrincipalFromRequest, Durability: f.Durability}
	// The dashboard listens before the Guard is built: with port 0 its
	// address is known only then, and it is the base of approval links.
	var dashLn net.Listener
	if f.Dashboard != "" {
		if dashLn, err = Listen(f.Dashboard, f.AllowRemote); err != nil {
			return fmt.Errorf("--dashboard: %w", err)
		}
		defer dashLn.Close()
	}
	dashAddr := ""
	if dashLn != nil {
		dashAddr = dashLn.Addr().String()
	}
	if err := approvalOptions(f, &opts, log, dashAddr); err != nil {
		return err
	}
	if err := checkpointOptions(f, &opts, log); err != nil {
		return err
	}
	if p.Options != nil {
		p.Options(&opts)
	}
	if f.Stateless && opts.Approval == changeset.UserApproval {
		log.Warn("user approval over stateless HTTP reaches only clients on protocol 2026-07-28, which answer inside the tool call; older clients cannot be asked")
	}
	guard, err := changeset.New(server, opts)
	if err != nil {
		return err
	}
	defer guard.Close()
	if err := p.Setup(server, guard, log); err != nil {
		return err
	}

	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stop()
	if f.Dashboard != "" {
		d, err := dashboard.New(guard, dashboard.Options{Logger: log, People: people})
		if err != nil {
			return err
		}
		login := dashboard.ServeListener(ctx, dashLn, d)
		if people != nil {
			fmt.Fprintf(os.Stderr, "%s: dashboard: %s?token=… (each person with their own token from --dashboard-people)\n", p.Name, login)
		} else {
			// Printed once, to stderr only: the URL holds the login token.
			fmt.Fprintf(os.Stderr, "%s: dashboard: %s\n", p.Name, login)
		}
	}
	if f.HTTP == "" {
		stdio := Stdio()
		stdio.Logger = log
		err := server.Run(ctx, stdio)
		if errors.Is(err, context.Canceled) {
			return nil
		}
		return err
	}
	ln, err := Listen(f.HTTP, f.AllowRemote)
	if err != nil {
		return fmt.Errorf("--http: %w", err)
	}
	// Tests and scripts wait for this line; the URL holds no secret.
	fmt.Fprintf(os.Stderr, "listening on http://%s%s\n", ln.Addr(), Path)
	return RunHTTP(ctx, ln, server, HTTPOptions{Verifier: verifier, Stateless: f.Stateless, AllowedHosts: f.AllowedHosts, Logger: log})
}
