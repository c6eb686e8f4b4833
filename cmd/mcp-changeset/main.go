// Command mcp-changeset is the operator's tool for a changeset ledger: it
// lists and shows changes and runs, prints the history of who did what,
// closes changes that a dead process left
// in flight, expires stale previews, prunes old rows, checks the ledger's
// integrity, verifies the history's hash chain and signs checkpoints of it.
//
// Install it with
//
//	go install github.com/mcp-changeset/changeset-go/cmd/mcp-changeset@latest
//
// The ledger comes from --ledger (before or after the subcommand) or from
// the MCP_CHANGESET_LEDGER environment variable: a SQLite file path, or a
// postgres:// URL. The command never creates a ledger and never prints a
// token or a stored digest. Read-only commands open the ledger read-only.
// Changing commands (reconcile, prune, expire, approve, decline) only report what they would
// do unless given --yes.
//
// Exit status: 0 on success, 1 on any error (including a usage error, a
// damaged ledger, and problems or stale changes found by check), 2 when a
// changing command ran without --yes.
//
// See docs/cli.md for every subcommand and its JSON output.
package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"os"
	"os/signal"
	"strings"
	"syscall"
	"time"

	"github.com/mcp-changeset/changeset-go/ledger"
	_ "github.com/mcp-changeset/changeset-go/ledger/sqlite" // SQLite ledgers for file paths
)

// Exit statuses.
const (
	exitOK     = 0
	exitError  = 1
	exitDryRun = 2
)

// LedgerEnv is the environment variable that names the ledger when
// --ledger is not given.
const LedgerEnv = "MCP_CHANGESET_LEDGER"

func main() {
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	m := &Main{Stdout: os.Stdout, Stderr: os.Stderr, Getenv: os.Getenv, Now: time.Now}
	code := m.Run(ctx, os.Args[1:])
	stop()
	os.Exit(code)
}

// Main is the program: the subcommand dispatcher and what every subcommand
// shares.
type Main struct {
	Stdout io.Writer
	Stderr io.Writer
	// Getenv reads the environment (os.Getenv).
	Getenv func(string) string
	// Now reads the clock, for relative ages in human output; it is also
	// the clock of the ledgers the commands open (ledger.OpenOptions.Clock),
	// the "now" of expire, prune, reconcile and check.
	Now func() time.Time

	// ledger is the value of a --ledger flag given before the subcommand.
	ledger string
}

// command is what every subcommand implements.
type command interface {
	Run(ctx context.Context, args []string) error
	Usage() string
}

// command returns the subcommand called name, or nil.
func (m *Main) command(name string) command {
	switch name {
	case "list":
		return &ListCommand{main: m}
	case "show":
		return &ShowCommand{main: m}
	case "runs":
		return &RunsCommand{main: m}
	case "log":
		return &LogCommand{main: m}
	case "reconcile":
		return &ReconcileCommand{main: m}
	case "prune":
		return &PruneCommand{main: m}
	case "expire":
		return &ExpireCommand{main: m}
	case "check":
		return &CheckCommand{main: m}
	case "verify":
		return &VerifyCommand{main: m}
	case "checkpoint":
		return &CheckpointCommand{main: m}
	case "approvals":
		return &ApprovalsCommand{main: m}
	case "approve":
		return &DecideCommand{main: m, verdict: ledger.Approve}
	case "decline":
		return &DecideCommand{main: m, verdict: ledger.Decline}
	case "version":
		return &VersionCommand{main: m}
	case "completion":
		return &CompletionCommand{main: m}
	}
	return nil
}

// Run runs the command line args (without the program name) and returns
// the exit status.
func (m *Main) Run(ctx context.Context, args []string) int {
	args, err := m.globalFlags(args)
	if errors.Is(err, flag.ErrHelp) {
		fmt.Fprint(m.Stdout, m.Usage())
		return exitOK
	}
	if err != nil {
		return m.usageError("", err, m.Usage())
	}
	if len(args) == 0 {
		return m.usageError("", errors.New("no command given"), m.Usage())
	}
	name, args := args[0], args[1:]
	if name == "help" {
		return m.help(args)
	}
	cmd := m.command(name)
	if cmd == nil {
		return m.usageError("", fmt.Errorf("unknown command %q", name), m.Usage())
	}
	err = cmd.Run(ctx, args)
	var ue *usageError
	switch {
	case err == nil:
		return exitOK
	case errors.Is(err, flag.ErrHelp):
		fmt.Fprint(m.Stdout, cmd.Usage())
		return exitOK
	case errors.As(err, &ue):
		return m.usageError(name, ue.err, cmd.Usage())
	case errors.Is(err, errDryRun):
		return exitDryRun
	case errors.Is(err, errReported):
		return exitError
	}
	fmt.Fprintf(m.Stderr, "mcp-changeset %s: %v\n", name, err)
	return exitError
}

