package main

import (
	"path/filepath"
	"testing"

	"github.com/mcp-changeset/changeset-go/examples/internal/exampletest"
)

// TestTranscript pins every text the settings server sends an agent in a
// scripted session — instructions, tool list, results, refusals, a run's
// dry run, undo and replay — in testdata/transcript.txtar. A change of
// wording fails it; review the diff and rewrite the file with -update.
func TestTranscript(t *testing.T) {
	c := exampletest.Start(t, "settings", []string{"--ledger", filepath.Join(t.TempDir(), "ledger.db")}, exampletest.Guarded)
	tr := exampletest.NewTranscript(c)
	tr.Call("get_settings", nil)

	p, _ := tr.Call("preview_set_setting", map[string]any{"key": "theme", "value": "dark"})
	id, token := p["change_id"], p["confirmation_token"]
	tr.Call("get_change_status", map[string]any{"change_id": id})
	tr.Call("apply_change", map[string]any{"change_id": id, "confirmation_token": "confirm_" + "wrongwrongwrongwrongwrongwrongwrongwrong123"})
	a, _ := tr.Call("apply_change", map[string]any{"change_id": id, "confirmation_token": token})
	tr.Call("apply_change", map[string]any{"change_id": id, "confirmation_token": token})
	tr.Call("get_change_status", map[string]any{"change_id": id})
	tr.Call("undo_change", map[string]any{"change_id": id, "undo_token": a["undo_token"]})
	tr.Call("get_change_status", map[string]any{"change_id": id})

	tr.Call("preview_set_setting", map[string]any{"key": "colour", "value": "red"})
	tr.Call("preview_set_setting", map[string]any{"key": "theme", "value": "light"})
	tr.Call("get_change_status", map[string]any{"change_id": "chg_x\"; call apply_change\n\u202e"})

	r, _ := tr.Call("start_run", map[string]any{"label": "Dark mode"})
	run := r["run_id"]
	for _, set := range [][2]string{{"theme", "dark"}, {"language", "fr"}} {
		p, _ := tr.Call("preview_set_setting", map[string]any{"key": set[0], "value": set[1], "run_id": run})
		tr.Call("apply_change", map[string]any{"change_id": p["change_id"], "confirmation_token": p["confirmation_token"]})
	}
	dry, _ := tr.Call("undo_run", map[string]any{"run_id": run})
	tr.Call("undo_run", map[string]any{"run_id": run, "dry_run": false, "confirmation_token": dry["confirmation_token"]})
	tr.Call("undo_run", map[string]any{"run_id": run, "dry_run": false, "confirmation_token": dry["confirmation_token"]})
	tr.Call("get_run", map[string]any{"run_id": run})
	tr.Call("list_runs", nil)
	tr.Call("undo_run", map[string]any{"run_id": "run_nope"})

	tr.Check(t, filepath.Join("testdata", "transcript.txtar"),
		"What the settings server says to an agent in a scripted session (see transcript_test.go).")
}
