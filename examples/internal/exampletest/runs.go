package exampletest

import (
	"strings"

	changeset "github.com/mcp-changeset/changeset-go"
)

// The run report types are the library's own: undo_run's result decodes
// into them.
type (
	RunReport = changeset.RunReport
	RunStep   = changeset.RunStep
	RunNote   = changeset.RunNote
	Drift     = changeset.Drift
)

// IDs returns the change IDs of steps, in order.
func IDs(steps []RunStep) []string {
	ids := []string{}
	for _, s := range steps {
		ids = append(ids, s.ChangeID)
	}
	return ids
}

// Planned returns the IDs of every change a report names, in any of its
// lists: for a dry run, the changes its plan decided about.
func Planned(r RunReport) map[string]bool {
	ids := map[string]bool{}
	for _, steps := range [][]RunStep{r.WillUndo, r.Undone, r.NoNetChange} {
		for _, s := range steps {
			ids[s.ChangeID] = true
		}
	}
	for _, notes := range [][]RunNote{r.Skipped, r.Irreversible, r.Failed} {
		for _, n := range notes {
			ids[n.ChangeID] = true
		}
	}
	return ids
}

// SkippedNote returns the skipped entry for change id, if any.
func SkippedNote(r RunReport, id string) (RunNote, bool) {
	for _, n := range r.Skipped {
		if n.ChangeID == id {
			return n, true
		}
	}
	return RunNote{}, false
}

// RunChange is one change in get_run's result.
type RunChange struct {
	ChangeID string `json:"change_id"`
	Action   string `json:"action"`
	Status   string `json:"status"`
	RunID    string `json:"run_id"`
}

// RunDetail is the result of get_run.
type RunDetail struct {
	RunID   string      `json:"run_id"`
	Label   string      `json:"label"`
	Status  string      `json:"status"`
	Kind    string      `json:"kind"`
	Changes []RunChange `json:"changes"`
	Report  *RunReport  `json:"report"`
}

// StartRun calls start_run and returns the run's ID.
func (c *Client) StartRun(label string) string {
	c.t.Helper()
	out := c.Must("start_run", map[string]any{"label": label})
	id, _ := out["run_id"].(string)
	if id == "" || out["status"] != "open" {
		c.t.Fatalf("start_run: unexpected result %v", out)
	}
	return id
}

// PreviewRun calls preview_<op> like Preview and also returns the run the
// change joined (the result's run_id).
func (c *Client) PreviewRun(op string, args map[string]any) (Preview, string) {
	c.t.Helper()
	out := c.Must("preview_"+op, args)
	var p Preview
	Decode(c.t, out, &p)
	if p.Status != "preview" || p.ChangeID == "" || p.ConfirmationToken == "" {
		c.t.Fatalf("preview_%s: unexpected result %+v", op, p)
	}
	runID, _ := out["run_id"].(string)
	return p, runID
}

// DryRun calls undo_run with dry_run left to its default and fails the
// test unless it is a dry run with a confirmation token.
func (c *Client) DryRun(runID string) RunReport {
	c.t.Helper()
	var r RunReport
	Decode(c.t, c.Must("undo_run", map[string]any{"run_id": runID}), &r)
	// A plan that undoes and closes nothing asks for no approval: no token,
	// and a next step that says there is nothing to undo.
	empty := len(r.WillUndo) == 0 && len(r.NoNetChange) == 0
	if !r.DryRun || r.RunID != runID || (r.ConfirmationToken == "") != empty || empty != strings.HasPrefix(r.NextStep, "Nothing to undo") {
		c.t.Fatalf("undo_run dry run: unexpected result %+v", r)
	}
	return r
}

// UndoRun calls undo_run with dry_run=false and the dry run's token; ""
// (a dry run with nothing to undo gives none) sends none.
func (c *Client) UndoRun(runID, token string) RunReport {
	c.t.Helper()
	var r RunReport
	args := map[string]any{"run_id": runID, "dry_run": false}
	if token != "" {
		args["confirmation_token"] = token
	}
	Decode(c.t, c.Must("undo_run", args), &r)
	if r.DryRun || r.RunID != runID {
		c.t.Fatalf("undo_run: unexpected result %+v", r)
	}
	return r
}

// GetRun calls get_run.
func (c *Client) GetRun(runID string) RunDetail {
	c.t.Helper()
	var d RunDetail
	Decode(c.t, c.Must("get_run", map[string]any{"run_id": runID}), &d)
	return d
}
