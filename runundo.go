package changeset

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"time"

	"github.com/mcp-changeset/changeset-go/internal/undoplan"
	"github.com/mcp-changeset/changeset-go/internal/voice"
	"github.com/mcp-changeset/changeset-go/ledger"
	"github.com/modelcontextprotocol/go-sdk/mcp"
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

// UndoRun undoes a run on behalf of a person acting through trusted code,
// without a token. With dryRun it only reports what the undo would do and
// changes nothing. Without it, it plans the undo afresh and carries that
// plan out at once: use it only where nobody reviews the plan; a page that
// showed a person a dry run should confirm with UndoRunReviewed, so that
// what runs is what the person saw. by names the person (see Person) and is
// recorded with the run and every change it undoes. Unlike the agent's
// undo_run it ignores scopes: trusted code sees every run.
//
// A run already undone (undone or partially_undone) is not undone again:
// UndoRun returns the stored report of its undo with Replayed set and a
// ReplayNote of when and by whom it ran, as the agent's undo_run does.
//
// A plan that undoes and closes nothing (every change is skipped or
// irreversible, or none is applied) needs no approval: its dry run says
// "Nothing to undo" in NextStep, and the agent's undo_run issues no
// confirmation token for it; the agent's real undo of such a plan without
// a token then changes nothing, leaves the run open and returns the plan's
// report, whose NextStep says nothing was done (with the token of an
// earlier dry run whose plan did undo something, it is refused because the
// plan changed). UndoRun without dryRun, called by
// a person, still closes such a run without a write (undone when nothing
// of it is left, partially_undone otherwise), so that a person can close a
// run whose changes were each undone or kept on their own.
func (g *Guard) UndoRun(ctx context.Context, runID string, dryRun bool, by string) (*RunReport, error) {
	if by == "" {
		by = Person("unknown")
	}
	r, err := g.getRun(ctx, runID)
	if err != nil {
		return nil, err
	}
	return g.undoRun(ctx, r, dryRun, "", byTrusted, by, nil)
}

