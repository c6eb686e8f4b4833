package main

import (
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"github.com/mcp-changeset/changeset-go/examples/internal/exampletest"
)

// The tests in this file walk the quickstart's runs as a new user would,
// through a real MCP client and the real server process: the undo a person
// confirms carries out the plan its dry run showed, or less, never more.

func set(t *testing.T, c *exampletest.Client, runID, key, value string) string {
	t.Helper()
	args := map[string]any{"key": key, "value": value}
	if runID != "" {
		args["run_id"] = runID
	}
	p, joined := c.PreviewRun("set_setting", args)
	if runID != "" && joined != runID {
		t.Fatalf("preview with run_id %s joined run %q", runID, joined)
	}
	c.Apply(p)
	return p.ChangeID
}

// TestRunPlan_TwoEditsOfOneSettingAreUndoneAsReviewed is the first
// scenario: theme light→dark→blue in one run, no Resource named. The dry
// run plans both undos, and the real undo does exactly that.
func TestRunPlan_TwoEditsOfOneSettingAreUndoneAsReviewed(t *testing.T) {
	c := exampletest.Start(t, "settings", nil, exampletest.Guarded)
	c.HasTools("start_run", "get_run", "undo_run")
	run := c.StartRun("Theme")
	dark := set(t, c, run, "theme", "dark")
	blue := set(t, c, run, "theme", "blue")

	dry := c.DryRun(run)
	if got := exampletest.IDs(dry.WillUndo); !slices.Equal(got, []string{blue, dark}) {
		t.Fatalf("will_undo = %v, want [%s %s] (newest first); skipped: %+v", got, blue, dark, dry.Skipped)
	}
	if len(dry.Skipped) != 0 || len(dry.Irreversible) != 0 || dry.Status != "open" {
		t.Fatalf("dry run = %+v", dry)
	}
	if settings(t, c)["theme"] != "blue" {
		t.Fatal("the dry run changed the setting")
	}

	rep := c.UndoRun(run, dry.ConfirmationToken)
	if got := exampletest.IDs(rep.Undone); !slices.Equal(got, exampletest.IDs(dry.WillUndo)) {
		t.Fatalf("undone = %v, want exactly the reviewed will_undo %v; report %+v", got, exampletest.IDs(dry.WillUndo), rep)
	}
	if rep.Status != "undone" || len(rep.Skipped) != 0 || len(rep.NotCarriedOut) != 0 {
		t.Fatalf("report = %+v", rep)
	}
	if got := settings(t, c); got["theme"] != "light" || got["language"] != "en" {
		t.Fatalf("settings after the undo = %v, want theme light", got)
	}
	if d := c.GetRun(run); d.Status != "undone" || d.Kind != "task" || d.Report == nil || !slices.Equal(exampletest.IDs(d.Report.Undone), []string{blue, dark}) {
		t.Fatalf("get_run = %+v", d)
	}
	for _, id := range []string{dark, blue} {
		if s := c.Status(id); s != "undone" {
			t.Errorf("change %s is %s, want undone", id, s)
		}
	}
	// A second confirm returns the stored report and undoes nothing more.
	again := c.UndoRun(run, dry.ConfirmationToken)
	if !slices.Equal(exampletest.IDs(again.Undone), exampletest.IDs(rep.Undone)) || again.Status != "undone" {
		t.Fatalf("second confirm = %+v", again)
	}
}

// TestRunPlan_PreviewsWithoutARunJoinTheSessionRun: an agent that never
// calls start_run still leaves one run that undoes everything it did.
func TestRunPlan_PreviewsWithoutARunJoinTheSessionRun(t *testing.T) {
	c := exampletest.Start(t, "settings", nil, exampletest.Guarded)
	first, run := c.PreviewRun("set_setting", map[string]any{"key": "theme", "value": "dark"})
	c.Apply(first)
	second, run2 := c.PreviewRun("set_setting", map[string]any{"key": "language", "value": "fr"})
	c.Apply(second)
	if run == "" || run2 != run {
		t.Fatalf("previews without run_id joined runs %q and %q, want one session run", run, run2)
	}
	d := c.GetRun(run)
	if d.Kind != "session" || d.Status != "open" || len(d.Changes) != 2 {
		t.Fatalf("session run = %+v", d)
	}
	if !strings.Contains(d.Label, "exampletest") {
		t.Errorf("session run label %q does not name the client", d.Label)
	}

	dry := c.DryRun(run)
	if got := exampletest.IDs(dry.WillUndo); !slices.Equal(got, []string{second.ChangeID, first.ChangeID}) {
		t.Fatalf("will_undo = %v; report %+v", got, dry)
	}
	rep := c.UndoRun(run, dry.ConfirmationToken)
	if !slices.Equal(exampletest.IDs(rep.Undone), exampletest.IDs(dry.WillUndo)) || rep.Status != "undone" {
		t.Fatalf("report = %+v", rep)
	}
	if got := settings(t, c); got["theme"] != "light" || got["language"] != "en" {
		t.Fatalf("settings after the undo = %v", got)
	}
	// The next preview starts a new session run: the undone one is closed.
	p, next := c.PreviewRun("set_setting", map[string]any{"key": "theme", "value": "dark"})
	if next == "" || next == run {
		t.Fatalf("a preview after the session run was undone joined %q (the undone run is %s)", next, run)
	}
	c.Apply(p)
}

