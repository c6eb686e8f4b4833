package main

import (
	"context"
	"encoding/json"
	"errors"
	"path/filepath"
	"slices"
	"sort"
	"strconv"
	"strings"
	"testing"

	changeset "github.com/mcp-changeset/changeset-go"
	"github.com/mcp-changeset/changeset-go/ledger/sqlite"
	"github.com/modelcontextprotocol/go-sdk/mcp"
)

// changeRoles are the roles of the fixture's changes (its other IDs are
// runs).
func (f *fixture) changeRoles() []string {
	var roles []string
	for role, id := range f.ids {
		if strings.HasPrefix(id, "chg_") {
			roles = append(roles, role)
		}
	}
	sort.Strings(roles)
	return roles
}

// keys returns the sorted keys of a JSON object.
func keys(m map[string]any) []string {
	var out []string
	for k := range m {
		out = append(out, k)
	}
	sort.Strings(out)
	return out
}

// The JSON field names documented in docs/cli.md.
var (
	changeFields = []string{"action", "applied_at", "applied_by", "change_id", "created_at", "error_type", "expires_at", "failure", "nothing_written",
		"previewed_by", "resource", "run_id", "status", "summary", "transactional", "undo_expires_at", "undoable", "undone_at", "undone_by", "updated_at"}
	detailFields = append(slices.Clone(changeFields), "after", "before", "depends_on", "diff", "error", "history", "note", "payload", "redact_fields", "redacted_at", "resources", "result", "undo_found", "warnings")
	runFields    = []string{"change_count", "changes_by_status", "created_at", "label", "run_id", "status", "undone_by", "updated_at"}
)

func init() { sort.Strings(detailFields) }

// decode parses one JSON document from a command's stdout.
func decode(t *testing.T, r result) map[string]any {
	t.Helper()
	var doc map[string]any
	dec := json.NewDecoder(strings.NewReader(r.stdout))
	if err := dec.Decode(&doc); err != nil {
		t.Fatalf("stdout is not JSON: %v\n%s", err, r)
	}
	if dec.More() {
		t.Fatalf("stdout holds more than one JSON document:\n%s", r)
	}
	return doc
}

func TestList_TableAndJSONShowEveryChangeNewestFirst(t *testing.T) {
	t.Parallel()
	f := populate(t)
	before := readFile(t, f.path)

	r := runL(t, f.path, "list")
	want(t, r, exitOK, "ID", "STATUS", "ACTION", "RUN", "UPDATED", "SUMMARY", "(10m ago)", "(40d ago)", f.ids["run"])
	for _, role := range f.changeRoles() {
		if !strings.Contains(r.stdout, f.ids[role]) {
			t.Errorf("list lacks %s (%s)", role, f.ids[role])
		}
	}
	// Newest first: every recent change comes before every old one.
	if strings.Index(r.stdout, f.ids["pending"]) > strings.Index(r.stdout, f.ids["old_undone"]) {
		t.Errorf("list is not newest first:\n%s", r.stdout)
	}

	r = runL(t, f.path, "list", "--json")
	want(t, r, exitOK)
	changes := decode(t, r)["changes"].([]any)
	if len(changes) != len(f.changeRoles()) {
		t.Fatalf("list --json has %d changes, want %d", len(changes), len(f.changeRoles()))
	}
	for _, c := range changes {
		if got := keys(c.(map[string]any)); !slices.Equal(got, changeFields) {
			t.Fatalf("list --json fields = %v, want %v", got, changeFields)
		}
	}
	sameBytes(t, f.path, before, "list")
}

func TestList_FiltersByStatusAndRun(t *testing.T) {
	t.Parallel()
	f := populate(t)
	r := runL(t, f.path, "list", "--status", "applying,undoing", "--json")
	want(t, r, exitOK)
	var got []string
	for _, c := range decode(t, r)["changes"].([]any) {
		got = append(got, c.(map[string]any)["change_id"].(string))
	}
	sort.Strings(got)
	wantIDs := []string{f.ids["applying"], f.ids["undoing"], f.ids["old_applying"], f.ids["old_undoing"]}
	sort.Strings(wantIDs)
	if !slices.Equal(got, wantIDs) {
		t.Errorf("--status applying,undoing = %v, want %v", got, wantIDs)
	}

	r = runL(t, f.path, "list", "--run", f.ids["run"])
	want(t, r, exitOK, f.ids["run_applied"], f.ids["run_pending"])
	if strings.Contains(r.stdout, f.ids["applied"]) {
		t.Errorf("--run lists a change of no run:\n%s", r.stdout)
	}
	r = runL(t, f.path, "list", "--status", "expired", "--run", f.ids["run"])
	want(t, r, exitOK, "no changes")

	wantErr(t, runL(t, f.path, "list", "--run", "run_00000000000000000000"), "run run_00000000000000000000 not found", "mcp-changeset runs")
	wantErr(t, runL(t, f.path, "list", "--status", "done"), `unknown status "done"`, "Usage: mcp-changeset list")
}

