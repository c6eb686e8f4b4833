package main

import (
	"context"
	"encoding/json"
	"path/filepath"
	"reflect"
	"regexp"
	"strings"
	"testing"
	"time"

	"github.com/mcp-changeset/changeset-go/ledger"
)

// historyFields are the JSON field names of a log line (docs/cli.md).
var historyFields = []string{"approval_id", "at", "by", "change_id", "from", "hash", "note", "removed", "run_id", "seq", "to"}

// logLines parses log --json output: one JSON object per line, each with
// exactly historyFields.
func logLines(t *testing.T, r result) []historyView {
	t.Helper()
	if r.code != exitOK {
		t.Fatalf("log failed: %s", r)
	}
	var out []historyView
	for _, line := range strings.Split(strings.TrimSuffix(r.stdout, "\n"), "\n") {
		if line == "" {
			continue
		}
		var m map[string]any
		if err := json.Unmarshal([]byte(line), &m); err != nil {
			t.Fatalf("a log line is not one JSON object: %v\n%q", err, line)
		}
		if got := keys(m); !reflect.DeepEqual(got, historyFields) {
			t.Fatalf("log line fields = %v, want %v", got, historyFields)
		}
		var v historyView
		var at string
		json.Unmarshal([]byte(line), &struct {
			*historyView
			At *string `json:"at"`
		}{&v, &at})
		ts, err := time.Parse(time.RFC3339Nano, at)
		if err != nil {
			t.Fatalf("at %q: %v", at, err)
		}
		v.At = jsonTime(ts)
		out = append(out, v)
	}
	return out
}

// moves renders entries as "from>to by" strings, for comparison.
func moves(entries []historyView) []string {
	var out []string
	for _, e := range entries {
		out = append(out, e.From+">"+e.To+" "+e.By)
	}
	return out
}

func TestLog_AChangesWholeLifeInOrder(t *testing.T) {
	f := populate(t)
	id := f.ids["undone"]
	entries := logLines(t, runL(t, f.path, "log", "--change", id, "--json"))
	wantMoves := []string{">pending agent", "pending>applying agent", "applying>applied agent", "applied>undoing agent", "undoing>undone agent"}
	if got := moves(entries); !reflect.DeepEqual(got, wantMoves) {
		t.Fatalf("log --change %s = %v, want %v", id, got, wantMoves)
	}
	for i, e := range entries {
		if e.ChangeID != id || e.RunID != "" || (i > 0 && (e.Seq <= entries[i-1].Seq || time.Time(e.At).Before(time.Time(entries[i-1].At)))) {
			t.Errorf("entry %d: %+v", i, e)
		}
	}
	// The human form names the same moves; show prints them too.
	want(t, runL(t, f.path, "log", "--change", id), exitOK, "SEQ", id, "undoing", "undone", "agent")
	show := decode(t, runL(t, f.path, "show", id, "--json"))
	hist, _ := show["change"].(map[string]any)["history"].([]any)
	if len(hist) != 5 || hist[4].(map[string]any)["to"] != "undone" {
		t.Errorf("show --json history = %v", hist)
	}
	want(t, runL(t, f.path, "show", id), exitOK, "previewed by", "history:", "applying", "undoing")
	// A failure's entry says its kind.
	failed := logLines(t, runL(t, f.path, "log", "--change", f.ids["apply_failed"], "--json"))
	if n := len(failed); n == 0 || failed[n-1].To != "apply_failed" || failed[n-1].Note != "error" {
		t.Errorf("the failed change's history: %+v", failed)
	}
}

func TestLog_ARunsHistoryHoldsItsChanges(t *testing.T) {
	f := populate(t)
	run, change := f.ids["undone_run"], f.ids["run_undone"]
	entries := logLines(t, runL(t, f.path, "log", "--run", run, "--json"))
	var own, theirs []string
	for _, e := range entries {
		if e.RunID != run {
			t.Errorf("log --run %s printed %+v", run, e)
		}
		if e.ChangeID == "" {
			own = append(own, e.From+">"+e.To+" "+e.By)
		} else if e.ChangeID == change {
			theirs = append(theirs, e.From+">"+e.To)
		}
	}
	if want := []string{">open ", "open>undoing person:alice", "undoing>undone person:alice"}; !reflect.DeepEqual(own, want) {
		t.Errorf("the run's own entries = %v, want %v", own, want)
	}
	if n := len(theirs); n < 4 || theirs[0] != ">pending" || !strings.HasSuffix(theirs[n-1], ">undone") {
		t.Errorf("the run's change's entries = %v", theirs)
	}
}