// TestRunPlan_AChangeAppliedAfterTheDryRunRefusesItsConfirm: a pending
// change of the run applied after the dry run changes what the undo would
// do, so the confirm is refused and undoes nothing; the run stays open and
// a new dry run reviews the change. (A change that lands while the confirm
// is already under way is left alone and reported instead: the notes
// example's race test covers that window.)
func TestRunPlan_AChangeAppliedAfterTheDryRunRefusesItsConfirm(t *testing.T) {
	c := exampletest.Start(t, "settings", nil, exampletest.Guarded)
	run := c.StartRun("Theme and language")
	dark := set(t, c, run, "theme", "dark")
	late, _ := c.PreviewRun("set_setting", map[string]any{"key": "language", "value": "fr", "run_id": run})

	dry := c.DryRun(run)
	if got := exampletest.IDs(dry.WillUndo); !slices.Equal(got, []string{dark}) {
		t.Fatalf("will_undo = %v, want only the applied change", got)
	}
	c.Apply(late)
	c.Refused("undo_run", map[string]any{"run_id": run, "dry_run": false, "confirmation_token": dry.ConfirmationToken}, "has changed since the dry run")
	if got := settings(t, c); got["theme"] != "dark" || got["language"] != "fr" {
		t.Fatalf("settings after the refused confirm = %v, want nothing undone", got)
	}
	if d := c.GetRun(run); d.Status != "open" || d.Report != nil {
		t.Fatalf("run after the refused confirm = %+v, want open with no report", d)
	}
	for _, id := range []string{dark, late.ChangeID} {
		if s := c.Status(id); s != "applied" {
			t.Errorf("change %s is %s, want applied", id, s)
		}
	}

	dry2 := c.DryRun(run)
	if got := exampletest.IDs(dry2.WillUndo); !slices.Equal(got, []string{late.ChangeID, dark}) {
		t.Fatalf("second dry run will_undo = %v, want both, newest first", got)
	}
	rep := c.UndoRun(run, dry2.ConfirmationToken)
	if rep.Status != "undone" || !slices.Equal(exampletest.IDs(rep.Undone), exampletest.IDs(dry2.WillUndo)) {
		t.Fatalf("second undo = %+v", rep)
	}
	if got := settings(t, c); got["theme"] != "light" || got["language"] != "en" {
		t.Fatalf("settings = %v", got)
	}
}

