package main

import (
	"context"
	"fmt"
	"os/user"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	changeset "github.com/mcp-changeset/changeset-go"
	"github.com/mcp-changeset/changeset-go/internal/testkit"
	"github.com/mcp-changeset/changeset-go/ledger"
)

func TestChangingCommands_WithoutYesOnlyReportAndExit2(t *testing.T) {
	t.Parallel()
	f := populate(t)
	before := readFile(t, f.path)
	for _, tc := range []struct {
		args []string
		out  []string
	}{
		{[]string{"reconcile", f.ids["applying"], "--note", "checked"}, []string{"would reconcile change " + f.ids["applying"], "applying → apply_failed", "checked (operator:", "--yes"}},
		{[]string{"reconcile", f.ids["undoing"], "--note", "checked"}, []string{"undoing → undo_failed"}},
		{[]string{"expire"}, []string{"would expire 2 pending changes", f.ids["stale"], f.ids["old_pending"], "--yes"}},
		{[]string{"prune", "--older-than-days", "30"}, []string{"would delete 3 changes and 1 run", f.ids["old_undone"], f.ids["old_apply_failed"], f.ids["old_expired"], f.ids["old_run"], "--yes"}},
		{[]string{"prune", "--older-than-days", "30", "--include-applied"}, []string{"would delete 5 changes", f.ids["old_applied_noundo"], f.ids["old_applied_closed"]}},
		// --older-than takes the durations the other commands take.
		{[]string{"prune", "--older-than", "30d"}, []string{"would delete 3 changes and 1 run", f.ids["old_undone"], f.ids["old_run"]}},
		{[]string{"prune", "--older-than", "720h", "--include-applied"}, []string{"would delete 5 changes"}},
		{[]string{"prune", "--older-than", "1000d"}, []string{"would delete 0 changes and 0 runs"}},
		// Nothing to do is still a dry run.
		{[]string{"prune", "--older-than-days", "1000"}, []string{"would delete 0 changes and 0 runs", "--yes"}},
	} {
		r := runL(t, f.path, tc.args...)
		want(t, r, exitDryRun, tc.out...)
		sameBytes(t, f.path, before, strings.Join(tc.args, " "))
	}
	// Everything listed is all that would go.
	r := runL(t, f.path, "prune", "--older-than-days", "30")
	for _, role := range f.changeRoles() {
		if id := f.ids[role]; strings.Contains(r.stdout, id) != (role == "old_undone" || role == "old_apply_failed" || role == "old_expired") {
			t.Errorf("prune dry run and %s (%s):\n%s", role, id, r.stdout)
		}
	}
	for _, role := range f.changeRoles() {
		if got := status(t, f.path, f.ids[role]); got == "(deleted)" || got == ledger.Expired && role == "stale" {
			t.Errorf("a dry run changed %s to %s", role, got)
		}
	}
}

func TestExpire_MovesStalePendingChangesOnly(t *testing.T) {
	t.Parallel()
	f := populate(t)
	r := runL(t, f.path, "expire", "--yes")
	want(t, r, exitOK, "expired 2 changes", f.ids["stale"], f.ids["old_pending"])
	for role, st := range map[string]ledger.Status{"stale": ledger.Expired, "old_pending": ledger.Expired, "pending": ledger.Pending, "run_pending": ledger.Pending, "applying": ledger.Applying} {
		if got := status(t, f.path, f.ids[role]); got != st {
			t.Errorf("%s is %s, want %s", role, got, st)
		}
	}
	// Nothing left to do: still exit 2 without --yes, 0 with it.
	want(t, runL(t, f.path, "expire"), exitDryRun, "would expire 0 pending changes")
	want(t, runL(t, f.path, "expire", "--yes"), exitOK, "expired 0 changes")
	want(t, runL(t, f.path, "check", "--stale-after", "1000d"), exitOK, "ok")
}

