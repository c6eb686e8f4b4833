package main

import (
	"errors"
	"flag"
	"io"
	"strings"

	"github.com/mcp-changeset/changeset-go/ledger"
)

// newFlagSet returns the flag set of subcommand name with the --ledger flag
// every ledger command shares, bound to ledgerValue. Errors and usage are
// not printed by the flag package: Main prints them, with the command's
// Usage.
func newFlagSet(name string, ledgerValue *string) *flag.FlagSet {
	fs := flag.NewFlagSet("mcp-changeset "+name, flag.ContinueOnError)
	fs.SetOutput(io.Discard)
	fs.Usage = func() {}
	if ledgerValue != nil {
		fs.StringVar(ledgerValue, "ledger", "", "the ledger: a SQLite file path or a postgres:// URL")
	}
	return fs
}

// parseArgs parses args with fs and returns the positional arguments. Flags
// may come before or after positional arguments ("show ID --json"); every
// argument after "--" is positional. A parse error is a usageError;
// flag.ErrHelp is returned as it is.
func parseArgs(fs *flag.FlagSet, args []string) ([]string, error) {
	var positional []string
	for {
		if err := fs.Parse(args); err != nil {
			if errors.Is(err, flag.ErrHelp) {
				return nil, err
			}
			return nil, &usageError{err}
		}
		rest := fs.Args()
		if len(rest) == 0 {
			return positional, nil
		}
		if n := len(args) - len(rest); n > 0 && args[n-1] == "--" {
			return append(positional, rest...), nil
		}
		positional = append(positional, rest[0])
		args = rest[1:]
	}
}

// ledgerTarget returns the ledger to open: the subcommand's --ledger flag,
// else the one given before the subcommand, else $MCP_CHANGESET_LEDGER.
func (m *Main) ledgerTarget(flagValue string) (string, error) {
	for _, v := range []string{flagValue, m.ledger, m.Getenv(LedgerEnv)} {
		if v != "" {
			return v, nil
		}
	}
	return "", usagef("no ledger given: pass --ledger PATH (or a postgres:// URL) or set %s", LedgerEnv)
}

// parseStatuses parses a comma-separated list of change statuses.
func parseStatuses(list string) ([]ledger.Status, error) {
	if list == "" {
		return nil, nil
	}
	var out []ledger.Status
	for _, s := range strings.Split(list, ",") {
		st := ledger.Status(strings.TrimSpace(s))
		if !st.Valid() {
			names := make([]string, len(ledger.Statuses))
			for i, v := range ledger.Statuses {
				names[i] = string(v)
			}
			return nil, usagef("unknown status %q (want one of %s)", st, strings.Join(names, ", "))
		}
		out = append(out, st)
	}
	return out, nil
}

// noArgs refuses positional arguments for a command that takes none.
func noArgs(args []string) error {
	if len(args) > 0 {
		return usagef("unexpected argument %q", args[0])
	}
	return nil
}