// UndoRunReviewed undoes a run as a person reviewed it: reviewed lists the
// changes of the dry run the person confirmed (RunReport.Planned). Only
// those changes are undone, each checked again right before its inverse;
// a change the undo would now also take back is left alone and reported,
// and a reviewed change whose check fails is skipped and reported in
// NotCarriedOut. Trusted code only, as UndoRun.
func (g *Guard) UndoRunReviewed(ctx context.Context, runID string, reviewed []string, by string) (*RunReport, error) {
	if by == "" {
		by = Person("unknown")
	}
	r, err := g.getRun(ctx, runID)
	if err != nil {
		return nil, err
	}
	set := map[string]bool{}
	for _, id := range reviewed {
		set[id] = true
	}
	return g.undoRun(ctx, r, false, "", byTrusted, by, set)
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

// undoRunTool is undo_run for the agent.
func (g *Guard) undoRunTool(ctx context.Context, req *mcp.CallToolRequest, runID string, dryRun bool, token string) (*RunReport, error) {
	r, err := g.scopedRun(ctx, req, runID)
	if err != nil {
		return nil, err
	}
	by, err := g.agentBy(ctx, req)
	if err != nil {
		return nil, err
	}
	return g.undoRun(g.withPrincipal(ctx, req), r, dryRun, token, byToken, by, nil)
}

// undoRun is the one path of a run's undo. The real undo plans the run,
// refuses unless the plan is the one the token was issued for, claims the
// run and carries out that same plan; reviewed, when not nil, narrows
// what it carries out to the changes a person confirmed. auth is what
// lets the real undo through: the dry run's token (byToken), or a person
// acting through trusted code (byTrusted).
func (g *Guard) undoRun(ctx context.Context, r *ledger.Run, dryRun bool, token string, auth authority, by string, reviewed map[string]bool) (*RunReport, error) {
	ctx, end := g.start(ctx, Event{Step: StepUndoRun, RunID: r.ID, DryRun: dryRun})
	rep, err := g.undoRunStep(ctx, r, dryRun, token, auth, by, reviewed)
	if end != nil {
		out := Outcome{RunID: r.ID, Err: err, Failure: failureKind(err)}
		if rep != nil {
			out.Status = rep.Status
		}
		end(out)
	}
	return rep, err
}

func (g *Guard) undoRunStep(ctx context.Context, r *ledger.Run, dryRun bool, token string, auth authority, by string, reviewed map[string]bool) (*RunReport, error) {
	switch r.Status {
	case ledger.RunUndone, ledger.RunPartiallyUndone:
		return g.replayReport(r)
	case ledger.RunUndoing:
		return nil, g.runBusy(r.ID)
	}
	if !dryRun && !g.WritesEnabled() {
		return nil, &WritesDisabledError{EnvVar: g.opts.WriteModeEnv}
	}
	plan, err := g.planRun(ctx, r)
	if err != nil {
		return nil, err
	}
	if dryRun {
		return g.dryRunReport(ctx, r, plan, auth)
	}
	if len(plan.Actions()) == 0 && auth == byToken && token == "" {
		// Nothing to approve, so no token was issued. A caller holding the
		// token of an earlier plan is told below that the plan changed.
		return g.nothingToUndo(plan, r.ID, false), nil
	}
	if auth == byToken && !validToken(token, confirmPrefix) {
		return nil, refuse(ErrInvalidToken, "", "%s", g.voice.RunNeedsToken(r.ID))
	}
	stored, err := g.claimRun(ctx, r, plan, token, auth, by)
	if err != nil || stored != nil {
		return stored, err
	}
	if reviewed == nil {
		reviewed = plan.Actions()
	}
	return g.executeRun(ctx, r, plan, reviewed, by)
}

func (g *Guard) runBusy(id string) error {
	return refuse(ErrBusy, "", "%s", g.voice.RunBusy(id))
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
	rep.ReplayNote = g.voice.RunReplayed(string(r.Status), formatTime(r.UpdatedAt), rep.UndoneBy)
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
		summary := cut(c.Summary, maxReportSummary)
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

// dryRunReport stores a fresh confirmation token bound to the plan (the
// agent's dry run) and returns the plan as a report. It undoes nothing.
// A dry run for trusted code (byTrusted) stores no token.
func (g *Guard) dryRunReport(ctx context.Context, r *ledger.Run, plan *undoplan.Plan, auth authority) (*RunReport, error) {
	if len(plan.Actions()) == 0 {
		return g.nothingToUndo(plan, r.ID, true), nil // no token: there is nothing to approve
	}
	rep := reportOf(g.voice, plan, r.ID, true)
	rep.Status = string(ledger.RunOpen)
	if auth == byTrusted {
		return rep, nil
	}
	token := newToken(confirmPrefix)
	expires := g.now().Add(g.opts.TTL)
	// Storing a dry run's token claims nothing: a lost one is a dry run to
	// redo.
	err := g.ledger.WithLazyTx(ctx, func(tx *ledger.Tx) error {
		cur, err := tx.Run(r.ID)
		if err != nil {
			return err
		}
		if cur.Status != ledger.RunOpen {
			return refuse(ErrBusy, "", "%s", g.voice.RunMoved(r.ID, string(cur.Status)))
		}
		cur.PlanHash = plan.Hash
		cur.ConfirmHash = tokenDigest(purposeRunUndo, cur.ID, plan.Hash, token)
		cur.ConfirmExpiresAt, cur.UpdatedAt = expires, g.now()
		return tx.UpdateRun(cur, ledger.RunOpen)
	})
	if err != nil {
		return nil, err
	}
	rep.ConfirmationToken, rep.ExpiresAt = token, formatTime(expires)
	rep.NextStep = g.voice.RunDryRunNext()
	return rep, nil
}

// claimRun moves the run from open to undoing: one claim per run, whatever
// the number of processes. The agent's claim needs the dry run's token and
// the same plan the token was issued for (byToken); the user's approval
// (byUser) was checked against the plan by approveUndoRun, and a person
// acting through trusted code (byTrusted) needs neither. When another
// request finished undoing the run meanwhile, claimRun returns that undo's
// stored report, replayed.
func (g *Guard) claimRun(ctx context.Context, r *ledger.Run, plan *undoplan.Plan, token string, auth authority, by string) (*RunReport, error) {
	byTok := auth == byToken
	var refusal error
	var stored *ledger.Run
	err := g.ledger.WithTx(ctx, func(tx *ledger.Tx) error {
		refusal, stored = nil, nil // WithTx may run this again
		cur, err := tx.Run(r.ID)
		if err != nil {
			return err
		}
		now := g.now()
		switch {
		case cur.Status == ledger.RunUndone || cur.Status == ledger.RunPartiallyUndone:
			stored = cur
			return nil
		case cur.Status == ledger.RunUndoing:
			refusal = g.runBusy(r.ID)
			return nil
		case cur.Status != ledger.RunOpen:
			refusal = refuse(ErrWrongStatus, "", "%s", g.voice.RunNotUndoable(r.ID, string(cur.Status)))
			return nil
		case byTok && !tokenMatches(cur.ConfirmHash, purposeRunUndo, cur.ID, cur.PlanHash, token):
			refusal = refuse(ErrInvalidToken, "", "%s", g.voice.RunTokenInvalid(r.ID))
			return nil
		case byTok && !now.Before(cur.ConfirmExpiresAt):
			refusal = refuse(ErrExpired, "", "%s", g.voice.RunDryRunExpired(r.ID, formatTime(cur.ConfirmExpiresAt)))
			return nil
		case byTok && cur.PlanHash != plan.Hash:
			refusal = refuse(ErrPlanChanged, "", "%s", g.voice.RunPlanChanged(r.ID))
			return nil
		}
		cur.Status, cur.UndoneBy, cur.UpdatedAt = ledger.RunUndoing, by, now
		cur.PlanHash, cur.ConfirmHash, cur.ConfirmExpiresAt = "", "", time.Time{}
		return tx.UpdateRun(cur, ledger.RunOpen)
	})
	switch {
	case errors.Is(err, ledger.ErrConflict):
		return nil, g.runBusy(r.ID)
	case err != nil:
		return nil, err
	case stored != nil:
		return g.replayReport(stored)
	}
	return nil, refusal
}

func decodeReport(stored json.RawMessage) (*RunReport, error) {
	var rep RunReport
	if err := json.Unmarshal(stored, &rep); err != nil {
		return nil, fmt.Errorf("decode stored run report: %w", err)
	}
	return &rep, nil
}
