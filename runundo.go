package changeset

import (
	"cmp"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"slices"
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
}

// RunStep is one change in a run report.
type RunStep struct {
	ChangeID string `json:"change_id"`
	Action   string `json:"action"`
	Summary  string `json:"summary"`
	Resource string `json:"resource,omitempty"`
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
	return g.undoRun(ctx, r, dryRun, token, string(agentActor), false)
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
	plan, err := g.planRun(ctx, r)
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
	return g.executeRun(ctx, r, plan, by)
}

// planRun decides, for each applied change of the run, newest first,
// whether its undo runs, and why not. It reads the current state of each
// resource once; the rest follows from the stored snapshots. It writes
// nothing.
func (g *Guard) planRun(ctx context.Context, r *ledger.Run) (*runPlan, error) {
	all, err := g.ledger.ListChanges(ctx, ledger.ChangeFilter{RunID: r.ID})
	if err != nil {
		return nil, err
	}
	var applied []*ledger.Change
	for _, c := range all {
		if c.Status.InFlight() {
			return nil, Refuse("run %s cannot be undone now: change %s is %s; try again when it finishes", r.ID, c.ID, c.Status)
		}
		if c.Status == ledger.Applied {
			applied = append(applied, c)
		}
	}
	slices.SortFunc(applied, func(a, b *ledger.Change) int { // newest first
		return cmp.Or(b.AppliedAt.Compare(a.AppliedAt), b.CreatedAt.Compare(a.CreatedAt), cmp.Compare(b.ID, a.ID))
	})
	groups := map[string][]*ledger.Change{} // newest first within each
	for _, c := range applied {
		groups[resourceOf(c)] = append(groups[resourceOf(c)], c)
	}

	// current reads each resource's state once, through the Observe of the
	// newest change that touched it.
	current := map[string]json.RawMessage{}
	currentErr := map[string]error{}
	observeCurrent := func(res string) (json.RawMessage, error) {
		if s, ok := current[res]; ok {
			return s, currentErr[res]
		}
		newest := groups[res][0]
		o, ok := g.lookup(newest.Action)
		var state json.RawMessage
		var err error
		if !ok || o.observe == nil {
			err = errNoObserve
		} else {
			state, err = g.observe(ctx, o, newest.Payload)
		}
		current[res], currentErr[res] = state, err
		return state, err
	}

	noNet := map[string]bool{}
	for res, grp := range groups {
		oldest, newest := grp[len(grp)-1], grp[0]
		if oldest.Before == nil || newest.After == nil || string(oldest.Before) != string(newest.After) {
			continue
		}
		if cur, err := observeCurrent(res); err == nil && string(cur) == string(newest.After) {
			noNet[res] = true
		}
	}

	now := g.now()
	expected := map[string]json.RawMessage{}
	plan := &runPlan{}
	for _, c := range applied {
		res := resourceOf(c)
		step := planStep{c: c, verdict: verdictUndo}
		o, registered := g.lookup(c.Action)
		switch {
		case noNet[res]:
			step.verdict, step.reason = verdictNoNetChange, "the run itself brought this resource back to where it started; no write is needed"
		case !registered:
			step.verdict, step.reason = verdictIrreversible, fmt.Sprintf("this server no longer has the operation %q", c.Action)
		case !c.Undoable || o.undo == nil:
			step.verdict, step.reason = verdictIrreversible, "its operation has no undo"
		case !c.UndoExpiresAt.IsZero() && !now.Before(c.UndoExpiresAt):
			step.verdict, step.reason = verdictIrreversible, "its undo window closed at "+formatTime(c.UndoExpiresAt)
		case o.observe != nil:
			exp, seen := expected[res]
			if !seen {
				cur, err := observeCurrent(res)
				if err != nil {
					step.verdict, step.reason = verdictSkip, "the current state could not be read ("+typeName(err)+")"
					break
				}
				exp = cur
			}
			if c.After == nil {
				step.verdict, step.reason = verdictSkip, "no state was recorded after it was applied, so a later edit cannot be ruled out"
			} else if string(exp) != string(c.After) {
				step.verdict, step.reason = verdictSkip, "its resource changed after it was applied (edited outside the run, or by a change of the run that is not undone); it is left as it is"
			} else {
				expected[res] = c.Before
			}
		}
		if step.verdict == verdictUndo {
			step.warnings = c.Warnings
		}
		plan.steps = append(plan.steps, step)
	}
	plan.hash = plan.digest()
	return plan, nil
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
		entries = append(entries, entry{s.c.ID, s.verdict, s.reason})
	}
	b, err := canonjson.Marshal(entries)
	if err != nil {
		panic("changeset: plan digest: " + err.Error()) // IDs and reasons are valid UTF-8
	}
	return canonjson.Hash(b)
}

