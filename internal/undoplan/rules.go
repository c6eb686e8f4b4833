package undoplan

import (
	"encoding/json"
	"time"

	"github.com/mcp-changeset/changeset-go/internal/voice"
	"github.com/mcp-changeset/changeset-go/ledger"
)

// Pass is one walk over a run's steps, newest first: the planner's or the
// execution's. It remembers what the steps decided so far (which
// resources are kept, which state the undone changes left each resource
// in) and decides each step by the rules of the package doc, in one
// place. Call Precheck, then, when it returns true, Check with the state
// found, then Settle, for every step in order.
type Pass struct {
	now time.Time
	// voice words the reasons.
	voice *voice.Voice
	// held: change ID → why a dependency holds it (planning only).
	held map[string]string
	// kept: resource key → the newest change of it the undo keeps.
	kept map[string]string
	// expect: resource key → the state the undos so far left it in.
	expect map[string]Expectation
}

// Expectation is the state a resource should be in when the pass reaches
// an older change of it: the "before" of the newer change undone (By
// names it), or, read by the caller, the current state (By empty).
type Expectation struct {
	State json.RawMessage
	By    string
}

// NewPass starts a pass at now whose reasons v words; held names the
// changes a dependency holds back, with why (see HoldReason), or is nil.
//
// The pass words its reasons as it decides, through v, rather than
// returning kinds for the caller to word: a reason is built from what the
// rule found (the drift, the newer change that keeps a resource), and a
// kept change's reason grows when its state is read too, so the words are
// made where those facts are, by the one voice that words every other
// sentence.
func NewPass(now time.Time, held map[string]string, v *voice.Voice) *Pass {
	return &Pass{now: now, voice: v, held: held, kept: map[string]string{}, expect: map[string]Expectation{}}
}

// Expected returns the state the pass has reached for a resource key: the
// "before" of the newer change of it the pass undid. ok is false when no
// change of it was undone yet; the caller then reads the current state.
func (p *Pass) Expected(key string) (e Expectation, ok bool) {
	e, ok = p.expect[key]
	return e, ok
}

// Precheck applies the rules that need no state (1 to 6) to s and reports
// whether its state is to be read and given to Check next: for a step it
// would undo (rule 7 decides), and for a step it keeps because a newer
// change keeps its resource (Check then only says what moved, for the
// report). A step already decided as a no-net-change close needs none.
func (p *Pass) Precheck(s *Step) bool {
	c := s.C
	switch {
	case s.Verdict == NoNetChange:
		return false
	case c.Status == ledger.UndoFailed:
		s.Verdict, s.Reason = Skip, p.voice.ReasonUndoFailedEarlier(string(c.Failure), c.NothingWritten)
	case !s.Op.Registered:
		s.Verdict, s.Reason = Irreversible, p.voice.ReasonOperationGone(c.Action)
	case !c.Undoable || !s.Op.HasUndo:
		s.Verdict, s.Reason = Irreversible, p.voice.ReasonNoUndo()
	case !c.UndoExpiresAt.IsZero() && !p.now.Before(c.UndoExpiresAt):
		s.Verdict, s.Reason = Irreversible, p.voice.ReasonWindowClosed(c.UndoExpiresAt.UTC().Format(time.RFC3339))
	case p.held[c.ID] != "":
		s.Verdict, s.Reason = Skip, p.held[c.ID]
	case p.keptBy(s) != "":
		s.Verdict, s.Reason = Skip, p.voice.ReasonKeptByNewer(p.keptBy(s))
		return s.Op.Observes && c.After != nil
	case s.Op.Observes && c.After == nil:
		s.Verdict, s.Reason = Skip, p.voice.ReasonNoSnapshot()
	default:
		s.Verdict = Undo
		return s.Op.Observes
	}
	return false
}

// keptBy returns the newest change the pass keeps that touches one of s's
// resources, or "".
func (p *Pass) keptBy(s *Step) string {
	for _, k := range s.Keys {
		if id := p.kept[k]; id != "" {
			return id
		}
	}
	return ""
}

// When says which pass checks a state, for the reason of a mismatch.
type When int

const (
	// Planning: the state is the one the plan expects (see Expected).
	Planning When = iota
	// Executing: the state was read right before the inverse, after the
	// plan was reviewed.
	Executing
)

