package main

import (
	"errors"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"

	"github.com/mcp-changeset/changeset-go/examples/internal/exampletest"
)

// --help names the server's own flags; --db is required and must not be
// the ledger, and --settings must be a file of its own.
func TestFlags_HelpAndRequiredDB(t *testing.T) {
	bin := exampletest.Build(t, "inventory")
	out, err := exec.Command(bin, "--help").Output()
	if err != nil {
		t.Fatalf("--help: %v", err)
	}
	for _, want := range []string{"--db", "--settings", "--ledger", "preview_adjust_prices"} {
		if !strings.Contains(string(out), want) {
			t.Errorf("--help does not mention %s:\n%s", want, out)
		}
	}
	dir := t.TempDir()
	ledger := filepath.Join(dir, "ledger.db")
	for _, c := range []struct {
		args []string
		want string
	}{
		{[]string{"--ledger", ledger}, "--db is required"},
		{[]string{"--ledger", ledger, "--db", ledger}, "--db must be another file than the ledger"},
		{[]string{"--ledger", ledger, "--db", filepath.Join(dir, "shop.db"), "--settings", ledger}, "--settings must be another file"},
	} {
		cmd := exec.Command(bin, c.args...)
		var stderr strings.Builder
		cmd.Stderr = &stderr
		err := cmd.Run()
		var exit *exec.ExitError
		if !errors.As(err, &exit) || exit.ExitCode() != 2 || !strings.Contains(stderr.String(), c.want) {
			t.Errorf("inventory %v: %v, stderr %q; want exit status 2 and %q", c.args, err, stderr.String(), c.want)
		}
	}
}
