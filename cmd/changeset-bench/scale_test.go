package main

import (
	"bytes"
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/mcp-changeset/changeset-go/internal/pgtest"
	"github.com/mcp-changeset/changeset-go/ledger"
)

// The ledger --scale builds holds exactly the mix it promises, on every
// backend: the counts by status, the runs and history entries it reports,
// the rare and absent probe values, and nothing Check would complain of.
func TestBuildLedger_HoldsWhatWasAsked(t *testing.T) {
	n := 2000
	if raceDetector {
		n = 1000
	}
	var lookups []string // of the first backend: the same seed builds the same ledger on the next
	for _, backend := range []string{"sqlite", "postgres"} {
		t.Run(backend, func(t *testing.T) {
			target := filepath.Join(t.TempDir(), "scale.db")
			if backend == "postgres" {
				target = pgtest.DSN(t)
			}
			ctx := t.Context()
			l, err := ledger.Open(ctx, target, ledger.OpenOptions{Create: true})
			if err != nil {
				t.Fatal(err)
			}
			defer l.Close()
			res, err := buildLedger(ctx, l, n, 1, time.Now(), nil)
			if err != nil {
				t.Fatal(err)
			}
			count := func(f ledger.ChangeFilter) int {
				t.Helper()
				c, err := l.CountChanges(ctx, f)
				if err != nil {
					t.Fatal(err)
				}
				return c
			}
			if c := count(ledger.ChangeFilter{}); c != n || res.Changes != n {
				t.Errorf("%d changes in the ledger, %d reported, want %d", c, res.Changes, n)
			}
			want := scaleCounts(n)
			total := 0
			for _, s := range ledger.Statuses {
				c := count(ledger.ChangeFilter{Statuses: []ledger.Status{s}})
				if c != want[s] || res.ByStatus[s] != want[s] {
					t.Errorf("%s: %d in the ledger, %d reported, want %d", s, c, res.ByStatus[s], want[s])
				}
				total += want[s]
			}
			if total != n || want[ledger.Pending] != 3*n/100 || want[ledger.Undone] != 22*n/100 {
				t.Errorf("the mix of %d changes: %v", n, want)
			}
			// Every pending change is a stale preview, which expire finds.
			stale, err := l.StaleChanges(ctx)
			if err != nil || len(stale) != want[ledger.Pending] {
				t.Errorf("%d stale previews (%v), want %d", len(stale), err, want[ledger.Pending])
			}

			runs, err := l.Runs(ctx, ledger.RunFilter{})
			if err != nil {
				t.Fatal(err)
			}
			byStatus := map[ledger.RunStatus]int{}
			for _, r := range runs {
				byStatus[r.Status]++
			}
			if len(runs) != res.Runs || len(runs) < n/20 || len(runs) > n/5 {
				t.Errorf("%d runs in the ledger, %d reported, want about one per ten changes", len(runs), res.Runs)
			}
			for _, s := range ledger.RunStatuses {
				if byStatus[s] != res.RunsByStatus[s] {
					t.Errorf("runs %s: %d in the ledger, %d reported", s, byStatus[s], res.RunsByStatus[s])
				}
			}
			if byStatus[ledger.RunUndone]+byStatus[ledger.RunPartiallyUndone] == 0 {
				t.Error("no run was undone as a run")
			}
			history, err := l.History(ctx, ledger.HistoryFilter{})
			if err != nil {
				t.Fatal(err)
			}
			if len(history) != res.History || len(history) < 3*n {
				t.Errorf("%d history entries, %d reported, want more than three per change", len(history), res.History)
			}
			for i := 1; i < len(history); i++ {
				if history[i].At.Before(history[i-1].At.Add(-time.Hour)) {
					t.Fatalf("history entry %d is at %v, long before the one it follows (%v): the build is not in time order",
						history[i].Seq, history[i].At, history[i-1].At)
				}
			}

			p := scaleProbes
			for _, probe := range []struct {
				name string
				f    ledger.ChangeFilter
				want int // -1: common (a tenth of the changes or more)
			}{
				{"by, common", ledger.ChangeFilter{By: p.ByCommon}, -1},
				{"by, rare", ledger.ChangeFilter{By: p.ByRare}, scaleRare},
				{"by, absent", ledger.ChangeFilter{By: p.ByAbsent}, 0},
				{"action, common", ledger.ChangeFilter{Action: p.ActionCommon}, -1},
				{"action, rare", ledger.ChangeFilter{Action: p.ActionRare}, scaleRare},
				{"action, absent", ledger.ChangeFilter{Action: p.ActionAbsent}, 0},
				{"text, common", ledger.ChangeFilter{Text: p.TextCommon}, -1},
				{"text, rare", ledger.ChangeFilter{Text: p.TextRare}, scaleRare},
				{"text, absent", ledger.ChangeFilter{Text: p.TextAbsent}, 0},
			} {
				c := count(probe.f)
				if probe.want >= 0 && c != probe.want || probe.want < 0 && c < n/10 {
					t.Errorf("%s: %d changes, want %d (-1: at least %d)", probe.name, c, probe.want, n/10)
				}
			}
			if c := count(ledger.ChangeFilter{RunID: res.TypicalRun}); c != scaleRunSize {
				t.Errorf("the typical run holds %d changes, want %d", c, scaleRunSize)
			}
			if c, err := l.Change(ctx, res.Middle.ID); err != nil || !c.CreatedAt.Equal(res.Middle.CreatedAt) {
				t.Errorf("the middle change %s, created at %v: %v", res.Middle.ID, res.Middle.CreatedAt, err)
			}
			if len(res.Lookups) < 100 {
				t.Errorf("%d changes to look up, want 100 or more", len(res.Lookups))
			}
			if lookups == nil {
				lookups = res.Lookups
			} else if strings.Join(lookups, " ") != strings.Join(res.Lookups, " ") {
				t.Error("the same seed built other changes than on the first backend")
			}
			problems, err := l.Check(ctx)
			if err != nil || len(problems) > 0 {
				t.Errorf("check: %v, %q", err, problems)
			}
		})
	}
}