func TestReconcile_ClosesInFlightChangesWithNoteAndOperator(t *testing.T) {
	t.Parallel()
	f := populate(t)
	u, err := user.Current()
	if err != nil {
		t.Skip("no current user:", err)
	}
	r := runL(t, f.path, "reconcile", f.ids["applying"], "--note", "checked the remote: not written", "--yes")
	want(t, r, exitOK, "reconciled change "+f.ids["applying"]+": applying → apply_failed")
	r = runL(t, f.path, "reconcile", "--yes", f.ids["old_undoing"], "--note=restored by hand")
	want(t, r, exitOK, "undoing → undo_failed")

	l, err := ledger.Open(context.Background(), f.path, ledger.OpenOptions{ReadOnly: true})
	if err != nil {
		t.Fatal(err)
	}
	defer l.Close()
	c, err := l.Change(context.Background(), f.ids["applying"])
	if err != nil {
		t.Fatal(err)
	}
	if c.Status != ledger.ApplyFailed || c.Note != "checked the remote: not written (operator:"+u.Username+")" || c.ErrorType != "Reconciled" {
		t.Errorf("reconciled change: %s %q %q", c.Status, c.Note, c.ErrorType)
	}
	if got := status(t, f.path, f.ids["old_undoing"]); got != ledger.UndoFailed {
		t.Errorf("old_undoing is %s", got)
	}
	want(t, runL(t, f.path, "show", f.ids["applying"]), exitOK, "checked the remote: not written (operator:"+u.Username+")")

	// Any other status is refused, with or without --yes, and changes nothing.
	before := readFile(t, f.path)
	for _, role := range []string{"applying", "applied", "pending", "undone", "apply_failed"} {
		for _, yes := range []string{"--yes=false", "--yes"} {
			r := runL(t, f.path, "reconcile", f.ids[role], "--note", "x", yes)
			wantErr(t, r, "cannot be reconciled (status: ", "only applying and undoing")
		}
	}
	sameBytes(t, f.path, before, "refused reconciles")
	wantErr(t, runL(t, f.path, "reconcile", "chg_00000000000000000000", "--note", "x", "--yes"), "change chg_00000000000000000000 not found")
	wantErr(t, runL(t, f.path, "reconcile", f.ids["undoing"], "--yes"), "--note is required", "Usage: mcp-changeset reconcile")
	wantErr(t, runL(t, f.path, "reconcile", "--note", "x"), "exactly one change ID")
	if got := status(t, f.path, f.ids["undoing"]); got != ledger.Undoing {
		t.Errorf("a refused reconcile moved undoing to %s", got)
	}
}

func TestPrune_DeletesOnlyFinishedRowsOlderThanCutoff(t *testing.T) {
	t.Parallel()
	f := populate(t)
	r := runL(t, f.path, "prune", "--older-than-days", "30", "--yes")
	want(t, r, exitOK, "deleted 3 changes and 1 run")
	if r.stderr != "" {
		t.Errorf("prune wrote progress to a stderr that is not a terminal: %q", r.stderr)
	}
	gone := map[string]bool{"old_undone": true, "old_apply_failed": true, "old_expired": true}
	for _, role := range f.changeRoles() {
		if deleted := status(t, f.path, f.ids[role]) == "(deleted)"; deleted != gone[role] {
			t.Errorf("%s: deleted = %t, want %t", role, deleted, gone[role])
		}
	}
	// The prune is in the history: one entry per transaction (the changes,
	// the run), about the ledger, by the operator who ran it.
	var pruned []string
	for _, e := range logLines(t, runL(t, f.path, "log", "--json", "--limit", "0")) {
		if e.To == "pruned" {
			if e.ChangeID != "" || e.RunID != "" || e.By != "operator:"+username() {
				t.Errorf("prune entry %+v", e)
			}
			pruned = append(pruned, e.Note)
		}
	}
	if !slices.Equal(pruned, []string{"pruned 3 changes", "pruned 1 runs left with no changes"}) {
		t.Errorf("prune entries in the log: %q", pruned)
	}
	want(t, runL(t, f.path, "runs"), exitOK, f.ids["run"])
	if r := runL(t, f.path, "runs"); strings.Contains(r.stdout, f.ids["old_run"]) {
		t.Error("the old empty run survived")
	}

	r = runL(t, f.path, "prune", "--older-than-days", "30", "--include-applied", "--yes")
	want(t, r, exitOK, "deleted 2 changes and 0 runs")
	gone["old_applied_noundo"], gone["old_applied_closed"] = true, true

	// With no age limit, --keep keeps the newest deletable changes, and an
	// applied change that can still be undone is never deletable.
	r = runL(t, f.path, "prune", "--older-than-days", "0", "--keep", "1", "--include-applied")
	want(t, r, exitDryRun)
	r = runL(t, f.path, "prune", "--older-than-days", "0", "--keep", "1", "--include-applied", "--yes")
	want(t, r, exitOK, "deleted 4 changes")
	kept := 0
	for _, role := range []string{"apply_failed", "undone", "undo_failed", "applied_noundo", "run_undone"} {
		if status(t, f.path, f.ids[role]) != "(deleted)" {
			kept++
		}
	}
	if kept != 1 {
		t.Errorf("--keep 1 kept %d of the finished changes", kept)
	}
	for _, role := range []string{"pending", "stale", "old_pending", "applying", "old_applying", "undoing", "old_undoing", "applied", "nasty", "run_applied", "run_pending"} {
		if status(t, f.path, f.ids[role]) == "(deleted)" {
			t.Errorf("prune deleted %s", role)
		}
	}
	want(t, runL(t, f.path, "check", "--stale-after", "1000d"), exitOK, "ok")
}

