package runundo

import (
	"context"
	"slices"

	"github.com/mcp-changeset/changeset-go/internal/undoplan"
	"github.com/mcp-changeset/changeset-go/ledger"
)

// dependentStatuses are the statuses of a change whose dependencies an
// undo must keep: applied, or possibly applied.
var dependentStatuses = []ledger.Status{ledger.Applied, ledger.Applying, ledger.UndoFailed}

// Hold is the one rule for dependencies, for a run's undo and a single
// change's alike: it returns why c may not be undone now, or "". Undoing
// c would remove a resource (one it created) that another change of the
// same scope depends on (Proposal.DependsOn) and that stays in place:
// applied, or possibly applied, and not in undoing (the changes the caller
// is about to undo too). Changes of other scopes neither hold c back nor
// are named. tx is the transaction to read in, or nil for the database.
func (e *Engine) Hold(ctx context.Context, tx *ledger.Tx, c *ledger.Change, undoing map[string]bool) (string, error) {
	removed := undoplan.Removes(c)
	for chunk := range slices.Chunk(removed, ledger.MaxDependsOnAny) {
		f := ledger.ChangeFilter{Statuses: dependentStatuses, DependsOnAny: chunk, ScopeHash: c.ScopeHash}
		var deps []*ledger.Change
		var err error
		if tx != nil {
			deps, err = tx.Changes(f)
		} else {
			deps, err = e.Ledger.Changes(ctx, f)
		}
		if err != nil {
			return "", err
		}
		for _, d := range deps {
			if d.ID == c.ID || undoing[d.ID] || d.ScopeHash != c.ScopeHash {
				continue
			}
			for _, res := range d.DependsOn {
				if slices.Contains(chunk, res) {
					return undoplan.HoldReason(e.Voice, c, d, res), nil
				}
			}
		}
	}
	return "", nil
}

// holdDependencies finds the planned undos that would remove a resource
// that a change the undo keeps depends on, and holds them back (see
// Hold). It reports whether it held any new change, in which case the run
// is walked again.
func (e *Engine) holdDependencies(ctx context.Context, steps []undoplan.Step, held map[string]string) (bool, error) {
	undoing := map[string]bool{}
	for _, s := range steps {
		if s.CarriesOut() {
			undoing[s.C.ID] = true
		}
	}
	more := false
	for _, s := range steps {
		if s.Verdict != undoplan.Undo || held[s.C.ID] != "" {
			continue
		}
		reason, err := e.Hold(ctx, nil, s.C, undoing)
		if err != nil {
			return false, err
		}
		if reason != "" {
			held[s.C.ID], more = reason, true
		}
	}
	return more, nil
}