// changeset-bench --scale prints a table with a row per page and command,
// timed on both ledgers, and prune's figures; --json holds the same.
func TestRunScale_TimesEveryRowOnBothLedgers(t *testing.T) {
	if testing.Short() {
		t.Skip("builds mcp-changeset and ledgers")
	}
	testRunScale(t, "sqlite")
}

// With --postgres, the same for PostgreSQL, each ledger in a schema of
// its own (--skip-sqlite: SQLite has its own test).
func TestRunScale_Postgres(t *testing.T) {
	if testing.Short() {
		t.Skip("builds mcp-changeset and ledgers")
	}
	testRunScale(t, "postgres")
}

func testRunScale(t *testing.T, backends ...string) {
	n, runs := 2000, 2
	if raceDetector {
		n, runs = 1000, 1
	}
	args := []string{"--scale", strconv.Itoa(n), "--scale-base", "500", "--scale-runs", strconv.Itoa(runs), "--dir", t.TempDir()}
	if backends[0] == "postgres" {
		args = append(args, "--postgres", pgtest.DSN(t), "--skip-sqlite")
	}
	jsonPath := filepath.Join(t.TempDir(), "scale.json")
	args = append(args, "--json", jsonPath)
	if err := run(t.Context(), args); err != nil {
		t.Fatal(err)
	}
	data, err := os.ReadFile(jsonPath)
	if err != nil {
		t.Fatal(err)
	}
	var rep scaleReport
	if err := json.Unmarshal(data, &rep); err != nil {
		t.Fatal(err)
	}
	if rep.Base != 500 || rep.N != n || len(rep.Backends) != len(backends) {
		t.Fatalf("report: base %d, n %d, %d backends, want %d", rep.Base, rep.N, len(rep.Backends), len(backends))
	}
	rows := scaleRows()
	for i, be := range rep.Backends {
		if be.Name != backends[i] {
			t.Errorf("backend %d is %s, want %s", i, be.Name, backends[i])
		}
		if len(be.Rows) != len(rows) {
			t.Errorf("%s: %d rows, want %d", be.Name, len(be.Rows), len(rows))
		}
		got := map[string]*scaleRowResult{}
		for _, r := range be.Rows {
			got[r.Key] = r
		}
		for _, row := range rows {
			r := got[row.key]
			if r == nil {
				t.Errorf("%s: no row %s", be.Name, row.key)
				continue
			}
			for i, tm := range r.Times {
				if tm.Runs < 1 || tm.Runs > runs || tm.Median <= 0 || tm.Min > tm.Median || tm.Median > tm.Max {
					t.Errorf("%s, %s, ledger %d: %+v", be.Name, row.key, i, tm)
				}
			}
			if r.Ratio <= 0 || r.What == "" {
				t.Errorf("%s, %s: ratio %v, %q", be.Name, row.key, r.Ratio, r.What)
			}
		}
		if page := got["page-q-common"]; page != nil && page.Times[1].Bytes < 10_000 {
			t.Errorf("%s: the search page is %d bytes: did it list anything?", be.Name, page.Times[1].Bytes)
		}
		for i, want := range []int{500, n} {
			l, p := be.Ledgers[i], be.Prune[i]
			if l == nil || l.Build.Changes != want || l.Size <= 0 || l.Build.PerSecond <= 0 {
				t.Fatalf("%s, ledger %d: %+v", be.Name, i, l)
			}
			// A change may reach the cutoff between the dry run and prune.
			if p == nil || p.Deleted <= 0 || p.Deleted < p.WouldDelete || p.Deleted > p.WouldDelete+2 || p.Deleted > want/2 || p.SizeBefore <= 0 || p.SizeAfter <= 0 {
				t.Errorf("%s, ledger %d: prune %+v", be.Name, i, p)
			}
		}
	}
	var out bytes.Buffer
	rep.print(&out)
	md := out.String()
	for _, be := range rep.Backends {
		for _, r := range be.Rows {
			if !strings.Contains(md, "| "+r.What+" | ") {
				t.Errorf("the table has no row %q", r.What)
			}
		}
	}
	head := fmt.Sprintf("| %s | 500 changes | %s changes | ratio |", backendTitles[backends[0]], thousands(n))
	if !strings.Contains(md, head) || !strings.Contains(md, "prune: size on disk before → after") {
		t.Errorf("table:\n%s", md)
	}
}