func TestPrune_CutoffIsNowMinusNDays(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	f := populate(t)
	l, err := ledger.Open(ctx, f.path, ledger.OpenOptions{})
	if err != nil {
		t.Fatal(err)
	}
	now := time.Now()
	// Two expired changes just either side of 7 days ago.
	ids := map[string]time.Time{
		"chg_" + randomHex(10): now.Add(-7*24*time.Hour - time.Minute),
		"chg_" + randomHex(10): now.Add(-7*24*time.Hour + time.Minute),
	}
	err = l.WithTx(ctx, func(tx *ledger.Tx) error {
		for id, at := range ids {
			c := &ledger.Change{ID: id, Action: "set", Status: ledger.Expired, CreatedAt: at, UpdatedAt: at, ExpiresAt: at}
			if err := tx.InsertChange(c); err != nil {
				return err
			}
		}
		return nil
	})
	l.Close()
	if err != nil {
		t.Fatal(err)
	}
	r := runL(t, f.path, "prune", "--older-than-days", "7", "--yes")
	want(t, r, exitOK)
	for id, at := range ids {
		deleted := status(t, f.path, id) == "(deleted)"
		if older := at.Before(now.Add(-7 * 24 * time.Hour)); deleted != older {
			t.Errorf("change updated %v ago: deleted = %t", now.Sub(at), deleted)
		}
	}
}

func TestPrune_UsageErrors(t *testing.T) {
	t.Parallel()
	f := populate(t)
	before := readFile(t, f.path)
	for _, tc := range []struct {
		args []string
		msg  string
	}{
		{[]string{"prune"}, "--older-than D (or --older-than-days N) is required"},
		{[]string{"prune", "--yes"}, "--older-than D (or --older-than-days N) is required"},
		{[]string{"prune", "--older-than", "3d", "--older-than-days", "3"}, "not both"},
		{[]string{"prune", "--older-than", "-3d"}, "negative"},
		{[]string{"prune", "--older-than", "soon"}, "invalid value"},
		{[]string{"prune", "--older-than", "40000d"}, "at most 36500d"},
		{[]string{"prune", "--older-than-days", "-3"}, "between 0 and"},
		{[]string{"prune", "--older-than-days", "ten"}, "invalid value"},
		{[]string{"prune", "--older-than-days", "3", "--keep", "-1"}, "--keep must not be negative"},
		{[]string{"prune", "--older-than-days", "3", "extra"}, `unexpected argument "extra"`},
		{[]string{"expire", "--force"}, "flag provided but not defined: -force"},
	} {
		wantErr(t, runL(t, f.path, tc.args...), tc.msg, "Usage: mcp-changeset "+tc.args[0])
	}
	sameBytes(t, f.path, before, "usage errors")
}

