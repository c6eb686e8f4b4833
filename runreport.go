package changeset

import (
	"encoding/json"
	"fmt"

	"github.com/mcp-changeset/changeset-go/internal/undoplan"
	"github.com/mcp-changeset/changeset-go/internal/voice"
	"github.com/mcp-changeset/changeset-go/ledger"
)

// RunReport says what undoing a run will do (a dry run) or did. A dry run
// carries the confirmation token that the real undo requires; the report of
// the real undo is stored with the run and returned again on every later
// request.
type RunReport struct {
	RunID  string `json:"run_id" jsonschema:"the run"`
	DryRun bool   `json:"dry_run" jsonschema:"true: nothing changed"`
	// Status is the run's status after this call.
	Status string `json:"status" jsonschema:"the run status now"`
	// WillUndo (dry run) and Undone (real undo) list the changes whose
	// inverse runs, newest first.
	WillUndo []RunStep `json:"will_undo,omitzero" jsonschema:"to be undone, newest first"`
	Undone   []RunStep `json:"undone,omitzero" jsonschema:"undone, newest first"`
	// NoNetChange lists changes whose resource the run itself brought back
	// to where it started (created then deleted): no write is needed.
	NoNetChange []RunStep `json:"no_net_change" jsonschema:"closed, no write"`
	// Skipped lists changes left as they are because their resource changed
	// after them, with the reason.
	Skipped []RunNote `json:"skipped" jsonschema:"kept, with why"`
	// Irreversible lists what cannot be undone exactly: changes without an
	// inverse or past their undo window (not undone), and the warnings of
	// changes that are undone but not exactly.
	Irreversible []RunNote `json:"irreversible" jsonschema:"not undone exactly"`
	// Failed lists changes whose undo was attempted and failed.
	Failed []RunNote `json:"failed,omitzero" jsonschema:"undo failed"`
	// NotCarriedOut lists, after a real undo, the changes of the reviewed
	// plan that were not undone after all (each is in Skipped or Failed
	// with the reason): their check failed right before the inverse.
	NotCarriedOut []string `json:"not_carried_out,omitzero" jsonschema:"change IDs planned, not undone"`
	// Notes say what the library could not know for certain, such as two
	// changes it related by their states because neither names a Resource.
	Notes []RunNote `json:"notes,omitzero" jsonschema:"uncertainties"`

	ConfirmationToken string `json:"confirmation_token,omitempty" jsonschema:"for the real undo"`
	ExpiresAt         string `json:"expires_at,omitempty" jsonschema:"when the token expires"`
	NextStep          string `json:"next_step,omitempty" jsonschema:"what to do next"`
	// Approval is the people's approval the real undo needs, under
	// person approval: requested by the dry run, bound to its plan.
	Approval *ApprovalRef `json:"approval,omitempty" jsonschema:"{id, url, needed}: a person approves at url"`
	// UndoneBy names who undid the run: "agent" or "person:<name>".
	UndoneBy string `json:"undone_by,omitempty" jsonschema:"who undid it"`
	// Note is an operator's note on a run whose undo was interrupted and
	// reconciled (see ledger.Ledger.ReconcileRun).
	Note string `json:"note,omitempty" jsonschema:"an operator note"`
	// Replayed is true when the run was already undone and this is the
	// stored report of that undo, returned again: nothing was done now.
	// ReplayNote then says when and by whom the undo ran.
	Replayed   bool   `json:"replayed,omitempty" jsonschema:"true: a stored report; nothing done now"`
	ReplayNote string `json:"replay_note,omitempty" jsonschema:"when and by whom it ran"`
}

// RunStep is one change in a run report.
type RunStep struct {
	ChangeID string `json:"change_id" jsonschema:"the change"`
	Action   string `json:"action" jsonschema:"the operation"`
	Summary  string `json:"summary" jsonschema:"what it did"`
	Resource string `json:"resource,omitempty" jsonschema:"what it changed"`
	// Resources names every resource of a change that names several
	// (Proposal.Resources); Resource is then empty.
	Resources []string `json:"resources,omitempty" jsonschema:"each resource, when several"`
	// Transactional is true for a transactional operation's change: its undo runs in
	// one database transaction with the other transactional undos around
	// it, and the dry run really ran it and rolled it back.
	Transactional bool `json:"transactional,omitempty" jsonschema:"undone in one database transaction"`
}

