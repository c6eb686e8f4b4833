package changeset

import (
	"context"
	"encoding/json"

	"github.com/mcp-changeset/changeset-go/internal/undoplan"
	"github.com/mcp-changeset/changeset-go/ledger"
)

// txUndo checks one change of a transactional operation against the state tx has
// reached and undoes it there, under a savepoint so that a failing undo
// rolls back alone. check judges the state found (and turns the step into
// a skip when it is not the one the change left). by is recorded as who
// undid the change; the caller commits tx (a real undo) or rolls it back
// (a plan).
func (g *Guard) txUndo(ctx context.Context, tx *ledger.Tx, o *op, step *undoplan.Step, by string, check func(*undoplan.Step, json.RawMessage) bool) {
	c, err := tx.Change(step.C.ID)
	if err != nil {
		step.Failed = g.voice.ReasonUndoFailed(agentText(err))
		return
	}
	if c.Status != ledger.Applied {
		step.Verdict, step.Reason = undoplan.Skip, g.voice.ReasonNoLongerApplied(string(c.Status))
		return
	}
	r := g.inTx(ctx, tx, o)
	if r.observe != nil {
		cur, err := r.observe(c.Payload)
		if err != nil {
			step.Verdict, step.Reason = undoplan.Skip, g.unreadState(ctx, c, false, err)
			return
		}
		if !check(step, cur) {
			return
		}
	}
	step.Warnings = c.Warnings
	sql := tx.SQL()
	if _, err := sql.ExecContext(ctx, "SAVEPOINT changeset_step"); err != nil {
		step.Failed = g.voice.ReasonUndoFailed(agentText(ledger.Errorf("savepoint", "", err)))
		return
	}
	err = g.performUndo(ctx, c, r)
	if err == nil {
		c.UndoneBy, c.UndoHash, c.UpdatedAt = by, "", g.now()
		err = tx.UpdateChange(c, ledger.Applied)
	}
	if err != nil {
		step.Failed = g.voice.ReasonUndoFailed(agentText(err))
		_, _ = sql.ExecContext(ctx, "ROLLBACK TO SAVEPOINT changeset_step")
	}
	_, _ = sql.ExecContext(ctx, "RELEASE SAVEPOINT changeset_step")
}

// txClose closes a change with no net effect inside tx.
func (g *Guard) txClose(tx *ledger.Tx, c *ledger.Change, runID, by string) error {
	cur, err := tx.Change(c.ID)
	if err != nil {
		return err
	}
	if cur.Status != ledger.Applied {
		return Refuse("%s", g.voice.ChangeNoLongerApplied(c.ID, string(cur.Status)))
	}
	closeNoNet(cur, runID, by, g.now())
	return tx.UpdateChange(cur, ledger.Applied)
}
