package main

import (
	"context"
	"regexp"
	"strings"
	"testing"

	"github.com/mcp-changeset/changeset-go/ledger"
	"github.com/mcp-changeset/changeset-go/ledger/driver"
)

func TestExitCodes(t *testing.T) {
	t.Parallel()
	f := populate(t)
	const unknown = "chg_00000000000000000000"
	// In order: the changing commands' dry runs come before their --yes.
	for _, tc := range []struct {
		args []string
		code int
	}{
		{[]string{"list"}, exitOK},
		{[]string{"list", "--json", "--status", "pending"}, exitOK},
		{[]string{"list", "--status", "nope"}, exitError},
		{[]string{"list", "--run", "run_00000000000000000000"}, exitError},
		{[]string{"list", "--bogus"}, exitError},
		{[]string{"show", f.ids["applied"]}, exitOK},
		{[]string{"show", f.ids["applied"], "--json"}, exitOK},
		{[]string{"show", unknown}, exitError},
		{[]string{"show"}, exitError},
		{[]string{"runs"}, exitOK},
		{[]string{"runs", "--json"}, exitOK},
		{[]string{"runs", "extra"}, exitError},
		{[]string{"check", "--stale-after", "1000d"}, exitOK},
		{[]string{"check"}, exitError}, // the fixture's changes left in flight
		{[]string{"check", "--stale-after", "1000d", "--json"}, exitOK},
		{[]string{"check", "--stale-after", "soon"}, exitError},
		{[]string{"check", "extra"}, exitError},
		{[]string{"reconcile", f.ids["applying"], "--note", "n"}, exitDryRun},
		{[]string{"reconcile", f.ids["applying"], "--note", "n", "--yes"}, exitOK},
		{[]string{"reconcile", f.ids["applying"], "--note", "n"}, exitError}, // now apply_failed
		{[]string{"reconcile", f.ids["applied"], "--note", "n", "--yes"}, exitError},
		{[]string{"reconcile", unknown, "--note", "n"}, exitError},
		{[]string{"reconcile", f.ids["undoing"]}, exitError},
		{[]string{"expire"}, exitDryRun},
		{[]string{"expire", "--yes"}, exitOK},
		{[]string{"expire"}, exitDryRun}, // nothing left to do
		{[]string{"expire", "extra"}, exitError},
		{[]string{"prune", "--older-than-days", "30"}, exitDryRun},
		{[]string{"prune", "--older-than-days", "30", "--yes"}, exitOK},
		{[]string{"prune", "--older-than-days", "30"}, exitDryRun}, // nothing left to do
		{[]string{"prune"}, exitError},
		{[]string{"verify"}, exitOK},
		{[]string{"verify", "--json"}, exitOK},
		{[]string{"verify", "extra"}, exitError},
		{[]string{"checkpoint"}, exitError}, // no --key
		{[]string{"approvals"}, exitOK},
		{[]string{"approvals", "--json"}, exitOK},
		{[]string{"approvals", "extra"}, exitError},
		{[]string{"approve", "apr_00000000000000000000", "--as", "alice"}, exitError},
		{[]string{"decline", "apr_00000000000000000000", "--as", "alice", "--yes"}, exitError},
		{[]string{"approve"}, exitError},
		{[]string{"version"}, exitOK},
		{[]string{"help"}, exitOK},
		{[]string{"help", "prune"}, exitOK},
		{[]string{"help", "nope"}, exitError},
		{[]string{"--help"}, exitOK},
		{[]string{"prune", "--help"}, exitOK},
		{[]string{}, exitError},
		{[]string{"nope"}, exitError},
	} {
		r := run(t, []string{LedgerEnv + "=" + f.path}, tc.args...)
		if r.code != tc.code {
			t.Errorf("mcp-changeset %s: exit %d, want %d\n%s", strings.Join(tc.args, " "), r.code, tc.code, r)
		}
		if r.code == exitError && r.stderr == "" {
			t.Errorf("mcp-changeset %s failed without a message", strings.Join(tc.args, " "))
		}
	}
}

// digestLike matches a SHA-256 digest in hex, the form of every digest
// the ledger stores.
var digestLike = regexp.MustCompile(`[0-9a-fA-F]{64}`)

func TestNoOutputHoldsATokenOrDigest(t *testing.T) {
	t.Parallel()
	f := populate(t)
	secrets.Lock()
	kinds := map[string]int{}
	for v := range secrets.m {
		switch {
		case strings.HasPrefix(v, "confirm_"):
			kinds["confirmation token"]++
		case strings.HasPrefix(v, "undo_"):
			kinds["undo token"]++
		case digestLike.MatchString(v):
			kinds["digest"]++
		}
	}
	secrets.Unlock()
	if kinds["confirmation token"] == 0 || kinds["undo token"] == 0 || kinds["digest"] == 0 {
		t.Fatalf("the fixture minted too little to search for: %v", kinds)
	}

	var outputs []string
	do := func(args ...string) {
		for _, format := range [][]string{nil, {"--json"}} {
			if format != nil && !(args[0] == "list" || args[0] == "show" || args[0] == "runs" || args[0] == "verify") {
				continue
			}
			r := runL(t, f.path, append(args, format...)...) // run searches for every secret
			outputs = append(outputs, r.stdout+r.stderr)
		}
	}
	pass := func() {
		do("list")
		for _, s := range ledger.Statuses {
			do("list", "--status", string(s))
		}
		do("runs")
		do("check")
		do("verify")
		do("expire")
		do("prune", "--older-than-days", "0", "--include-applied")
		for _, id := range f.ids {
			do("show", id)
			do("list", "--run", id)
			do("reconcile", id, "--note", "checked")
		}
	}
	pass()
	do("reconcile", f.ids["applying"], "--note", "checked", "--yes")
	do("reconcile", f.ids["undoing"], "--note", "checked", "--yes")
	do("expire", "--yes")
	pass()
	do("prune", "--older-than-days", "0", "--include-applied", "--yes")
	pass()
	// The hashes of the history's chain are printed on purpose (log,
	// show, verify): they are no secret, and nothing else may look like one.
	chain := chainHashes(t, f.path)
	for _, out := range outputs {
		for _, m := range digestLike.FindAllString(out, -1) {
			if !chain[m] {
				t.Fatalf("an output holds a digest-like string %s:\n%s", m, out)
			}
		}
	}
}

// chainHashes returns the hash of every link of the history's chain of the
// ledger at path: its entries and the links of pruned ones.
func chainHashes(t *testing.T, path string) map[string]bool {
	t.Helper()
	ctx := context.Background()
	l, err := ledger.Open(ctx, path, ledger.OpenOptions{ReadOnly: true})
	if err != nil {
		t.Fatal(err)
	}
	defer l.Close()
	out := map[string]bool{}
	entries, err := l.History(ctx, ledger.HistoryFilter{})
	if err != nil {
		t.Fatal(err)
	}
	for _, e := range entries {
		out[e.Hash.String()] = true
	}
	links, err := driver.BackendOf(l).ListPrunedLinks(ctx, l.DB(), 0, 1<<30)
	if err != nil {
		t.Fatal(err)
	}
	for _, k := range links {
		out[k.Hash.String()] = true
	}
	return out
}