func TestReconcile_AfterAProcessDiedMidApply(t *testing.T) {
	if testing.Short() {
		t.Skip("starts processes")
	}
	t.Parallel()
	f := populate(t)
	id := killMidApply(t, f.path)
	p := struct{ ChangeID string }{id}

	want(t, runL(t, f.path, "list", "--status", "applying"), exitOK, p.ChangeID)
	want(t, runL(t, f.path, "reconcile", p.ChangeID, "--note", "the write never reached the store"), exitDryRun, "applying → apply_failed")
	want(t, runL(t, f.path, "reconcile", p.ChangeID, "--note", "the write never reached the store", "--yes"), exitOK, "applying → apply_failed")
	r := runL(t, f.path, "show", p.ChangeID, "--json")
	want(t, r, exitOK)
	c := decode(t, r)["change"].(map[string]any)
	if c["status"] != "apply_failed" || !strings.HasPrefix(c["note"].(string), "the write never reached the store (operator:") {
		t.Errorf("after reconcile: %v", c)
	}
	want(t, runL(t, f.path, "check", "--stale-after", "1000d"), exitOK, "ok")
}

func TestReconcile_ClosesARunLeftUndoing(t *testing.T) {
	t.Parallel()
	f := populate(t)
	execSQL(t, f.path, "UPDATE runs SET status = 'undoing' WHERE id = '"+f.ids["run"]+"'")
	before := readFile(t, f.path)
	r := runL(t, f.path, "reconcile", f.ids["run"], "--note", "checked the notes by hand")
	want(t, r, exitDryRun, "would reconcile run "+f.ids["run"], "undoing → partially_undone")
	sameBytes(t, f.path, before, "reconcile of a run without --yes")
	want(t, runL(t, f.path, "reconcile", f.ids["run"], "--note", "checked the notes by hand", "--yes"), exitOK,
		"reconciled run "+f.ids["run"]+": undoing → partially_undone")
	wantErr(t, runL(t, f.path, "reconcile", f.ids["run"], "--note", "again", "--yes"), "cannot be reconciled (status: partially_undone)")
	wantErr(t, runL(t, f.path, "reconcile", "run_00000000000000000000", "--note", "x", "--yes"), "run run_00000000000000000000 not found")
}

// TestListingsAreCapped: expire and prune list at most defaultLimit rows
// and say how many they left out; --yes still acts on all of them.
func TestListingsAreCapped(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	path := filepath.Join(t.TempDir(), "ledger.db")
	clk := testkit.NewClock(time.Now().Add(-48 * time.Hour))
	g, err := changeset.New(nil, changeset.Options{LedgerPath: path, WriteMode: changeset.WriteGuarded, Clock: clk.Now})
	if err != nil {
		t.Fatal(err)
	}
	registerOps(g, &store{m: map[string]string{}})
	const n = defaultLimit + 37
	for i := range n {
		if _, err := g.Preview(ctx, "set", map[string]any{"key": fmt.Sprint("k", i), "value": "v"}); err != nil {
			t.Fatal(err)
		}
	}
	g.Close()

	r := runL(t, path, "expire")
	want(t, r, exitDryRun, fmt.Sprintf("would expire %d pending changes", n), "…and 37 changes not listed")
	if rows := strings.Count(r.stdout, "chg_"); rows != defaultLimit {
		t.Errorf("expire's dry run lists %d changes, want %d", rows, defaultLimit)
	}
	r = runL(t, path, "expire", "--yes")
	want(t, r, exitOK, fmt.Sprintf("expired %d changes", n), "…and 37 changes not listed")
	r = runL(t, path, "prune", "--older-than", "0")
	want(t, r, exitDryRun, fmt.Sprintf("would delete %d changes", n), "…and 37 changes not listed")
	if rows := strings.Count(r.stdout, "chg_"); rows != defaultLimit {
		t.Errorf("prune's dry run lists %d changes, want %d", rows, defaultLimit)
	}
	want(t, runL(t, path, "prune", "--older-than", "0", "--yes"), exitOK, fmt.Sprintf("deleted %d changes", n))
}
