package main

import (
	"context"
	"encoding/json"
	"fmt"
	"time"

	"github.com/mcp-changeset/changeset-go/ledger"
)

// ledgerOnly runs, for d, the five transactions of an ordinary cycle
// through package ledger alone: the rows and history entries a Guard
// writes for a preview, an apply (claim and record) and an undo (claim
// and record), with no Guard around them (no tokens, hashing, operation,
// canonical JSON or logging). Set beside the Guard's cycles it tells what
// the library's Go code adds to the statements it must run; set beside
// the bare transactions, what those statements cost.
// Its changes are numbered by s.seq, as the Guard's cycles of s are.
func ledgerOnly(ctx context.Context, l *ledger.Ledger, s *store, d time.Duration) (rawResult, error) {
	payload := json.RawMessage(`{"key":"k","value":"ledger-only","tag":"ledger-only"}`)
	diff := json.RawMessage(`[{"field":"k","kind":"changed","before":"old","after":"ledger-only"}]`)
	n := 0
	cpu0, start := cpuTime(), time.Now()
	for time.Since(start) < d {
		n++
		s.seq++
		now := l.Now()
		c := &ledger.Change{ID: fmt.Sprintf("chg_ledgeronly%010d", s.seq), Action: opOrdinary, Status: ledger.Pending,
			ScopeHash: "bench", Resource: "key:k", Payload: payload, PayloadHash: "p", Diff: diff, Summary: "set k",
			StateHash: "s", ConfirmHash: "c", Undoable: true, PreviewedBy: "agent", CreatedAt: now, UpdatedAt: now,
			ExpiresAt: now.Add(time.Hour)}
		if err := l.WithTx(ctx, func(tx *ledger.Tx) error { return tx.InsertChange(c) }); err != nil {
			return rawResult{}, err
		}
		for _, move := range []struct {
			from, to ledger.Status
			claim    bool
		}{{ledger.Pending, ledger.Applying, true}, {ledger.Applying, ledger.Applied, false},
			{ledger.Applied, ledger.Undoing, true}, {ledger.Undoing, ledger.Undone, false}} {
			err := l.WithTx(ctx, func(tx *ledger.Tx) error {
				if move.claim {
					stored, err := tx.Change(c.ID)
					if err != nil {
						return err
					}
					c = stored
				}
				c.Status, c.UpdatedAt = move.to, l.Now()
				switch move.to {
				case ledger.Applying:
					c.ConfirmHash, c.AppliedBy = "", "agent"
				case ledger.Applied:
					c.AppliedAt, c.UndoHash, c.Result = c.UpdatedAt, "u", json.RawMessage(`{"previous":"old"}`)
				case ledger.Undoing:
					c.UndoHash, c.UndoneBy = "", "agent"
				case ledger.Undone:
					c.UndoneAt = c.UpdatedAt
				}
				return tx.UpdateChange(c, move.from)
			})
			if err != nil {
				return rawResult{}, err
			}
		}
	}
	return rawResult{Commits: 5 * n, Elapsed: time.Since(start), CPU: cpuTime() - cpu0}, nil
}
