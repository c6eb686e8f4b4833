package changeset

import (
	"cmp"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"slices"

	"github.com/mcp-changeset/changeset-go/ledger"
)

// planRun is the one walk behind every undo of a run: the dry run shows
// its plan, and the real undo carries out that plan (see executePlan),
// never a new walk. It visits the run's applied changes newest first and
// decides, for each, whether its undo runs, and why not. It writes nothing.
//
// Ordinary operations are decided from the stored snapshots and one
// observation of each resource's current state: the state a change is
// checked against is the "before" of the newer change of the run just
// planned for undo on the same resource, or else the current state.
// Consecutive changes of TxOperations are really undone inside one ledger
// transaction, each checked against the state the transaction has reached,
// and the transaction rolls back.
//
// A change the undo must keep (a person edited it, it has no inverse, …)
// can hold back others: an older change of the same resource, and the
// removal of a resource that a kept change depends on (Proposal.DependsOn).
// planRun walks again until no new change is held back.
func (g *Guard) planRun(ctx context.Context, r *ledger.Run) (*runPlan, error) {
	applied, err := g.runChanges(ctx, r)
	if err != nil {
		return nil, err
	}
	obs := map[string]stateRead{} // observations, shared by every walk
	held := map[string]string{}   // change ID → why a dependency holds it
	for range len(applied) + 1 {
		w := newWalk(g, ctx, r.ID, applied, obs, held)
		plan, err := w.plan()
		if err != nil {
			return nil, err
		}
		more, err := w.holdDependencies(plan)
		if err != nil {
			return nil, err
		}
		if !more {
			plan.hash = plan.digest()
			return plan, nil
		}
	}
	return nil, fmt.Errorf("run %s: the dependencies of its changes did not settle", r.ID) // cannot happen: each walk holds one more change
}

// runChanges returns the run's changes the undo must consider, newest
// first: the applied ones, and those whose undo failed earlier (they are
// still in place, so they are kept and reported, and the run is never
// called undone while one remains). It refuses while any change of the run
// is in flight: its outcome is not known yet.
func (g *Guard) runChanges(ctx context.Context, r *ledger.Run) ([]*ledger.Change, error) {
	all, err := g.ledger.ListChanges(ctx, ledger.ChangeFilter{RunID: r.ID})
	if err != nil {
		return nil, err
	}
	var applied []*ledger.Change
	for _, c := range all {
		if c.Status.InFlight() {
			if cur, err := g.ledger.GetRun(ctx, r.ID); err == nil && cur.Status == ledger.RunUndoing {
				return nil, runBusy(r.ID) // another request is undoing it: its changes are in flight
			}
			return nil, refuse(ErrBusy, "", "run %s cannot be undone now: change %s is %s; nothing was undone. Try again when it finishes", r.ID, c.ID, c.Status)
		}
		if c.Status == ledger.Applied || c.Status == ledger.UndoFailed {
			applied = append(applied, c)
		}
	}
	sortNewestFirst(applied)
	return applied, nil
}

// sortNewestFirst orders changes by when they were applied, newest first.
func sortNewestFirst(cs []*ledger.Change) {
	slices.SortFunc(cs, func(a, b *ledger.Change) int {
		return cmp.Or(b.AppliedAt.Compare(a.AppliedAt), b.CreatedAt.Compare(a.CreatedAt), cmp.Compare(b.ID, a.ID))
	})
}

// walk is the state of one planning walk.
type walk struct {
	g       *Guard
	ctx     context.Context
	runID   string
	applied []*ledger.Change // newest first

	res    map[string]string           // change ID → resource key
	linked map[string]string           // change ID → the newer change it was related to by state
	groups map[string][]*ledger.Change // by resource key, newest first
	noNet  map[string]bool             // resources the run left where it found them
	obs    map[string]stateRead        // each change's observed state, read once
	held   map[string]string           // change ID → why a dependency holds it

	expected map[string]expectation // the state the walk has reached, per resource
	keptBy   map[string]string      // resource → the newest change of it the undo keeps
}

// expectation is the state a resource should be in when the walk reaches
// an older change of it: the before of the newer change planned for undo
// (by names it), or the current state (by is empty).
type expectation struct {
	state json.RawMessage
	by    string
}

type stateRead struct {
	state json.RawMessage
	err   error
}

