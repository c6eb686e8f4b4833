package main

import (
	"strings"
	"testing"
)

func TestCheck_ReportsEachBrokenInvariantOnItsOwnLine(t *testing.T) {
	t.Parallel()
	f := populate(t)
	a, b, c := digest("a"), digest("b"), digest("c")
	addSecret("a digest planted by the test", a)
	addSecret("a digest planted by the test", b)
	addSecret("a digest planted by the test", c)
	const ghost = "run_ffffffffffffffffffff"
	// Break the ledger behind its back, as a buggy program or a hand edit
	// would.
	execSQL(t, f.path,
		"PRAGMA ignore_check_constraints = ON",
		"UPDATE changes SET confirm_hash = '"+a+"' WHERE id = '"+f.ids["undone"]+"'",
		"UPDATE changes SET applied_at = NULL WHERE id = '"+f.ids["undone"]+"'",
		"UPDATE changes SET confirm_hash = '' WHERE id = '"+f.ids["pending"]+"'",
		"UPDATE changes SET undo_hash = '' WHERE id = '"+f.ids["applied"]+"'",
		"UPDATE changes SET undo_hash = '"+b+"' WHERE id = '"+f.ids["apply_failed"]+"'",
		"UPDATE changes SET run_id = '"+ghost+"' WHERE id = '"+f.ids["applied_noundo"]+"'",
		"UPDATE changes SET status = 'lost' WHERE id = '"+f.ids["old_undone"]+"'",
		"UPDATE runs SET plan_hash = '' WHERE id = '"+f.ids["run"]+"'",
		"UPDATE changes SET status = 'expired', confirm_hash = '' WHERE id = '"+f.ids["stale"]+"'",
		"UPDATE runs SET confirm_hash = '"+c+"' WHERE id = '"+f.ids["undone_run"]+"'",
	)
	before := readFile(t, f.path)
	r := runL(t, f.path, "check", "--full", "--stale-after", "1000d")
	if r.code != exitError {
		t.Fatalf("check of a broken ledger: %s", r)
	}
	wantLines := []string{
		"foreign key: row ",
		"change " + f.ids["undone"] + ": undone but still holds a confirmation digest",
		"change " + f.ids["undone"] + ": undone without the time it was applied",
		"change " + f.ids["pending"] + ": pending without a confirmation digest",
		"change " + f.ids["applied"] + ": applied and undoable within its undo window, but holds no undo digest",
		"change " + f.ids["apply_failed"] + ": apply_failed (undoable: false) but holds an undo digest",
		"change " + f.ids["applied_noundo"] + ": its run " + ghost + " does not exist",
		"change " + f.ids["old_undone"] + `: unknown status "lost"`,
		"run " + f.ids["run"] + ": holds an undo confirmation digest without the plan digest",
		"run " + f.ids["undone_run"] + ": undone but still holds an undo confirmation digest",
		"change " + f.ids["stale"] + ": expired, but its history ends at pending: a transition was written without its history entry",
	}
	lines := strings.Split(strings.TrimSpace(r.stdout), "\n")
	for _, w := range wantLines {
		found := false
		for _, l := range lines {
			found = found || strings.HasPrefix(l, w)
		}
		if !found {
			t.Errorf("check lacks a line starting %q:\n%s", w, r.stdout)
		}
	}
	// The undone run lacks its plan digest too: one more line.
	if len(lines) != len(wantLines)+1 {
		t.Errorf("check printed %d lines, want %d:\n%s", len(lines), len(wantLines)+1, r.stdout)
	}
	if !strings.Contains(r.stderr, "12 problems found in "+f.path) {
		t.Errorf("stderr: %s", r.stderr)
	}
	sameBytes(t, f.path, before, "check")
}

func TestCheck_CorruptFileReportsEachFindingUnchanged(t *testing.T) {
	t.Parallel()
	f := populate(t)
	// Overwrite every page but the schema's with garbage.
	leaves, interior, size := ledgerPages(t, f.path, "sqlite_schema")
	schema := map[int64]bool{}
	for _, p := range append(leaves, interior...) {
		schema[p] = true
	}
	data := readFile(t, f.path)
	for i := int64(0); i < int64(len(data)); i++ {
		if !schema[i/size+1] {
			data[i] = byte(i * 7)
		}
	}
	if err := writeFile(f.path, data); err != nil {
		t.Fatal(err)
	}
	r := runL(t, f.path, "check", "--full")
	if r.code != exitError || !strings.Contains(r.stderr, "problems found") {
		t.Fatalf("check of a corrupt file: %s", r)
	}
	lines := strings.Split(strings.TrimSpace(r.stdout), "\n")
	if len(lines) < 2 {
		t.Errorf("check found only %q", lines)
	}
	for _, l := range lines {
		if !strings.HasPrefix(l, "integrity: ") && !strings.HasPrefix(l, "invariants: ") && !strings.HasPrefix(l, "stale: not checked: ") {
			t.Errorf("finding without its label: %q", l)
		}
	}
	sameBytes(t, f.path, data, "check of a corrupt file")
}