func TestShow_PrintsWhatOperatorsMayRead(t *testing.T) {
	t.Parallel()
	f := populate(t)
	before := readFile(t, f.path)

	r := runL(t, f.path, "show", f.ids["apply_failed"])
	want(t, r, exitOK, "status         apply_failed", "fs.PathError", secretErrorText,
		"diff:", `theme: "" → "x"`, "payload:", `"value": "x"`, "warnings:", "test warning")
	r = runL(t, f.path, "show", f.ids["undone"])
	want(t, r, exitOK, "undone         ", "by agent", "result:", `"previous": ""`, "before:", "after:", `"12"`)

	r = runL(t, f.path, "show", "--json", f.ids["undo_failed"])
	want(t, r, exitOK)
	c := decode(t, r)["change"].(map[string]any)
	if got := keys(c); !slices.Equal(got, detailFields) {
		t.Fatalf("show --json fields = %v, want %v", got, detailFields)
	}
	if c["status"] != "undo_failed" || c["error_type"] != "changeset.StateChangedError" || c["after"] != "red" {
		t.Errorf("show --json = %v", c)
	}
	if p := c["payload"].(map[string]any); p["key"] != "color" || p["value"] != "red" {
		t.Errorf("payload = %v", p)
	}
	sameBytes(t, f.path, before, "show")

	wantErr(t, runL(t, f.path, "show", "chg_00000000000000000000"), "change chg_00000000000000000000 not found", "mcp-changeset list")
	wantErr(t, runL(t, f.path, "show"), "exactly one change ID")
}

func TestShow_NeutralisesControlCharacters(t *testing.T) {
	t.Parallel()
	f := populate(t)
	for _, args := range [][]string{{"show", f.ids["nasty"]}, {"list"}} {
		r := runL(t, f.path, args...)
		want(t, r, exitOK, `\u001b[31mred`, `\u202eevil`)
		if strings.ContainsAny(r.stdout, "\x1b\u202e\u202c") {
			t.Errorf("%s printed a raw control character:\n%q", args[0], r.stdout)
		}
		for _, line := range strings.Split(r.stdout, "\n") {
			if strings.HasPrefix(line, "next line") {
				t.Errorf("%s let a value start a line of its own:\n%s", args[0], r.stdout)
			}
		}
	}
}

func TestRuns_TableAndJSON(t *testing.T) {
	t.Parallel()
	f := populate(t)
	before := readFile(t, f.path)
	r := runL(t, f.path, "runs")
	want(t, r, exitOK, "ID", "STATUS", "CHANGES", "LABEL", f.ids["run"], "2 (1 pending, 1 applied)", "tidy the settings",
		f.ids["undone_run"], "undone  1 (1 undone)", f.ids["old_run"], "an old empty run")

	r = runL(t, f.path, "runs", "--json")
	want(t, r, exitOK)
	runs := decode(t, r)["runs"].([]any)
	if len(runs) != 3 {
		t.Fatalf("runs --json has %d runs, want 3", len(runs))
	}
	byID := map[string]map[string]any{}
	for _, r := range runs {
		run := r.(map[string]any)
		if got := keys(run); !slices.Equal(got, runFields) {
			t.Fatalf("runs --json fields = %v, want %v", got, runFields)
		}
		byID[run["run_id"].(string)] = run
	}
	if r := byID[f.ids["run"]]; r["change_count"] != 2.0 || r["status"] != "open" {
		t.Errorf("run = %v", r)
	}
	if r := byID[f.ids["undone_run"]]; r["status"] != "undone" || r["undone_by"] != "person:alice" ||
		r["changes_by_status"].(map[string]any)["undone"] != 1.0 {
		t.Errorf("undone run = %v", r)
	}
	sameBytes(t, f.path, before, "runs")
}

