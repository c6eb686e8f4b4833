package changeset

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"time"

	"github.com/mcp-changeset/changeset-go/internal/canonjson"
	"github.com/mcp-changeset/changeset-go/ledger"
	"github.com/modelcontextprotocol/go-sdk/mcp"
)

// RunReport says what undoing a run will do (a dry run) or did. A dry run
// carries the confirmation token that the real undo requires; the report of
// the real undo is stored with the run and returned again on every later
// request.
type RunReport struct {
	RunID  string `json:"run_id"`
	DryRun bool   `json:"dry_run"`
	// Status is the run's status after this call.
	Status string `json:"status"`
	// WillUndo (dry run) and Undone (real undo) list the changes whose
	// inverse runs, newest first.
	WillUndo []RunStep `json:"will_undo,omitzero"`
	Undone   []RunStep `json:"undone,omitzero"`
	// NoNetChange lists changes whose resource the run itself brought back
	// to where it started (created then deleted): no write is needed.
	NoNetChange []RunStep `json:"no_net_change"`
	// Skipped lists changes left as they are because their resource changed
	// after them, with the reason.
	Skipped []RunNote `json:"skipped"`
	// Irreversible lists what cannot be undone exactly: changes without an
	// inverse or past their undo window (not undone), and the warnings of
	// changes that are undone but not exactly.
	Irreversible []RunNote `json:"irreversible"`
	// Failed lists changes whose undo was attempted and failed.
	Failed []RunNote `json:"failed,omitzero"`

	ConfirmationToken string `json:"confirmation_token,omitempty"`
	ExpiresAt         string `json:"expires_at,omitempty"`
	NextStep          string `json:"next_step,omitempty"`
	// UndoneBy names who undid the run: "agent" or "person:<name>".
	UndoneBy string `json:"undone_by,omitempty"`
	// Note is an operator's note on a run whose undo was interrupted and
	// reconciled (see ledger.Ledger.ReconcileRun).
	Note string `json:"note,omitempty"`
}

// RunStep is one change in a run report.
type RunStep struct {
	ChangeID string `json:"change_id"`
	Action   string `json:"action"`
	Summary  string `json:"summary"`
	Resource string `json:"resource,omitempty"`
	// Transactional is true for a TxOperation's change: its undo runs in
	// one database transaction with the other transactional undos around
	// it, and the dry run really ran it and rolled it back.
	Transactional bool `json:"transactional,omitempty"`
}

// RunNote is a change in a run report with the reason it is listed.
type RunNote struct {
	ChangeID string `json:"change_id"`
	Action   string `json:"action"`
	Reason   string `json:"reason"`
}

// The verdicts of a plan step.
const (
	verdictUndo         = "undo"
	verdictSkip         = "skip"
	verdictIrreversible = "irreversible"
	verdictNoNetChange  = "no_net_change"
)

// runPlan is what undoing a run will do, decided by one walk over the run's
// applied changes. Its hash binds a dry run's token to it.
type runPlan struct {
	steps []planStep // newest first
	hash  string
}

type planStep struct {
	c        *ledger.Change
	verdict  string
	reason   string
	warnings []string // of a change that is undone, but not exactly
	failed   string   // why an undo that was tried failed
	tx       bool     // a TxOperation's step, run inside a transaction
}

// UndoRun undoes a run on behalf of a person acting through trusted code (a
// dashboard), without a token. With dryRun it only reports what the undo
// would do and changes nothing. by names the person (see Person) and is
// recorded with the run and every change it undoes. Unlike the agent's
// undo_run it ignores scopes: trusted code sees every run.
func (g *Guard) UndoRun(ctx context.Context, runID string, dryRun bool, by string) (*RunReport, error) {
	if by == "" {
		by = Person("unknown")
	}
	r, err := g.getRun(ctx, runID)
	if err != nil {
		return nil, err
	}
	return g.undoRun(ctx, r, dryRun, "", by, true)
}