// startShared serves one settings store over Streamable HTTP, so that two
// clients (two sessions of one identity) edit the same settings.
func startShared(t *testing.T) (a, b *exampletest.Client) {
	t.Helper()
	const token = "alice-0123456789abcdef0123456789ab"
	tokens := filepath.Join(t.TempDir(), "tokens")
	if err := os.WriteFile(tokens, []byte(token+" alice\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	p := exampletest.StartHTTP(t, "settings", []string{"--http", "127.0.0.1:0", "--auth-token-file", tokens}, exampletest.Guarded)
	return p.Connect(t, token), p.Connect(t, token)
}

func wantDrift(t *testing.T, n exampletest.RunNote, expected, found string) {
	t.Helper()
	if len(n.Drift) != 1 || n.Drift[0].Field != "" || string(n.Drift[0].Expected) != expected || string(n.Drift[0].Found) != found {
		t.Errorf("drift of %s = %+v, want one entry {field: \"\", expected: %s, found: %s}", n.ChangeID, n.Drift, expected, found)
	}
	if !strings.Contains(n.Reason, found) {
		t.Errorf("reason of %s does not quote the value found (%s): %q", n.ChangeID, found, n.Reason)
	}
}

// TestRunPlan_AnotherSessionsEditIsSkippedWithItsDrift: a second client
// sets the theme after the run did; the run's undo leaves it alone, and
// each skip says what it expected and what it found.
func TestRunPlan_AnotherSessionsEditIsSkippedWithItsDrift(t *testing.T) {
	a, b := startShared(t)
	run := a.StartRun("Theme")
	dark := set(t, a, run, "theme", "dark")
	blue := set(t, a, run, "theme", "blue")
	other, otherRun := b.PreviewRun("set_setting", map[string]any{"key": "theme", "value": "green"})
	b.Apply(other)
	if otherRun == "" || otherRun == run {
		t.Fatalf("the other session's change joined run %q (the task run is %s)", otherRun, run)
	}

	dry := a.DryRun(run)
	if len(dry.WillUndo) != 0 || len(dry.Skipped) != 2 {
		t.Fatalf("dry run = %+v, want both changes skipped", dry)
	}
	if dry.Skipped[0].ChangeID != blue || dry.Skipped[1].ChangeID != dark {
		t.Fatalf("skipped = %+v, want [%s %s]", dry.Skipped, blue, dark)
	}
	wantDrift(t, dry.Skipped[0], `"blue"`, `"green"`)
	wantDrift(t, dry.Skipped[1], `"dark"`, `"green"`)
	if !strings.Contains(dry.Skipped[1].Reason, blue) {
		t.Errorf("the older change's reason does not name the newer change that holds it (%s): %q", blue, dry.Skipped[1].Reason)
	}
	for _, n := range dry.Skipped {
		if n.Action != "set_setting" || n.Summary == "" {
			t.Errorf("skip entry lacks action or summary: %+v", n)
		}
	}
	rep := a.UndoRun(run, dry.ConfirmationToken) // none: nothing is to be undone
	if len(rep.Undone) != 0 || rep.Status != "open" || len(rep.NotCarriedOut) != 0 || len(rep.Skipped) != 2 {
		t.Fatalf("undo = %+v, want nothing done, both changes still reported skipped, the run open", rep)
	}
	if got := settings(t, a)["theme"]; got != "green" {
		t.Fatalf("theme = %v, want the other session's green kept", got)
	}
	for id, want := range map[string]string{dark: "applied", blue: "applied", other.ChangeID: "applied"} {
		if s := a.Status(id); s != want {
			t.Errorf("change %s is %s, want %s", id, s, want)
		}
	}
}

// TestRunPlan_AnEditAfterTheReviewIsNotOverwritten: the other client's
// edit lands between the dry run and its confirm. The confirm is refused
// (the plan changed) and overwrites nothing; the new dry run skips both
// changes and says what it found.
func TestRunPlan_AnEditAfterTheReviewIsNotOverwritten(t *testing.T) {
	a, b := startShared(t)
	run := a.StartRun("Theme")
	dark := set(t, a, run, "theme", "dark")
	blue := set(t, a, run, "theme", "blue")
	dry := a.DryRun(run)
	if got := exampletest.IDs(dry.WillUndo); !slices.Equal(got, []string{blue, dark}) {
		t.Fatalf("will_undo = %v", got)
	}
	set(t, b, "", "theme", "green")

	a.Refused("undo_run", map[string]any{"run_id": run, "dry_run": false, "confirmation_token": dry.ConfirmationToken}, "has changed since the dry run")
	if got := settings(t, a)["theme"]; got != "green" {
		t.Fatalf("theme = %v, want green kept", got)
	}
	if s := a.GetRun(run).Status; s != "open" {
		t.Fatalf("run status = %s, want open", s)
	}
	dry2 := a.DryRun(run)
	if len(dry2.WillUndo) != 0 || len(dry2.Skipped) != 2 {
		t.Fatalf("second dry run = %+v, want both skipped", dry2)
	}
	nb, _ := exampletest.SkippedNote(dry2, blue)
	wantDrift(t, nb, `"blue"`, `"green"`)
	rep := a.UndoRun(run, dry2.ConfirmationToken) // none: nothing is to be undone
	if len(rep.Undone) != 0 || rep.Status != "open" || len(rep.Skipped) != 2 {
		t.Fatalf("undo = %+v, want nothing done and the run open", rep)
	}
	if got := settings(t, a)["theme"]; got != "green" {
		t.Fatalf("theme = %v, want green kept", got)
	}
}
