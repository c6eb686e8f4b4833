// Command clientdemo shows changeset-go working end to end: a real MCP
// client starts the notes example server as a subprocess over stdio, in a
// temporary directory with its own ledger, and walks through what an agent
// does, one line per step:
//
//  1. with writes off (the server started without
//     MCP_CHANGESET_WRITE_MODE), preview a note and apply it: the apply is
//     refused and the token is not spent;
//  2. restart the server with writes on, same ledger and notes, and apply
//     the same change with the same token; replay the token (refused);
//     undo the change;
//  3. preview a note, let a person write the file before the apply (the
//     demo does it on disk): the apply is refused and nothing is written;
//  4. start a run, write three notes in it, let a person edit one of them,
//     show the run's undo dry run (the edited note is skipped) and undo
//     the run;
//  5. print what the operator's CLI, mcp-changeset list, shows for the
//     demo's ledger, and serve the dashboard for a few seconds (until
//     Enter when standard input is a terminal).
//
// Tokens are shortened in the narration ("confirm_Y1k…"); --verbose also
// prints every call's arguments and the JSON it returned, tokens in full.
// It exits with status 1 if any step does not behave as promised, so it
// doubles as a smoke test.
//
//	go run ./examples/clientdemo
package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"os"
	"os/signal"
	"syscall"
	"time"

	"github.com/modelcontextprotocol/go-sdk/mcp"
)

func main() {
	// Ctrl-C ends the demo cleanly: its servers stop and its directory is
	// removed.
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	code := runMain(ctx, os.Args[1:], os.Stdout, os.Stderr, os.Stdin, nil)
	stop()
	os.Exit(code)
}

// runMain parses args, runs the demo and returns the exit status: 0 when
// every step behaved as promised, 1 when one did not, 2 on a usage error
// (reported on stderr). The narration goes to stdout. When stdin is a
// terminal the dashboard stays up until Enter. tweak, when not nil,
// adjusts the demo before it runs (tests use it).
func runMain(ctx context.Context, args []string, stdout, stderr io.Writer, stdin *os.File, tweak func(*demo)) int {
	fs := flag.NewFlagSet("clientdemo", flag.ContinueOnError)
	fs.SetOutput(stderr)
	verbose := fs.Bool("verbose", false, "also print every call's arguments and the JSON it returned (tokens in full)")
	wait := fs.Duration("dashboard-wait", 5*time.Second,
		"how long to serve the dashboard at the end; with a terminal on standard input, until Enter instead; 0 ends at once")
	fs.Usage = func() {
		fmt.Fprintf(fs.Output(), "Usage: clientdemo [--verbose] [--dashboard-wait D]\n\n"+
			"Starts the notes example over stdio in a temporary directory and walks an\n"+
			"agent's preview → apply with writes off (refused, token kept) → writes on →\n"+
			"apply → replay (refused) → undo; an apply refused because a person edited\n"+
			"the note; a run with a person's edit in between, its undo dry run and its\n"+
			"undo. Then it prints what mcp-changeset list shows and serves the dashboard\n"+
			"for a moment. Exits 1 if a promise breaks.\n\nFlags:\n")
		fs.PrintDefaults()
	}
	if err := fs.Parse(args); err != nil {
		if errors.Is(err, flag.ErrHelp) {
			return 0
		}
		return 2
	}
	if fs.NArg() > 0 {
		fmt.Fprintf(stderr, "clientdemo: unexpected argument %q (see --help)\n", fs.Arg(0))
		return 2
	}
	if *wait < 0 {
		fmt.Fprintf(stderr, "clientdemo: --dashboard-wait must be 0 or more, got %v\n", *wait)
		return 2
	}
	d := &demo{out: stdout, verbose: *verbose, wait: *wait}
	if stdin != nil && isTerminal(stdin) {
		d.enter = stdin
	}
	if tweak != nil {
		tweak(d)
	}
	if err := d.run(ctx); err != nil {
		fmt.Fprintf(stdout, "✗ %v\n", err)
		if tail := d.serverLog(); tail != "" {
			fmt.Fprintf(stdout, "  the notes server's standard error:\n%s", indent(tail, "    "))
		}
		return 1
	}
	fmt.Fprintln(stdout, "✓ every step behaved as promised")
	return 0
}

// isTerminal reports whether f is a character device other than the null
// device: a terminal, for the standard library's purposes.
func isTerminal(f *os.File) bool {
	fi, err := f.Stat()
	if err != nil || fi.Mode()&os.ModeCharDevice == 0 {
		return false
	}
	null, err := os.Stat(os.DevNull)
	return err != nil || !os.SameFile(fi, null)
}

// demo drives the notes server and narrates.
type demo struct {
	out     io.Writer
	verbose bool
	wait    time.Duration // how long the dashboard stays up at the end
	enter   io.Reader     // when set, the dashboard stays up until a line is read from it

	// skipPersonEdit leaves out the person's edit between a preview and its
	// apply, so that the apply succeeds where the demo expects a refusal:
	// tests use it to check that a broken promise fails the demo.
	skipPersonEdit bool

	todoID, todoToken string // the change writesOff previews and single applies

	dir    string // the temporary directory
	root   string // the notes directory
	ledger string // the ledger file
	bins   binaries
	srv    *server
	cs     *mcp.ClientSession
}

func (d *demo) run(ctx context.Context) error {
	dir, err := os.MkdirTemp("", "changeset-clientdemo-")
	if err != nil {
		return err
	}
	defer os.RemoveAll(dir)
	d.dir = dir
	if err := d.setup(ctx); err != nil {
		return err
	}
	defer d.stop()
	steps := []func(context.Context) error{d.writesOff, d.single, d.personEdit, d.runUndo, d.listing, d.dashboard}
	for _, step := range steps {
		if err := step(ctx); err != nil {
			return err
		}
	}
	return nil
}