func newWalk(g *Guard, ctx context.Context, runID string, applied []*ledger.Change, obs map[string]stateRead, held map[string]string) *walk {
	w := &walk{g: g, ctx: ctx, runID: runID, applied: applied, obs: obs, held: held,
		res: map[string]string{}, linked: map[string]string{}, groups: map[string][]*ledger.Change{},
		expected: map[string]expectation{}, keptBy: map[string]string{}}
	w.assignResources()
	w.findNoNetChange()
	return w
}

// assignResources puts each change in its resource's group. A change that
// names a Resource belongs to it. A change that names none would be its
// own resource, but then the plan could not know that two edits of one
// thing interact (theme light→dark, then dark→blue). So an unnamed
// change is related to the nearest newer change of the run whose "before"
// equals its "after" and whose resource reads the same state now: the
// newer change most likely picked the thing up where this one left it.
// The relation only ever makes the plan expect more of the state; every
// undo is checked again right before it runs, so a wrong guess can only
// turn a planned undo into a reported skip. The report notes each one.
func (w *walk) assignResources() {
	byBefore := map[string][]*ledger.Change{} // newer changes by their before state, newest first
	for _, c := range w.applied {
		key := resourceOf(c)
		if c.Resource == "" && c.After != nil && w.observable(c) {
			cands := byBefore[string(c.After)]
			for i := len(cands) - 1; i >= 0; i-- { // nearest first
				b := cands[i]
				mine, err1 := w.observeChange(c)
				theirs, err2 := w.observeChange(b)
				if err1 == nil && err2 == nil && string(mine) == string(theirs) {
					key, w.linked[c.ID] = w.res[b.ID], b.ID
					break
				}
			}
		}
		w.res[c.ID] = key
		w.groups[key] = append(w.groups[key], c)
		if c.Before != nil && w.observable(c) {
			byBefore[string(c.Before)] = append(byBefore[string(c.Before)], c)
		}
	}
}

// observable reports whether c's operation can read its resource's state.
func (w *walk) observable(c *ledger.Change) bool {
	o, ok := w.g.lookup(c.Action)
	return ok && o.hasObserve()
}

func (w *walk) isTx(c *ledger.Change) bool {
	o, ok := w.g.lookup(c.Action)
	return ok && o.tx != nil
}

// observeChange reads the current state of the resource c touches, once
// per walk series. A TxOperation's Observe runs in a transaction that is
// rolled back.
func (w *walk) observeChange(c *ledger.Change) (json.RawMessage, error) {
	if s, ok := w.obs[c.ID]; ok {
		return s.state, s.err
	}
	var s stateRead
	s.state, s.err = w.g.observeNow(w.ctx, c)
	w.obs[c.ID] = s
	return s.state, s.err
}

// observeNow reads the current state of the resource c touches.
func (g *Guard) observeNow(ctx context.Context, c *ledger.Change) (json.RawMessage, error) {
	o, ok := g.lookup(c.Action)
	switch {
	case !ok || !o.hasObserve():
		return nil, errNoObserve
	case o.tx != nil:
		var state json.RawMessage
		err := g.ledger.WithTx(ctx, func(tx *ledger.Tx) error {
			var err error
			if state, err = g.observeTx(ctx, tx, o, c.Payload); err != nil {
				return err
			}
			return errRollback
		})
		if errors.Is(err, errRollback) {
			err = nil
		}
		return state, err
	}
	return g.observe(ctx, o, c.Payload)
}

// currentState is the current state of a resource, read through the
// newest change of the run that touched it.
func (w *walk) currentState(res string) (json.RawMessage, error) {
	return w.observeChange(w.groups[res][0])
}

// findNoNetChange marks the resources whose oldest "before" in the run
// equals their newest "after" and their current state: the run created
// and deleted them (or changed and restored them), so no write is needed.
func (w *walk) findNoNetChange() {
	w.noNet = map[string]bool{}
	for res, grp := range w.groups {
		if slices.ContainsFunc(grp, func(c *ledger.Change) bool { return c.Status != ledger.Applied }) {
			continue // a change of it is kept: the run did not bring it back
		}
		oldest, newest := grp[len(grp)-1], grp[0]
		if oldest.Before == nil || newest.After == nil || string(oldest.Before) != string(newest.After) {
			continue
		}
		if cur, err := w.currentState(res); err == nil && string(cur) == string(newest.After) {
			w.noNet[res] = true
		}
	}
}