func TestLog_SinceByLimitAndAfter(t *testing.T) {
	f := populate(t)
	all := logLines(t, runL(t, f.path, "log", "--limit", "0", "--json"))
	ids := func(entries []historyView) map[string]bool {
		m := map[string]bool{}
		for _, e := range entries {
			m[e.ChangeID] = true
		}
		return m
	}
	if seen := ids(all); !seen[f.ids["old_undone"]] || !seen[f.ids["pending"]] {
		t.Fatalf("log --limit 0 lacks old or recent changes: %d entries", len(all))
	}
	for _, since := range []string{"1d", "24h", "90m"} {
		recent := ids(logLines(t, runL(t, f.path, "log", "--since", since, "--json")))
		if recent[f.ids["old_undone"]] || recent[f.ids["old_expired"]] || !recent[f.ids["pending"]] || !recent[f.ids["undone"]] {
			t.Errorf("log --since %s selected the wrong changes: %v", since, recent)
		}
		if since == "90m" && recent[f.ids["stale"]] {
			t.Errorf("log --since 90m holds the preview of 2h ago")
		}
	}
	if week := ids(logLines(t, runL(t, f.path, "log", "--since", "7d", "--json"))); !week[f.ids["stale"]] {
		t.Errorf("log --since 7d lacks the preview of 2h ago")
	}
	byAlice := logLines(t, runL(t, f.path, "log", "--by", "person:alice", "--json"))
	if len(byAlice) == 0 {
		t.Fatal("log --by person:alice printed nothing")
	}
	for _, e := range byAlice {
		if e.By != "person:alice" {
			t.Errorf("log --by person:alice printed %+v", e)
		}
	}
	if r := runL(t, f.path, "log", "--by", "person:al", "--json"); r.code != exitOK || r.stdout != "" {
		t.Errorf("log --by of a prefix matched: %s", r)
	}

	// A cut listing says how to read on, and --after does.
	r := runL(t, f.path, "log", "--limit", "3", "--json")
	first := logLines(t, r)
	if len(first) != 3 || !reflect.DeepEqual(first, all[:3]) {
		t.Fatalf("log --limit 3 = %+v", first)
	}
	m := regexp.MustCompile(`--after (\d+)`).FindStringSubmatch(r.stderr)
	if m == nil || m[1] != jsonNumber(first[2].Seq) {
		t.Fatalf("log --limit 3 stderr lacks --after %d: %s", first[2].Seq, r)
	}
	next := logLines(t, runL(t, f.path, "log", "--after", m[1], "--limit", "2", "--json"))
	if !reflect.DeepEqual(next, all[3:5]) {
		t.Errorf("log --after %s = %+v, want %+v", m[1], next, all[3:5])
	}
	if r := runL(t, f.path, "log", "--limit", "0", "--json"); r.stderr != "" {
		t.Errorf("an uncut log wrote to stderr: %s", r)
	}
	// By default at most defaultLimit entries; the fixture has fewer.
	if got := logLines(t, runL(t, f.path, "log", "--json")); len(got) != min(len(all), defaultLimit) {
		t.Errorf("log printed %d of %d entries", len(got), len(all))
	}
	want(t, runL(t, f.path, "log", "--change", "chg_none"), exitOK, "no history")

	for _, bad := range [][]string{{"--since", "yesterday"}, {"--since", "-1h"}, {"--limit", "-1"}, {"--after", "-2"}, {"extra"}} {
		r := runL(t, f.path, append([]string{"log"}, bad...)...)
		if r.code != exitError || !strings.Contains(r.stderr, "Usage: mcp-changeset log") {
			t.Errorf("log %v: want a usage error, got %s", bad, r)
		}
	}
}

func jsonNumber(n int64) string { b, _ := json.Marshal(n); return string(b) }

