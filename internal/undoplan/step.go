package undoplan

import (
	"encoding/json"

	"github.com/mcp-changeset/changeset-go/internal/canonjson"
	"github.com/mcp-changeset/changeset-go/ledger"
)

// Verdict is what the undo does with one change.
type Verdict string

// The verdicts.
const (
	// Undo: the change's inverse runs.
	Undo Verdict = "undo"
	// Skip: the change is kept, for the step's Reason.
	Skip Verdict = "skip"
	// Irreversible: the change cannot be undone; it is kept.
	Irreversible Verdict = "irreversible"
	// NoNetChange: the run itself brought the change's resource back to
	// where it started; the change is closed without a write.
	NoNetChange Verdict = "no_net_change"
)

// Op is what the server knows of a change's operation.
type Op struct {
	Registered bool // the server still has the operation
	HasUndo    bool // it has an inverse
	Observes   bool // it can read its resources' state
	Tx         bool // it runs inside the ledger's transaction
}

// Step is one change of a run and what its undo does, or did.
type Step struct {
	C  *ledger.Change
	Op Op
	// Keys are the resources the change touches, as keys: "r:<name>" for
	// a named resource, "c:<change ID>" for a change that names none.
	Keys []string

	Verdict  Verdict
	Reason   string
	Drift    []Drift
	Warnings []string // of a change that is undone, but not exactly
	Failed   string   // why an undo that was tried failed
	// LinkedTo names the newer change this one was related to by state,
	// because neither names a resource.
	LinkedTo string
	// NetState is, for a no-net-change step, the state its resource must
	// still be in for the close to need no write.
	NetState json.RawMessage
	// Reviewed is set by the execution on the steps of the reviewed plan
	// it was to carry out; Late on changes that joined the run after the
	// plan; Closed once a no-net-change step is closed.
	Reviewed, Late, Closed bool
}

// CarriesOut reports whether the undo acts on the step: undoes or closes
// its change.
func (s *Step) CarriesOut() bool { return s.Verdict == Undo || s.Verdict == NoNetChange }

// Group is the resource a no-net-change step closes with: the steps of one
// resource close together or not at all.
func (s *Step) Group() string { return s.Keys[0] }

// Plan is what undoing a run will do (newest first), or did. Its Hash binds
// a dry run's token to its decisions.
type Plan struct {
	Steps []Step
	Hash  ledger.Digest
}

// Actions returns the IDs of the changes the plan undoes or closes.
func (p *Plan) Actions() map[string]bool {
	ids := map[string]bool{}
	for _, s := range p.Steps {
		if s.CarriesOut() {
			ids[s.C.ID] = true
		}
	}
	return ids
}

// Complete reports whether the plan leaves nothing of the run in place.
func (p *Plan) Complete() bool {
	for _, s := range p.Steps {
		if !s.CarriesOut() || s.Failed != "" {
			return false
		}
	}
	return true
}

// Late reports whether changes joined the run after the plan was made.
func (p *Plan) Late() bool {
	for _, s := range p.Steps {
		if s.Late {
			return true
		}
	}
	return false
}

// Digest hashes the decisions of the plan, so that a dry run's token
// confirms only the plan that was shown: which changes are undone,
// skipped, closed or irreversible. The wording of reasons is not part of
// it.
func (p *Plan) Digest() ledger.Digest {
	type entry struct {
		ID, Verdict string
	}
	entries := make([]entry, 0, len(p.Steps))
	for _, s := range p.Steps {
		v := string(s.Verdict)
		if s.Failed != "" {
			v = "failed"
		}
		entries = append(entries, entry{s.C.ID, v})
	}
	b, err := canonjson.Marshal(entries)
	if err != nil {
		panic("undoplan: plan digest: " + err.Error()) // IDs and verdicts are valid UTF-8
	}
	return ledger.Digest(canonjson.Hash(b))
}