// undoRunTool is undo_run for the agent.
func (g *Guard) undoRunTool(ctx context.Context, req *mcp.CallToolRequest, runID string, dryRun bool, token string) (*RunReport, error) {
	r, err := g.scopedRun(ctx, req, runID)
	if err != nil {
		return nil, err
	}
	return g.undoRun(ctx, r, dryRun, token, agentActor, false)
}

func (g *Guard) undoRun(ctx context.Context, r *ledger.Run, dryRun bool, token, by string, trusted bool) (*RunReport, error) {
	switch r.Status {
	case ledger.RunUndone, ledger.RunPartiallyUndone:
		return decodeReport(r.Report)
	case ledger.RunUndoing:
		return nil, Refuse("run %s is being undone by another request; ask again with get_run when it finishes", r.ID)
	}
	if !dryRun && !g.WritesEnabled() {
		return nil, &WritesDisabledError{EnvVar: g.opts.WriteModeEnv}
	}
	if !dryRun && !trusted && !validToken(token, confirmPrefix) {
		return nil, Refuse("undo of run %s needs the confirmation_token of its dry run: call undo_run with dry_run=true, show the report to the user, then call it again with dry_run=false and the token", r.ID)
	}
	plan, err := g.walkRun(ctx, r, false, by)
	if err != nil {
		return nil, err
	}
	if dryRun {
		return g.dryRunReport(ctx, r, plan, trusted)
	}
	stored, err := g.claimRun(ctx, r, plan, token, by, trusted)
	if err != nil || stored != nil {
		return stored, err
	}
	return g.executeRun(ctx, r, by)
}

var errNoObserve = errors.New("no observe")

// resourceOf names what a change touches; a change that names nothing is
// its own resource.
func resourceOf(c *ledger.Change) string {
	if c.Resource != "" {
		return "r:" + c.Resource
	}
	return "c:" + c.ID
}

// digest hashes the decisions of a plan, so that a dry run's token only
// confirms the plan that was shown.
func (p *runPlan) digest() string {
	type entry struct {
		ID, Verdict, Reason string
	}
	entries := make([]entry, 0, len(p.steps))
	for _, s := range p.steps {
		reason := s.reason
		if s.failed != "" {
			reason = "failed: " + s.failed
		}
		entries = append(entries, entry{s.c.ID, s.verdict, reason})
	}
	b, err := canonjson.Marshal(entries)
	if err != nil {
		panic("changeset: plan digest: " + err.Error()) // IDs and reasons are valid UTF-8
	}
	return canonjson.Hash(b)
}

// report renders a plan as a dry run's report (will_undo) or a real undo's
// (undone).
func (p *runPlan) report(runID string, dryRun bool) *RunReport {
	rep := &RunReport{RunID: runID, DryRun: dryRun, NoNetChange: []RunStep{}, Skipped: []RunNote{}, Irreversible: []RunNote{}}
	undo := []RunStep{}
	for _, s := range p.steps {
		step := RunStep{ChangeID: s.c.ID, Action: s.c.Action, Summary: s.c.Summary, Resource: s.c.Resource, Transactional: s.tx}
		note := RunNote{ChangeID: s.c.ID, Action: s.c.Action, Reason: s.reason}
		switch s.verdict {
		case verdictUndo:
			if s.failed != "" {
				note.Reason = s.failed
				rep.Failed = append(rep.Failed, note)
				continue
			}
			undo = append(undo, step)
			for _, w := range s.warnings {
				rep.Irreversible = append(rep.Irreversible, RunNote{ChangeID: s.c.ID, Action: s.c.Action, Reason: w})
			}
		case verdictNoNetChange:
			rep.NoNetChange = append(rep.NoNetChange, step)
		case verdictSkip:
			rep.Skipped = append(rep.Skipped, note)
		case verdictIrreversible:
			rep.Irreversible = append(rep.Irreversible, note)
		}
	}
	if dryRun {
		rep.WillUndo = undo
	} else {
		rep.Undone = undo
	}
	return rep
}

// complete reports whether undoing as planned leaves nothing of the run in
// place.
func (p *runPlan) complete() bool {
	for _, s := range p.steps {
		if s.verdict == verdictSkip || s.verdict == verdictIrreversible || s.failed != "" {
			return false
		}
	}
	return true
}