func TestList_ByAndLimit(t *testing.T) {
	f := populate(t)
	// A change previewed by bob's agent, written as the library will.
	ctx := context.Background()
	l, err := ledger.Open(ctx, f.path, ledger.OpenOptions{})
	if err != nil {
		t.Fatal(err)
	}
	now := time.Now()
	c := &ledger.Change{ID: "chg_0000000000000000b0b0", Action: "set", Status: ledger.Pending, ScopeHash: "s",
		Payload: json.RawMessage(`{}`), Summary: "bob's", PreviewedBy: "agent:bob",
		CreatedAt: now, UpdatedAt: now, ExpiresAt: now.Add(time.Hour)}
	if err := l.WithTx(ctx, func(tx *ledger.Tx) error { return tx.InsertChange(c) }); err != nil {
		t.Fatal(err)
	}
	l.Close()

	doc := decode(t, runL(t, f.path, "list", "--by", "agent:bob", "--json"))
	changes := doc["changes"].([]any)
	if len(changes) != 1 || changes[0].(map[string]any)["change_id"] != c.ID || changes[0].(map[string]any)["previewed_by"] != "agent:bob" {
		t.Errorf("list --by agent:bob = %v", changes)
	}
	want(t, runL(t, f.path, "show", c.ID), exitOK, "previewed by", "agent:bob")
	if got := moves(logLines(t, runL(t, f.path, "log", "--by", "agent:bob", "--json"))); !reflect.DeepEqual(got, []string{">pending agent:bob"}) {
		t.Errorf("log --by agent:bob = %v", got)
	}
	// Undone by a person, through the run's undo.
	doc = decode(t, runL(t, f.path, "list", "--by", "person:alice", "--json"))
	changes = doc["changes"].([]any)
	if len(changes) != 1 || changes[0].(map[string]any)["change_id"] != f.ids["run_undone"] {
		t.Errorf("list --by person:alice = %v", changes)
	}
	want(t, runL(t, f.path, "list", "--by", "nobody"), exitOK, "no changes")

	all := decode(t, runL(t, f.path, "list", "--limit", "0", "--json"))["changes"].([]any)
	r := runL(t, f.path, "list", "--limit", "2", "--json")
	two := decode(t, r)["changes"].([]any)
	if len(two) != 2 || !reflect.DeepEqual(two, all[:2]) || !strings.Contains(r.stderr, "showing the newest 2 changes") {
		t.Errorf("list --limit 2 = %v\n%s", two, r)
	}
	if r := runL(t, f.path, "list"); r.stderr != "" {
		t.Errorf("an uncut list wrote to stderr: %s", r)
	}
	if r := runL(t, f.path, "list", "--limit", "-1"); r.code != exitError {
		t.Errorf("list --limit -1: %s", r)
	}

	allRuns := decode(t, runL(t, f.path, "runs", "--limit", "0", "--json"))["runs"].([]any)
	r = runL(t, f.path, "runs", "--limit", "1", "--json")
	one := decode(t, r)["runs"].([]any)
	if len(allRuns) < 2 || !reflect.DeepEqual(one, allRuns[:1]) || !strings.Contains(r.stderr, "showing the newest 1 runs") {
		t.Errorf("runs --limit 1 = %v\n%s", one, r)
	}
	if r := runL(t, f.path, "runs"); r.stderr != "" {
		t.Errorf("an uncut runs wrote to stderr: %s", r)
	}
}

// checkHistoryMatchesRows fails t unless the history of the ledger at path
// agrees with its rows: each change's entries chain (each starts where the
// one before ended) from its creation to its current status, and so do
// each run's own.
func checkHistoryMatchesRows(t *testing.T, path string) {
	t.Helper()
	entries := logLines(t, runL(t, path, "log", "--limit", "0", "--json"))
	last := map[string]string{} // row ID → the status its last entry reached
	for _, e := range entries {
		id := e.ChangeID
		if id == "" {
			id = e.RunID
		}
		if e.From != last[id] {
			t.Errorf("entry %d of %s starts at %q, but the one before ended at %q", e.Seq, id, e.From, last[id])
		}
		last[id] = e.To
	}
	for _, c := range decode(t, runL(t, path, "list", "--limit", "0", "--json"))["changes"].([]any) {
		c := c.(map[string]any)
		if id := c["change_id"].(string); last[id] != c["status"] {
			t.Errorf("change %s is %s, but its history ends at %q", id, c["status"], last[id])
		}
	}
	for _, r := range decode(t, runL(t, path, "runs", "--json"))["runs"].([]any) {
		r := r.(map[string]any)
		if id := r["run_id"].(string); last[id] != r["status"] {
			t.Errorf("run %s is %s, but its history ends at %q", id, r["status"], last[id])
		}
	}
}

func TestLog_HistoryAgreesWithTheRows(t *testing.T) {
	checkHistoryMatchesRows(t, populate(t).path)
}

func TestLog_AProcessKilledMidApplyLeavesHistoryAndRowsInStep(t *testing.T) {
	if testing.Short() {
		t.Skip("starts processes")
	}
	t.Parallel()
	path := filepath.Join(t.TempDir(), "ledger.db")
	id := killMidApply(t, path)
	// The claim committed with its entry; the apply that was killed left
	// neither a transition nor an entry.
	if got := moves(logLines(t, runL(t, path, "log", "--change", id, "--json"))); !reflect.DeepEqual(got, []string{">pending agent", "pending>applying agent"}) {
		t.Fatalf("after SIGKILL mid-apply the history is %v", got)
	}
	checkHistoryMatchesRows(t, path)
	want(t, runL(t, path, "reconcile", id, "--note", "nothing reached the store", "--yes"), exitOK)
	entries := logLines(t, runL(t, path, "log", "--change", id, "--json"))
	e := entries[len(entries)-1]
	if e.From != "applying" || e.To != "apply_failed" || !strings.HasPrefix(e.By, "operator:") || e.Note != "reconciled: nothing reached the store" {
		t.Errorf("the reconcile's entry = %+v", e)
	}
	checkHistoryMatchesRows(t, path)
}