func TestCheck_CleanLedgerIsOK(t *testing.T) {
	t.Parallel()
	f := populate(t)
	before := readFile(t, f.path)
	r := runL(t, f.path, "check", "--stale-after", "1000d")
	want(t, r, exitOK)
	if r.stdout != "ok\n" {
		t.Errorf("check printed %q, want ok", r.stdout)
	}
	sameBytes(t, f.path, before, "check")
}

func TestLedger_FromFlagBeforeOrAfterCommandOrEnvironment(t *testing.T) {
	t.Parallel()
	f := populate(t)
	id := f.ids["applied"]
	for name, r := range map[string]result{
		"flag after":     run(t, nil, "show", id, "--ledger", f.path),
		"flag between":   run(t, nil, "show", "--ledger="+f.path, id),
		"flag before":    run(t, nil, "--ledger", f.path, "show", id),
		"flag before =":  run(t, nil, "--ledger="+f.path, "show", id),
		"environment":    run(t, []string{LedgerEnv + "=" + f.path}, "show", id),
		"flag over env":  run(t, []string{LedgerEnv + "=/nonexistent/ledger.db"}, "show", id, "--ledger", f.path),
		"after over pre": run(t, nil, "--ledger", "/nonexistent/ledger.db", "show", id, "--ledger", f.path),
	} {
		if r.code != exitOK || !strings.Contains(r.stdout, id) {
			t.Errorf("%s: %s", name, r)
		}
	}
	wantErr(t, run(t, nil, "list"), "no ledger given", LedgerEnv)
}

func TestHelp_EveryCommandHasUsageWithExamples(t *testing.T) {
	t.Parallel()
	for _, args := range [][]string{{"--help"}, {"-h"}, {"help"}} {
		r := run(t, nil, args...)
		want(t, r, exitOK, "Commands:", "list", "show", "runs", "reconcile", "prune", "expire", "check", "version", "Exit status")
	}
	for _, name := range []string{"list", "show", "runs", "reconcile", "prune", "expire", "check", "version"} {
		for _, args := range [][]string{{name, "--help"}, {name, "-h"}, {"help", name}} {
			r := run(t, nil, args...)
			want(t, r, exitOK, "Usage: mcp-changeset "+name)
			if !strings.Contains(r.stdout, "Example") {
				t.Errorf("%v has no examples:\n%s", args, r.stdout)
			}
			if r.stderr != "" {
				t.Errorf("%v wrote to stderr: %s", args, r.stderr)
			}
		}
	}
}

func TestVersion(t *testing.T) {
	t.Parallel()
	want(t, run(t, nil, "version"), exitOK, "mcp-changeset ", "SQLite ledger schema "+strconv.Itoa(sqlite.SchemaVersion))
}

func TestShow_MarksRedactedFieldsAndNeverPrintsThemOrTheirHash(t *testing.T) {
	t.Parallel()
	path := filepath.Join(t.TempDir(), "ledger.db")
	g, err := changeset.New(nil, changeset.Options{LedgerPath: path, WriteMode: changeset.WriteGuarded})
	if err != nil {
		t.Fatal(err)
	}
	type cred struct {
		User   string `json:"user"`
		Secret string `json:"secret" changeset:"redact"`
	}
	changeset.Register(g, &mcp.Tool{Name: "set_secret"}, changeset.Operation[cred, cred, struct{}]{
		Preview: func(ctx context.Context, in cred) (*changeset.Proposal[cred], error) {
			return &changeset.Proposal[cred]{Payload: in, Diff: []changeset.DiffEntry{{Field: "secret", After: in.Secret}}}, nil
		},
		Apply: func(ctx context.Context, p cred) (struct{}, error) {
			return struct{}{}, errors.New("refused by the backend")
		},
	})
	ctx := context.Background()
	p, err := g.Preview(ctx, "set_secret", cred{User: "ana", Secret: "correct horse battery staple"})
	if err != nil {
		t.Fatal(err)
	}
	addSecret("confirmation token", p.ConfirmationToken)
	addSecret("secret value", "correct horse battery staple")
	g.Apply(ctx, p.ChangeID, p.ConfirmationToken) // fails: the change ends apply_failed, and is redacted
	g.Close()

	r := runL(t, path, "show", p.ChangeID)
	want(t, r, exitOK, "redacted", "secret: [redacted] since", `"secret": "[redacted]"`, `"user": "ana"`)
	j := runL(t, path, "show", p.ChangeID, "--json")
	want(t, j, exitOK, `"redact_fields": [`, `"secret": "[redacted]"`)
	for _, out := range []string{r.stdout, j.stdout} {
		if strings.Contains(out, "redacted:hmac-sha256:") {
			t.Fatalf("a redacted value's hash was printed:\n%s", out)
		}
	}
}