// plan decides every change of the run.
func (w *walk) plan() (*runPlan, error) {
	plan := &runPlan{}
	for i := 0; i < len(w.applied); {
		if !w.isTx(w.applied[i]) {
			plan.steps = append(plan.steps, w.externalStep(w.applied[i]))
			i++
			continue
		}
		j := i
		for j < len(w.applied) && w.isTx(w.applied[j]) {
			j++
		}
		steps, err := w.txSegment(w.applied[i:j])
		if err != nil {
			return nil, err
		}
		plan.steps = append(plan.steps, steps...)
		i = j
	}
	return plan, nil
}

// precheck decides what needs no state: a change with no net effect, and
// changes that cannot or may not be undone. It returns the step with
// verdict undo when the state check comes next.
func (w *walk) precheck(c *ledger.Change) (planStep, *op) {
	step := planStep{c: c, verdict: verdictUndo, linkedTo: w.linked[c.ID], group: w.res[c.ID]}
	o, registered := w.g.lookup(c.Action)
	switch {
	case c.Status == ledger.UndoFailed:
		step.verdict, step.reason = verdictSkip, undoFailedReason(c)
	case w.noNet[w.res[c.ID]]:
		step.verdict, step.reason = verdictNoNetChange, "the run itself brought this resource back to where it started; no write is needed"
		step.netState = w.groups[w.res[c.ID]][0].After
	case !registered:
		step.verdict, step.reason = verdictIrreversible, fmt.Sprintf("this server no longer has the operation %q", c.Action)
	case !c.Undoable || !o.hasUndo():
		step.verdict, step.reason = verdictIrreversible, "its operation has no undo"
	case !c.UndoExpiresAt.IsZero() && !w.g.now().Before(c.UndoExpiresAt):
		step.verdict, step.reason = verdictIrreversible, "its undo window closed at "+formatTime(c.UndoExpiresAt)
	case w.held[c.ID] != "":
		step.verdict, step.reason = verdictSkip, w.held[c.ID]
	}
	return step, o
}

// undoFailedReason is why a change whose undo failed earlier is kept.
func undoFailedReason(c *ledger.Change) string {
	why := "its undo failed earlier"
	switch c.Failure {
	case ledger.FailureStateChanged:
		why = "its undo was refused earlier because its resource had changed"
	case ledger.FailureInterrupted:
		why = "its undo was interrupted earlier and reconciled by an operator"
	}
	if c.NothingWritten {
		why += " (nothing was written)"
	}
	return why + "; it is left as it is. Check it with get_change_status; it cannot be undone again"
}

// reasonNoSnapshot is why a change without an "after" snapshot is kept.
const reasonNoSnapshot = "no state was recorded after it was applied, so a later edit cannot be ruled out; it is left as it is"

// check compares the state a resource is expected to be in with the state
// c left it in, and on a mismatch turns step into a skip that says what
// changed.
func (w *walk) check(step *planStep, exp expectation) bool {
	c := step.c
	if c.After == nil {
		step.verdict, step.reason = verdictSkip, reasonNoSnapshot
		return false
	}
	if string(exp.state) == string(c.After) {
		return true
	}
	step.verdict, step.drift = verdictSkip, driftOf(c.After, exp.state)
	what := describeDrift(step.drift)
	res := w.res[c.ID]
	switch {
	case exp.by != "":
		step.reason = fmt.Sprintf("it was changed outside the run between this change and change %s of the run: %s; it is left as it is", exp.by, what)
	case w.keptBy[res] != "":
		step.reason = fmt.Sprintf("change %s of the run, made after it to the same resource, stays in place (see its reason), so this one stays too: %s", w.keptBy[res], what)
	default:
		step.reason = "its resource changed after it was applied, outside the run: " + what + "; it is left as it is"
	}
	return false
}

// settle records the outcome of a decided step for the older changes of
// its resource.
func (w *walk) settle(step *planStep) {
	res := w.res[step.c.ID]
	switch step.verdict {
	case verdictUndo:
		if step.failed == "" {
			w.expected[res] = expectation{state: step.c.Before, by: step.c.ID}
			return
		}
	case verdictNoNetChange:
		return
	}
	if w.keptBy[res] == "" {
		w.keptBy[res] = step.c.ID
	}
}

// externalStep decides an ordinary operation's change from the snapshots.
func (w *walk) externalStep(c *ledger.Change) planStep {
	step, o := w.precheck(c)
	if step.verdict == verdictUndo && o.observe != nil {
		res := w.res[c.ID]
		exp, seen := w.expected[res]
		if !seen {
			cur, err := w.currentState(res)
			if err != nil {
				step.verdict, step.reason = verdictSkip, w.g.unreadState(w.ctx, c, "", err)
				w.settle(&step)
				return step
			}
			exp = expectation{state: cur}
		}
		w.check(&step, exp)
	}
	if step.verdict == verdictUndo {
		step.warnings = c.Warnings
	}
	w.settle(&step)
	return step
}