// report renders a plan; steps whose undo ran are listed by done (real
// undo) or as will_undo (dry run).
func (p *runPlan) report(runID string, dryRun bool, failed map[string]string) *RunReport {
	rep := &RunReport{RunID: runID, DryRun: dryRun, NoNetChange: []RunStep{}, Skipped: []RunNote{}, Irreversible: []RunNote{}}
	undo := []RunStep{}
	for _, s := range p.steps {
		step := RunStep{ChangeID: s.c.ID, Action: s.c.Action, Summary: s.c.Summary, Resource: s.c.Resource}
		note := RunNote{ChangeID: s.c.ID, Action: s.c.Action, Reason: s.reason}
		switch s.verdict {
		case verdictUndo:
			if reason, ok := failed[s.c.ID]; ok {
				note.Reason = reason
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
		if s.verdict == verdictSkip || s.verdict == verdictIrreversible {
			return false
		}
	}
	return true
}

// dryRunReport stores a fresh confirmation token bound to the plan (the
// agent's dry run) and returns the plan as a report. It undoes nothing.
func (g *Guard) dryRunReport(ctx context.Context, r *ledger.Run, plan *runPlan, trusted bool) (*RunReport, error) {
	rep := plan.report(r.ID, true, nil)
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

// executeRun performs a claimed plan, newest first, and stores its report.
// Each undo goes through the same path as undo_change, so its state check
// runs again right before the inverse.
func (g *Guard) executeRun(ctx context.Context, r *ledger.Run, plan *runPlan, by string) (*RunReport, error) {
	ctx = context.WithoutCancel(ctx) // a claimed run must reach a final status
	failed := map[string]string{}
	for _, s := range plan.steps {
		var err error
		switch s.verdict {
		case verdictUndo:
			_, err = g.undoChange(ctx, s.c.ID, "", s.c.ScopeHash, by, true)
		case verdictNoNetChange:
			err = g.closeWithoutWrite(ctx, s.c, r.ID, by)
		}
		if err != nil {
			failed[s.c.ID] = "undo failed: " + agentText(err)
		}
	}
	rep := plan.report(r.ID, false, failed)
	rep.UndoneBy = by
	status := ledger.RunUndone
	if !plan.complete() || len(failed) > 0 {
		status = ledger.RunPartiallyUndone
	}
	rep.Status = string(status)
	stored, err := canonjson.Marshal(rep)
	if err != nil {
		return nil, err
	}
	err = g.ledger.WithTx(ctx, func(tx *ledger.Tx) error {
		cur, err := tx.Run(r.ID)
		if err != nil {
			return err
		}
		cur.Status, cur.Report, cur.UpdatedAt = status, stored, g.now()
		return tx.UpdateRun(cur, ledger.RunUndoing)
	})
	if err != nil {
		return nil, err
	}
	g.log.Info("run undone", "run_id", r.ID, "status", string(status), "by", by)
	return rep, nil
}

// closeWithoutWrite marks an applied change undone without running its
// inverse: the run brought its resource back to where it started.
func (g *Guard) closeWithoutWrite(ctx context.Context, c *ledger.Change, runID, by string) error {
	claimed, err := g.claim(ctx, netZeroClaim, c.ID, "", c.ScopeHash, by, true)
	if err != nil {
		return err
	}
	claimed.Status, claimed.UndoneAt = ledger.Undone, g.now()
	claimed.Note = "no net change within run " + runID + ": no write was needed"
	return g.finish(ctx, claimed, ledger.Undoing, by)
}

func decodeReport(stored json.RawMessage) (*RunReport, error) {
	var rep RunReport
	if err := json.Unmarshal(stored, &rep); err != nil {
		return nil, fmt.Errorf("decode stored run report: %w", err)
	}
	return &rep, nil
}