// globalFlags takes the flags before the subcommand: --ledger and --help.
func (m *Main) globalFlags(args []string) ([]string, error) {
	for len(args) > 0 && strings.HasPrefix(args[0], "-") && args[0] != "-" {
		name, value, hasValue := strings.Cut(strings.TrimLeft(args[0], "-"), "=")
		switch name {
		case "h", "help":
			return nil, flag.ErrHelp
		case "ledger":
			if !hasValue {
				if len(args) < 2 {
					return nil, errors.New("flag needs an argument: --ledger")
				}
				value, args = args[1], args[1:]
			}
			m.ledger = value
		default:
			if args[0] == "--" {
				return args[1:], nil
			}
			return nil, fmt.Errorf("unknown flag %s before the command (command flags go after it)", args[0])
		}
		args = args[1:]
	}
	return args, nil
}

// help prints the usage of the program or of one subcommand.
func (m *Main) help(args []string) int {
	if len(args) == 0 {
		fmt.Fprint(m.Stdout, m.Usage())
		return exitOK
	}
	cmd := m.command(args[0])
	if cmd == nil {
		return m.usageError("", fmt.Errorf("unknown command %q", args[0]), m.Usage())
	}
	fmt.Fprint(m.Stdout, cmd.Usage())
	return exitOK
}

// usageError reports a mistake on the command line and the usage of the
// command it concerns, on stderr, and returns the exit status for it.
func (m *Main) usageError(name string, err error, usage string) int {
	prefix := "mcp-changeset"
	if name != "" {
		prefix += " " + name
	}
	fmt.Fprintf(m.Stderr, "%s: %v\n\n%s", prefix, err, usage)
	return exitError
}

// Usage returns the program's usage text.
func (m *Main) Usage() string {
	return `mcp-changeset inspects and maintains a changeset ledger.

Usage:

	mcp-changeset [--ledger LEDGER] <command> [arguments]

Commands:

	list       list changes, newest first
	show       show one change: its diff, payload, result and history
	runs       list runs, newest first
	log        print the history of transitions: who did what, when
	reconcile  close a change left applying or undoing by a dead process
	prune      delete old finished changes and empty runs
	expire     mark pending changes past their expiry as expired
	check      check the ledger's integrity and invariants, and find
	           changes and runs left in flight
	verify     verify the history's hash chain, the rows against it, and
	           signed checkpoints
	checkpoint sign a checkpoint of the history's newest entry
	approvals  list the approvals waiting for people, newest first
	approve    approve an agent's apply, undo or run undo, as a person
	decline    decline an agent's apply, undo or run undo, as a person
	version    print the version of this program
	completion print a completion script for bash, zsh or fish
	help       show the usage of a command

The ledger is a SQLite file path or a postgres:// URL, from --ledger (before
or after the command) or from $` + LedgerEnv + `. It is never created.
reconcile, prune, expire, approve and decline only print what they would
do unless given --yes. No command prints a token or a stored digest.

Exit status: 0 on success; 1 on any error, including a usage error, a
damaged ledger, and problems or stale changes found by check; 2 when a
changing command ran without --yes.

Run "mcp-changeset help <command>" or "mcp-changeset <command> --help" for
the options and examples of a command.
`
}

// errDryRun reports that a changing command ran without --yes and only
// printed what it would do.
var errDryRun = errors.New("dry run: nothing was changed")

// errReported is returned by a command that printed its own explanation of
// a failure; Main exits with status 1 without adding to it.
var errReported = errors.New("failure already reported")

// usageError is a mistake on the command line.
type usageError struct{ err error }

func (e *usageError) Error() string { return e.err.Error() }

// usagef returns a usageError with a formatted message.
func usagef(format string, args ...any) error {
	return &usageError{fmt.Errorf(format, args...)}
}

// open opens the ledger named by a subcommand's --ledger flag (or the
// environment), for writing only when write is set.
func (m *Main) open(ctx context.Context, flagValue string, write bool) (*ledger.Ledger, error) {
	target, err := m.ledgerTarget(flagValue)
	if err != nil {
		return nil, err
	}
	return openLedger(ctx, target, write, m.Now)
}

// openLedger opens the ledger target names without ever creating it,
// read-only unless write is set. clock is the ledger's clock (nil:
// time.Now): the "now" of expire, prune and reconcile, the same clock the
// commands show ages by.
func openLedger(ctx context.Context, target string, write bool, clock func() time.Time) (*ledger.Ledger, error) {
	return ledger.Open(ctx, target, ledger.OpenOptions{Create: false, ReadOnly: !write, Clock: clock})
}