func TestScaleOptions_RefuseWhatCannotBeBuilt(t *testing.T) {
	for _, args := range [][]string{
		{"--scale", "100"},
		{"--scale", "10000"}, // the same as the base
		{"--scale", "2000", "--scale-base", "10"},
		{"--scale", "2000", "--scale-runs", "0"},
		{"--scale", "2000", "--mcp"},
		{"--scale", "2000", "--skip-sqlite"}, // and no --postgres
	} {
		o, err := parseFlags(args)
		if err == nil {
			err = o.scale.check(o.postgres)
		}
		if err == nil {
			t.Errorf("%q accepted", args)
		}
	}
	if _, err := buildLedger(t.Context(), nil, scaleMinChanges-1, 1, time.Now(), nil); err == nil {
		t.Error("a ledger too small for the rare values was built")
	}
}

func TestRedactURLHidesPassword(t *testing.T) {
	for in, want := range map[string]string{
		"postgres://u:secret@h/db?changeset_schema=s": "postgres://u:xxxxx@h/db?changeset_schema=s",
		"postgres://u@h/db":                           "postgres://u@h/db",
		"/tmp/ledger-10000.db":                        "/tmp/ledger-10000.db",
	} {
		if got := redactURL(in); got != want {
			t.Errorf("redactURL(%q) = %q, want %q", in, got, want)
		}
	}
}

func TestThousands(t *testing.T) {
	for n, want := range map[int]string{0: "0", 999: "999", 1000: "1,000", 1234567: "1,234,567", -4000: "-4,000"} {
		if got := thousands(n); got != want {
			t.Errorf("thousands(%d) = %q, want %q", n, got, want)
		}
	}
}