// txSegment plans consecutive changes of TxOperations by undoing them
// inside one transaction that then rolls back: each is checked against the
// state the transaction has reached and undone under a savepoint.
func (w *walk) txSegment(changes []*ledger.Change) ([]planStep, error) {
	tx, err := w.g.ledger.Begin(w.ctx)
	if err != nil {
		return nil, err
	}
	defer tx.Rollback() // the plan changes nothing
	var steps []planStep
	for _, c := range changes {
		step, o := w.precheck(c)
		step.tx = true
		if step.verdict == verdictUndo {
			w.g.txUndo(w.ctx, tx, o, &step, "", func(s *planStep, found json.RawMessage) bool {
				return w.check(s, expectation{state: found, by: w.expected[w.res[s.c.ID]].by})
			})
		}
		w.settle(&step)
		steps = append(steps, step)
	}
	return steps, nil
}

// holdDependencies finds planned undos that would remove a resource that
// a change the undo keeps depends on, and holds them back. It reports
// whether it held any new change, in which case the run is walked again.
func (w *walk) holdDependencies(plan *runPlan) (bool, error) {
	undone := map[string]bool{}
	for _, s := range plan.steps {
		if s.verdict == verdictUndo || s.verdict == verdictNoNetChange {
			undone[s.c.ID] = true
		}
	}
	var candidates []planStep
	var resources []string
	for _, s := range plan.steps {
		if s.verdict == verdictUndo && removes(s.c) && w.held[s.c.ID] == "" {
			candidates = append(candidates, s)
			resources = append(resources, s.c.Resource)
		}
	}
	// One question to the ledger per MaxDependsOnAny resources, not one
	// per change: which kept changes depend on any of them.
	dependents := map[string][]*ledger.Change{}
	slices.Sort(resources)
	resources = slices.Compact(resources)
	for chunk := range slices.Chunk(resources, ledger.MaxDependsOnAny) {
		deps, err := w.g.ledger.ListChanges(w.ctx, ledger.ChangeFilter{Statuses: dependentStatuses, DependsOnAny: chunk})
		if err != nil {
			return false, err
		}
		for _, d := range deps {
			for _, r := range d.DependsOn {
				dependents[r] = append(dependents[r], d)
			}
		}
	}
	more := false
	for _, s := range candidates {
		for _, dep := range dependents[s.c.Resource] {
			if !undone[dep.ID] {
				w.held[s.c.ID] = dependencyReason(s.c, dep)
				more = true
				break
			}
		}
	}
	return more, nil
}

// dependentStatuses are the statuses of a change whose dependencies an
// undo must keep: applied, or possibly applied.
var dependentStatuses = []ledger.Status{ledger.Applied, ledger.Applying, ledger.UndoFailed}

// removes reports whether undoing c may remove its resource: c created it
// (its "before" is null), or no state was recorded to tell.
func removes(c *ledger.Change) bool {
	return c.Resource != "" && (c.Before == nil || string(c.Before) == "null")
}

// keptDependent returns an applied change that depends on resource res and
// that the undo keeps (it is not in undone), or nil. It searches the whole
// ledger: a change outside the run can depend on what the run created. q
// is the transaction to read in, or nil for the database.
func (g *Guard) keptDependent(ctx context.Context, tx *ledger.Tx, res, runID string, undone map[string]bool) (*ledger.Change, error) {
	f := ledger.ChangeFilter{Statuses: dependentStatuses, DependsOn: res}
	var deps []*ledger.Change
	var err error
	if tx != nil {
		deps, err = tx.Changes(f)
	} else {
		deps, err = g.ledger.ListChanges(ctx, f)
	}
	if err != nil {
		return nil, err
	}
	for _, d := range deps {
		if !undone[d.ID] {
			return d, nil
		}
	}
	return nil, nil
}

func dependencyReason(c, dep *ledger.Change) string {
	where := "outside the run"
	if dep.RunID != "" {
		where = "of run " + dep.RunID
	}
	return fmt.Sprintf("undoing it would remove %s, which change %s (%s, %s) depends on and which stays in place; it is left as it is", c.Resource, dep.ID, dep.Summary, where)
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
