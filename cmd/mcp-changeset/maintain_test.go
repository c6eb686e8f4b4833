package main

import (
	"bytes"
	"database/sql"
	"encoding/json"
	"slices"
	"strings"
	"testing"
)

// autoVacuum reads PRAGMA auto_vacuum of the SQLite file at path.
func autoVacuum(t *testing.T, path string) int {
	t.Helper()
	db, err := sql.Open("sqlite", "file:"+path+"?mode=ro")
	if err != nil {
		t.Fatal(err)
	}
	defer db.Close()
	var v int
	if err := db.QueryRow("PRAGMA auto_vacuum").Scan(&v); err != nil {
		t.Fatal(err)
	}
	return v
}

// pruneJSON decodes the document of prune --json.
func pruneJSON(t *testing.T, r result) pruneReport {
	t.Helper()
	var doc pruneReport
	dec := json.NewDecoder(strings.NewReader(r.stdout))
	dec.DisallowUnknownFields()
	if err := dec.Decode(&doc); err != nil {
		t.Fatalf("prune --json printed %q: %v", r.stdout, err)
	}
	return doc
}

func TestPrune_JSONListsWhatGoesAndTheSpace(t *testing.T) {
	t.Parallel()
	f := populate(t)
	gone := []string{f.ids["old_undone"], f.ids["old_apply_failed"], f.ids["old_expired"]}
	r := runL(t, f.path, "prune", "--older-than", "30d", "--json")
	want(t, r, exitDryRun)
	dry := pruneJSON(t, r)
	if !dry.DryRun || !sameSet(dry.Changes, gone) || !slices.Equal(dry.Runs, []string{f.ids["old_run"]}) || dry.BytesBefore != 0 || dry.Cutoff.IsZero() {
		t.Errorf("prune --json (dry run) = %+v", dry)
	}
	r = runL(t, f.path, "prune", "--older-than", "30d", "--json", "--yes")
	want(t, r, exitOK)
	done := pruneJSON(t, r)
	if done.DryRun || !sameSet(done.Changes, gone) || !slices.Equal(done.Runs, []string{f.ids["old_run"]}) || done.Vacuumed {
		t.Errorf("prune --json --yes = %+v", done)
	}
	if done.BytesBefore <= 0 || done.BytesAfter <= 0 || !done.SpaceReturned {
		t.Errorf("prune --json --yes reported the space %+v; want both sizes, returned (a new ledger has incremental auto-vacuum)", done)
	}
	if r.stderr != "" {
		t.Errorf("prune --json wrote to stderr: %q", r.stderr)
	}
}

// TestPrune_VacuumReturnsTheSpaceOfAnOlderLedger turns the fixture into a
// ledger as they were made before incremental auto-vacuum: prune keeps
// the space and says how to return it; --vacuum returns it and switches
// the file, for good.
func TestPrune_VacuumReturnsTheSpaceOfAnOlderLedger(t *testing.T) {
	t.Parallel()
	f := populate(t)
	execSQL(t, f.path, "PRAGMA auto_vacuum = NONE", "VACUUM")
	if v := autoVacuum(t, f.path); v != 0 {
		t.Fatalf("auto_vacuum = %d, want 0 for this test", v)
	}
	r := runL(t, f.path, "prune", "--older-than", "30d", "--yes")
	want(t, r, exitOK, "deleted 3 changes and 1 run", "keeps the space of the deleted rows", "prune --vacuum")
	r = runL(t, f.path, "prune", "--older-than", "30d", "--include-applied", "--vacuum")
	want(t, r, exitDryRun, "would delete 2 changes", "--vacuum would then rewrite the whole ledger")
	if v := autoVacuum(t, f.path); v != 0 {
		t.Errorf("a dry run with --vacuum changed auto_vacuum to %d", v)
	}
	r = runL(t, f.path, "prune", "--older-than", "30d", "--include-applied", "--vacuum", "--yes")
	want(t, r, exitOK, "deleted 2 changes and 0 runs", "vacuumed: the ledger went from ")
	if v := autoVacuum(t, f.path); v != 2 {
		t.Errorf("after prune --vacuum auto_vacuum = %d, want 2 (incremental)", v)
	}
	// Nothing left to delete: --vacuum still vacuums.
	r = runL(t, f.path, "prune", "--older-than", "30d", "--include-applied", "--vacuum", "--json", "--yes")
	want(t, r, exitOK)
	if doc := pruneJSON(t, r); !doc.Vacuumed || len(doc.Changes) != 0 || doc.BytesBefore <= 0 || doc.BytesAfter <= 0 {
		t.Errorf("prune --vacuum --json with nothing to delete = %+v", doc)
	}
	want(t, runL(t, f.path, "check", "--full", "--stale-after", "1000d"), exitOK, "ok")
}

