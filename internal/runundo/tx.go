package runundo

import (
	"context"
	"encoding/json"
	"time"

	"github.com/mcp-changeset/changeset-go/internal/undoplan"
	"github.com/mcp-changeset/changeset-go/ledger"
)

// undoIn checks one change of a transactional operation against the state tx has
// reached and undoes it there, under a savepoint so that a failing undo
// rolls back alone. check judges the state found (and turns the step into
// a skip when it is not the one the change left). by is recorded as who
// undid the change; the caller commits tx (a real undo) or rolls it back
// (a plan).
func (e *Engine) undoIn(ctx context.Context, tx *ledger.Tx, step *undoplan.Step, by string, check func(*undoplan.Step, json.RawMessage) bool) {
	c, err := tx.Change(step.C.ID)
	if err != nil {
		step.Failed = e.undoFailed(err)
		return
	}
	if c.Status != ledger.Applied {
		step.Verdict, step.Reason = undoplan.Skip, e.Voice.ReasonNoLongerApplied(string(c.Status))
		return
	}
	if step.Op.Observes {
		cur, err := e.Host.Observe(ctx, tx, c)
		if err != nil {
			step.Verdict, step.Reason = undoplan.Skip, e.Host.Unreadable(ctx, c, false, err)
			return
		}
		if !check(step, cur) {
			return
		}
	}
	step.Warnings = c.Warnings
	sql := tx.SQL()
	if _, err := sql.ExecContext(ctx, "SAVEPOINT changeset_step"); err != nil {
		step.Failed = e.undoFailed(ledger.Errorf("savepoint", "", err))
		return
	}
	err = e.Host.UndoIn(ctx, tx, c)
	if err == nil {
		c.UndoneBy, c.UndoHash, c.UpdatedAt = by, "", e.Now()
		err = tx.UpdateChange(c, ledger.Applied)
	}
	if err != nil {
		step.Failed = e.undoFailed(err)
		_, _ = sql.ExecContext(ctx, "ROLLBACK TO SAVEPOINT changeset_step")
	}
	_, _ = sql.ExecContext(ctx, "RELEASE SAVEPOINT changeset_step")
}

// closeIn closes a change with no net effect inside tx.
func (e *Engine) closeIn(tx *ledger.Tx, c *ledger.Change, runID, by string) error {
	cur, err := tx.Change(c.ID)
	if err != nil {
		return err
	}
	if cur.Status != ledger.Applied {
		return &refusal{e.Voice.ChangeNoLongerApplied(c.ID, string(cur.Status))}
	}
	closeNoNet(cur, runID, by, e.Now())
	return tx.UpdateChange(cur, ledger.Applied)
}

// closeNoNet marks c undone without a write.
func closeNoNet(c *ledger.Change, runID, by string, now time.Time) {
	c.Status, c.UndoneAt, c.UndoneBy, c.UndoHash, c.UpdatedAt = ledger.Undone, now, by, "", now
	c.Note = "no net change within run " + runID + ": no write was needed"
}