// RunNote is a change in a run report with the reason it is listed. For
// a skipped change, Drift says what the undo expected to find (the state
// the change left) and what it found, only for what moved: for a change
// that names several resources, each entry names its resource. It is
// empty when there is nothing to compare (no snapshot, no state).
type RunNote struct {
	ChangeID string `json:"change_id" jsonschema:"the change"`
	Action   string `json:"action" jsonschema:"the operation"`
	Resource string `json:"resource" jsonschema:"what it changed"`
	// Resources names every resource of a change that names several;
	// Resource is then empty.
	Resources []string `json:"resources,omitempty" jsonschema:"each resource, when several"`
	Summary   string   `json:"summary" jsonschema:"what it did"`
	Reason    string   `json:"reason" jsonschema:"why it is listed"`
	Drift     []Drift  `json:"drift" jsonschema:"what moved since the change"`
}

// Planned returns the IDs of the changes a dry run's plan acts on: those
// it will undo and those it closes as no net change. A page that shows the
// plan hands them back to UndoRunReviewed.
func (rep *RunReport) Planned() []string {
	var ids []string
	for _, s := range rep.WillUndo {
		ids = append(ids, s.ChangeID)
	}
	for _, s := range rep.NoNetChange {
		ids = append(ids, s.ChangeID)
	}
	return ids
}

// replayReport is the stored report of the undo of r, a run already
// undone, returned again: marked Replayed, with a note of when and by whom
// it ran, and nothing in it that asks for a next step.
func (g *Guard) replayReport(r *ledger.Run) (*RunReport, error) {
	rep, err := decodeReport(r.Report)
	if err != nil {
		return nil, err
	}
	if rep.UndoneBy == "" {
		rep.UndoneBy = r.UndoneBy
	}
	rep.DryRun, rep.Status, rep.Replayed = false, string(r.Status), true
	rep.ConfirmationToken, rep.ExpiresAt, rep.NextStep = "", "", ""
	rep.ReplayNote = g.voice.RunReplayed(string(r.Status), voice.Time(r.UpdatedAt), rep.UndoneBy)
	return rep, nil
}

// nothingToUndo is the report of a plan that undoes and closes nothing:
// it asks for no approval and, for a real undo, says nothing was done.
func (g *Guard) nothingToUndo(plan *undoplan.Plan, runID string, dryRun bool) *RunReport {
	rep := reportOf(g.voice, plan, runID, dryRun)
	rep.Status = string(ledger.RunOpen)
	rep.NextStep = g.voice.RunNothingToUndo(dryRun)
	return rep
}

// maxReportSummary caps a change's summary in a run report.
const maxReportSummary = 300

// reportOf renders a plan as a dry run's report (will_undo) or a real
// undo's (undone).
func reportOf(v *voice.Voice, p *undoplan.Plan, runID string, dryRun bool) *RunReport {
	rep := &RunReport{RunID: runID, DryRun: dryRun, NoNetChange: []RunStep{}, Skipped: []RunNote{}, Irreversible: []RunNote{}}
	undo := []RunStep{}
	for _, s := range p.Steps {
		c := s.C
		summary := voice.Cut(c.Summary, maxReportSummary)
		step := RunStep{ChangeID: c.ID, Action: c.Action, Summary: summary, Resource: c.Resource, Resources: c.Resources, Transactional: s.Op.Tx}
		note := func(reason string, drift []undoplan.Drift) RunNote {
			return RunNote{ChangeID: c.ID, Action: c.Action, Resource: c.Resource, Resources: c.Resources, Summary: summary, Reason: reason, Drift: boundDrift(v, drift)}
		}
		if s.Reviewed && (!s.CarriesOut() || s.Failed != "") {
			rep.NotCarriedOut = append(rep.NotCarriedOut, c.ID)
		}
		if s.LinkedTo != "" {
			rep.Notes = append(rep.Notes, note(v.ReasonLinked(s.LinkedTo), nil))
		}
		switch {
		case s.CarriesOut() && s.Failed != "":
			rep.Failed = append(rep.Failed, note(s.Failed, nil))
		case s.Verdict == undoplan.Undo:
			undo = append(undo, step)
			for _, w := range s.Warnings {
				rep.Irreversible = append(rep.Irreversible, note(w, nil))
			}
		case s.Verdict == undoplan.NoNetChange:
			rep.NoNetChange = append(rep.NoNetChange, step)
		case s.Verdict == undoplan.Skip:
			rep.Skipped = append(rep.Skipped, note(s.Reason, s.Drift))
		case s.Verdict == undoplan.Irreversible:
			rep.Irreversible = append(rep.Irreversible, note(s.Reason, s.Drift))
		}
	}
	if dryRun {
		rep.WillUndo = undo
	} else {
		rep.Undone = undo
	}
	return rep
}

func decodeReport(stored json.RawMessage) (*RunReport, error) {
	var rep RunReport
	if err := json.Unmarshal(stored, &rep); err != nil {
		return nil, fmt.Errorf("decode stored run report: %w", err)
	}
	return &rep, nil
}