func TestPruneProgress_OneLineThatSaysWhatComesNext(t *testing.T) {
	t.Parallel()
	var w bytes.Buffer
	p := pruneProgress(&w)
	p(1000, 2500)
	p(2000, 2500)
	p(2500, 2500)
	want := "\rdeleting changes: 1000 of 2500\rdeleting changes: 2000 of 2500\rdeleting changes: 2500 of 2500; returning the free space to the disk…"
	if w.String() != want {
		t.Errorf("progress wrote %q, want %q", w.String(), want)
	}
}

func TestCheckProgress_KeepsOneLine(t *testing.T) {
	t.Parallel()
	var w bytes.Buffer
	p := checkProgress(&w)
	p("file", 0, 0)
	p("history", 500, 0)
	p("history", 1000, 0) // within 100 ms of the last: not drawn
	p("changes", 500, 500)
	out := w.String()
	for _, s := range []string{"\r\033[Kchecking the file's structure…", "\r\033[Kchecking history entries: 500", "\r\033[Kchecking changes: 500 of 500"} {
		if !strings.Contains(out, s) {
			t.Errorf("progress lacks %q: %q", s, out)
		}
	}
	if strings.Contains(out, "1000") || strings.Contains(out, "\n") {
		t.Errorf("progress drew too much: %q", out)
	}
}

// TestCheck_RoutineReadsTheLastDayFullReadsEverything breaks an old row
// and a recent one behind the ledger's back: the routine check reports
// the recent one only, --full and a wide --since both.
func TestCheck_RoutineReadsTheLastDayFullReadsEverything(t *testing.T) {
	t.Parallel()
	f := populate(t)
	d := digest("planted")
	addSecret("a digest planted by the test", d)
	execSQL(t, f.path,
		"UPDATE changes SET confirm_hash = '"+d+"' WHERE id = '"+f.ids["old_expired"]+"'",
		"UPDATE changes SET confirm_hash = '"+d+"' WHERE id = '"+f.ids["undone"]+"'",
	)
	oldLine := "change " + f.ids["old_expired"] + ": expired but still holds a confirmation digest"
	newLine := "change " + f.ids["undone"] + ": undone but still holds a confirmation digest"
	r := runL(t, f.path, "check", "--stale-after", "1000d")
	want(t, r, exitError, newLine)
	if strings.Contains(r.stdout, oldLine) {
		t.Errorf("the routine check read a row changed 40 days ago:\n%s", r.stdout)
	}
	for _, args := range [][]string{{"--full"}, {"--since", "60d"}} {
		r := runL(t, f.path, append([]string{"check", "--stale-after", "1000d"}, args...)...)
		want(t, r, exitError, newLine, oldLine)
	}
	r = runL(t, f.path, "check", "--full", "--stale-after", "1000d", "--json")
	if doc := decode(t, r); doc["full"] != true || len(doc["problems"].([]any)) != 2 {
		t.Errorf("check --full --json = %v", doc)
	}
	wantErr(t, runL(t, f.path, "check", "--full", "--since", "2d"), "give --since or --full, not both", "Usage: mcp-changeset check")
}

// TestCheck_RoutineFindsDamageWhereATreeStarts damages the root page of
// the changes table: the routine check, which reads the pages where each
// b-tree starts and ends, reports it.
func TestCheck_RoutineFindsDamageWhereATreeStarts(t *testing.T) {
	t.Parallel()
	f := populate(t)
	leaves, interior, size := ledgerPages(t, f.path, "changes")
	root := append(interior, leaves...)[0] // in tree order: the root first
	overwrite(t, f.path, (root-1)*size+1, root*size, 3)
	before := readFile(t, f.path)
	r := runL(t, f.path, "check", "--stale-after", "1000d")
	want(t, r, exitError, "integrity: ")
	if !strings.Contains(r.stderr, "problems found") && !strings.Contains(r.stderr, "problem found") {
		t.Errorf("check's summary: %s", r.stderr)
	}
	sameBytes(t, f.path, before, "a routine check of a damaged file")
}

// sameSet reports whether a and b hold the same strings, in any order.
func sameSet(a, b []string) bool {
	a, b = slices.Clone(a), slices.Clone(b)
	slices.Sort(a)
	slices.Sort(b)
	return slices.Equal(a, b)
}