// TestList_FiltersByActionAndSince: --action keeps one operation's
// changes; --since keeps what was updated recently (the fixture's old rows
// are 40 days old, its recent ones minutes); both bound the listing with
// the others, and a bad duration is a usage error.
func TestList_FiltersByActionAndSince(t *testing.T) {
	t.Parallel()
	f := populate(t)
	ids := func(args ...string) []string {
		t.Helper()
		r := runL(t, f.path, append([]string{"list", "--json", "--limit", "0"}, args...)...)
		want(t, r, exitOK)
		var got []string
		for _, c := range decode(t, r)["changes"].([]any) {
			got = append(got, c.(map[string]any)["change_id"].(string))
		}
		sort.Strings(got)
		return got
	}
	sorted := func(roles ...string) []string {
		var out []string
		for _, r := range roles {
			out = append(out, f.ids[r])
		}
		sort.Strings(out)
		return out
	}
	if got, want := ids("--action", "noundo"), sorted("old_applied_noundo", "applied_noundo"); !slices.Equal(got, want) {
		t.Errorf("--action noundo = %v, want %v", got, want)
	}
	if got, want := ids("--action", "noundo", "--since", "1d"), sorted("applied_noundo"); !slices.Equal(got, want) {
		t.Errorf("--action noundo --since 1d = %v, want %v", got, want)
	}
	recent := ids("--since", "24h")
	for _, role := range []string{"old_undone", "old_pending", "old_expired"} {
		if slices.Contains(recent, f.ids[role]) {
			t.Errorf("--since 24h lists %s, last updated 40 days ago", role)
		}
	}
	for _, role := range []string{"pending", "applied", "undone", "stale"} {
		if !slices.Contains(recent, f.ids[role]) {
			t.Errorf("--since 24h leaves out %s", role)
		}
	}
	if all := ids("--since", "60d"); len(all) != len(ids()) {
		t.Errorf("--since 60d lists %d changes, want all %d", len(all), len(ids()))
	}
	if got := ids("--action", "nothing_like_it"); len(got) != 0 {
		t.Errorf("an unknown action lists %v", got)
	}
	wantErr(t, runL(t, f.path, "list", "--since", "yesterday"), "invalid value", "Usage: mcp-changeset list")
	wantErr(t, runL(t, f.path, "list", "--since", "-1h"), "negative", "Usage: mcp-changeset list")

	r := runL(t, f.path, "runs", "--since", "24h", "--json")
	want(t, r, exitOK)
	var runs []string
	for _, run := range decode(t, r)["runs"].([]any) {
		runs = append(runs, run.(map[string]any)["run_id"].(string))
	}
	if slices.Contains(runs, f.ids["old_run"]) || !slices.Contains(runs, f.ids["run"]) {
		t.Errorf("runs --since 24h = %v (old run %s, recent run %s)", runs, f.ids["old_run"], f.ids["run"])
	}
}

// TestShow_DeadlinesOnlyWhileTheyMatter: "confirm by" is shown for a
// pending change only, "undo until" for an applied one only.
func TestShow_DeadlinesOnlyWhileTheyMatter(t *testing.T) {
	t.Parallel()
	f := populate(t)
	for role, rows := range map[string][2]bool{ // confirm by, undo until
		"pending": {true, false}, "applied": {false, true}, "undone": {false, false},
		"apply_failed": {false, false}, "old_expired": {false, false},
	} {
		r := runL(t, f.path, "show", f.ids[role])
		want(t, r, exitOK)
		if got := strings.Contains(r.stdout, "confirm by"); got != rows[0] {
			t.Errorf("show %s: confirm by shown = %v, want %v\n%s", role, got, rows[0], r.stdout)
		}
		if got := strings.Contains(r.stdout, "undo until"); got != rows[1] {
			t.Errorf("show %s: undo until shown = %v, want %v\n%s", role, got, rows[1], r.stdout)
		}
	}
	if r := runL(t, f.path, "show", f.ids["old_expired"]); !strings.Contains(r.stdout, "expired    ") {
		t.Errorf("show of an expired change does not say when it expired:\n%s", r.stdout)
	}
}
