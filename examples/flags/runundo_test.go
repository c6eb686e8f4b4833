package main

import (
	"strings"
	"testing"

	"github.com/mcp-changeset/changeset-go/examples/internal/exampletest"
)

// TestRunUndo_KeepsTheRolloutAPersonSetBack is the intermediate-value
// case: in one run the agent sets a rollout 10→50 (c1) and then 50→100
// (c2); a person decides 100 is too much and sets it back to 50 by hand.
// The person's 50 must survive the run's undo. c2 is kept because its
// flag moved, and c1 is kept because c2 keeps the flag, even though the
// flag's state (50) equals what c1 left: undoing c1 would set 10 over
// the person's deliberate 50.
func TestRunUndo_KeepsTheRolloutAPersonSetBack(t *testing.T) {
	c, path := start(t, `{"beta": {"enabled": true, "rollout": 10, "description": ""}}`)
	run := c.StartRun("Roll out beta")
	c1, _ := c.PreviewRun("update_flag", map[string]any{"name": "beta", "rollout": 50, "run_id": run})
	c.Apply(c1)
	c2, _ := c.PreviewRun("update_flag", map[string]any{"name": "beta", "rollout": 100, "run_id": run})
	c.Apply(c2)
	write(t, path, `{"beta": {"enabled": true, "rollout": 50, "description": ""}}`) // the person's edit

	dry := c.DryRun(run)
	if len(dry.WillUndo) != 0 || len(dry.Skipped) != 2 {
		t.Fatalf("dry run plans %v and skips %d, want nothing planned and both skipped: %+v", exampletest.IDs(dry.WillUndo), len(dry.Skipped), dry)
	}
	n2, ok2 := exampletest.SkippedNote(dry, c2.ChangeID)
	n1, ok1 := exampletest.SkippedNote(dry, c1.ChangeID)
	if !ok1 || !ok2 {
		t.Fatalf("skipped = %+v, want both %s and %s", dry.Skipped, c1.ChangeID, c2.ChangeID)
	}
	if len(n2.Drift) != 1 || n2.Drift[0].Field != "rollout" || string(n2.Drift[0].Expected) != "100" || string(n2.Drift[0].Found) != "50" {
		t.Errorf("c2's drift = %+v, want rollout 100 → 50", n2.Drift)
	}
	if !strings.Contains(n1.Reason, c2.ChangeID) {
		t.Errorf("c1's reason does not name the newer change that keeps the flag (%s): %q", c2.ChangeID, n1.Reason)
	}

	if dry.ConfirmationToken != "" || !strings.HasPrefix(dry.NextStep, "Nothing to undo") {
		t.Errorf("a dry run with nothing to undo gave a token or asked for approval: %+v", dry)
	}
	rep := c.UndoRun(run, dry.ConfirmationToken)
	if len(rep.Undone) != 0 || rep.Status != "open" {
		t.Fatalf("undo = %+v, want nothing undone and the run open", rep)
	}
	if got := flags(t, c); got != "beta on 50 " {
		t.Fatalf("flags after the run's undo = %q, want the person's rollout of 50", got)
	}
	for _, id := range []string{c1.ChangeID, c2.ChangeID} {
		if st := c.Status(id); st != "applied" {
			t.Errorf("change %s is %s after the run's undo, want applied (kept)", id, st)
		}
	}
}