// dryRunReport stores a fresh confirmation token bound to the plan (the
// agent's dry run) and returns the plan as a report. It undoes nothing.
func (g *Guard) dryRunReport(ctx context.Context, r *ledger.Run, plan *runPlan, trusted bool) (*RunReport, error) {
	rep := plan.report(r.ID, true)
	rep.Status = string(ledger.RunOpen)
	if trusted {
		return rep, nil
	}
	token := newToken(confirmPrefix)
	expires := g.now().Add(g.opts.TTL)
	err := g.ledger.WithTx(ctx, func(tx *ledger.Tx) error {
		cur, err := tx.Run(r.ID)
		if err != nil {
			return err
		}
		if cur.Status != ledger.RunOpen {
			return Refuse("run %s is %s; ask again", r.ID, cur.Status)
		}
		cur.PlanHash = plan.hash
		cur.ConfirmHash = tokenDigest(purposeRunUndo, cur.ID, plan.hash, token)
		cur.ConfirmExpiresAt, cur.UpdatedAt = expires, g.now()
		return tx.UpdateRun(cur, ledger.RunOpen)
	})
	if err != nil {
		return nil, err
	}
	rep.ConfirmationToken, rep.ExpiresAt = token, formatTime(expires)
	rep.NextStep = "Nothing has been changed yet. Show this report to the user: what will be undone, what is skipped and why, and what cannot be undone exactly. " +
		"Only if the user approves, call undo_run with dry_run=false and this confirmation_token."
	return rep, nil
}

// claimRun moves the run from open to undoing: one claim per run, whatever
// the number of processes. The agent's claim needs the dry run's token and
// the same plan the token was issued for. When another request finished
// undoing the run meanwhile, claimRun returns that undo's stored report.
func (g *Guard) claimRun(ctx context.Context, r *ledger.Run, plan *runPlan, token, by string, trusted bool) (*RunReport, error) {
	var refusal error
	var stored json.RawMessage
	err := g.ledger.WithTx(ctx, func(tx *ledger.Tx) error {
		refusal, stored = nil, nil // WithTx may run this again
		cur, err := tx.Run(r.ID)
		if err != nil {
			return err
		}
		now := g.now()
		switch {
		case cur.Status == ledger.RunUndone || cur.Status == ledger.RunPartiallyUndone:
			stored = cur.Report
			return nil
		case cur.Status == ledger.RunUndoing:
			refusal = Refuse("run %s is being undone by another request; ask again with get_run when it finishes", r.ID)
			return nil
		case cur.Status != ledger.RunOpen:
			refusal = Refuse("run %s cannot be undone (status: %s)", r.ID, cur.Status)
			return nil
		case !trusted && !tokenMatches(cur.ConfirmHash, purposeRunUndo, cur.ID, cur.PlanHash, token):
			refusal = Refuse("invalid confirmation token for run %s: use the token of the latest dry run (undo_run with dry_run=true)", r.ID)
			return nil
		case !trusted && !now.Before(cur.ConfirmExpiresAt):
			refusal = Refuse("the dry run of run %s expired at %s; run the dry run again", r.ID, formatTime(cur.ConfirmExpiresAt))
			return nil
		case !trusted && cur.PlanHash != plan.hash:
			refusal = Refuse("what undoing run %s would do has changed since the dry run; run the dry run again and show the new report", r.ID)
			return nil
		}
		cur.Status, cur.UndoneBy, cur.UpdatedAt = ledger.RunUndoing, by, now
		cur.PlanHash, cur.ConfirmHash, cur.ConfirmExpiresAt = "", "", time.Time{}
		return tx.UpdateRun(cur, ledger.RunOpen)
	})
	switch {
	case errors.Is(err, ledger.ErrConflict):
		return nil, Refuse("run %s is being undone by another request; ask again with get_run when it finishes", r.ID)
	case err != nil:
		return nil, err
	case stored != nil:
		return decodeReport(stored)
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