// Check compares the state found for each of s's resources (by key) with
// the state s's change left them in (rule 7) and reports whether s is
// undone. On a mismatch it turns s into a skip that names what moved (a
// step Precheck kept keeps its reason, with what moved added). by names, per key,
// the newer change of the run whose undo the expected state comes from
// (Planning only; nil otherwise).
func (p *Pass) Check(s *Step, found map[string]json.RawMessage, by map[string]string, when When) bool {
	after := Split(s, s.C.After)
	same := true
	between := ""
	for _, k := range s.Keys {
		if string(orNull(found[k])) != string(orNull(after[k])) {
			same = false
			if between == "" {
				between = by[k]
			}
		}
	}
	if same {
		return s.Verdict == Undo
	}
	kept := s.Verdict == Skip
	s.Verdict, s.Drift = Skip, driftOfStep(s, after, found)
	what := p.voice.Moved(s.Drift)
	switch {
	case kept:
		s.Reason = p.voice.ReasonAlsoMoved(s.Reason, what)
	case when == Executing:
		s.Reason = p.voice.ReasonChangedSinceReview(what)
	case between != "":
		s.Reason = p.voice.ReasonChangedBetween(between, what)
	default:
		s.Reason = p.voice.ReasonChangedOutside(what)
	}
	return false
}

// Keep turns s into a skip for reason (with drift, if any): the
// execution keeps a step it does not carry out. Settle it afterwards.
func (p *Pass) Keep(s *Step, reason string, drift []Drift) {
	s.Verdict, s.Reason, s.Drift = Skip, reason, drift
}

// Settle records the outcome of a decided step for the older changes of
// its resources: an undone change leaves each resource in its "before"
// state; a change that stays in place, or whose undo failed, keeps each
// of its resources; a no-net-change close leaves them where they are.
func (p *Pass) Settle(s *Step) {
	switch {
	case s.Verdict == NoNetChange && s.Failed == "":
		return
	case s.Verdict == Undo && s.Failed == "":
		before := Split(s, s.C.Before)
		for _, k := range s.Keys {
			p.expect[k] = Expectation{State: before[k], By: s.C.ID}
		}
		return
	}
	for _, k := range s.Keys {
		if p.kept[k] == "" {
			p.kept[k] = s.C.ID
		}
	}
}

// ChangedSinceReview is the reason for a reviewed step whose check failed
// right before its inverse, worded by v.
func ChangedSinceReview(v *voice.Voice, drift []Drift) string {
	return v.ReasonChangedSinceReview(v.Moved(drift))
}

// HoldReason is why the undo of c is held back, worded by v: it would
// remove resource, which dep, a change of the same scope that stays in
// place, depends on. It ends with "; it is left as it is".
func HoldReason(v *voice.Voice, c, dep *ledger.Change, resource string) string {
	return v.ReasonHeld(resource, dep.ID, dep.Summary, dep.RunID, dep.RunID != "" && dep.RunID == c.RunID)
}

// NoNet marks, among steps (newest first), the no-net-change steps: the
// changes of a resource whose oldest "before" in the run equals its newest
// "after" and its current state, read by current (the run created and
// deleted it, or changed and restored it), so no write is needed. Only
// resources whose every change is applied and names that resource alone
// qualify.
func NoNet(steps []Step, current func(key string) (json.RawMessage, error)) {
	groups := map[string][]int{}
	var order []string
	for i := range steps {
		k := steps[i].Keys[0]
		if _, ok := groups[k]; !ok {
			order = append(order, k)
		}
		for _, k := range steps[i].Keys {
			groups[k] = append(groups[k], i)
		}
	}
	for _, k := range order {
		idx := groups[k]
		ok := true
		for _, i := range idx {
			if steps[i].C.Status != ledger.Applied || len(steps[i].Keys) != 1 {
				ok = false // a change of it stays, or it moves with other resources
			}
		}
		oldest, newest := steps[idx[len(idx)-1]].C, steps[idx[0]].C
		if !ok || oldest.Before == nil || newest.After == nil || string(oldest.Before) != string(newest.After) {
			continue
		}
		if cur, err := current(k); err != nil || string(cur) != string(newest.After) {
			continue
		}
		for _, i := range idx {
			steps[i].Verdict = NoNetChange // a report lists it without a reason
			steps[i].NetState = newest.After
		}
	}
}
