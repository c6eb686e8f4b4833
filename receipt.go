package changeset

import (
	"context"

	"github.com/mcp-changeset/changeset-go/internal/voice"
	"github.com/mcp-changeset/changeset-go/ledger"
)

// Receipts. The ledger's history is a hash chain (see ledger.HistoryHash):
// every transition of a change is an entry with a number (Seq) and a hash
// over its fields and the entries before it. A receipt names that entry,
// so whoever keeps it can later have the ledger's operator show that
// entry and check that the chain still holds it (ledger.Ledger.Verify): a
// history rewritten after the receipt was handed out no longer does.
//
// The rule, in one place (receiptOf): an apply_change or undo_change that
// succeeded returns the receipt of the change's entry that moved it to
// applied or undone. A change reaches each of those once at most, so the
// entry is never in doubt. A failed apply or undo returns a tool error,
// which carries no receipt: its apply_failed or undo_failed entry is among
// the receipts get_change_status shows. The undo of a run carries none
// either; each change it undid shows its own.
//
// A hash is no secret: it is a digest of the entry's own fields, none of
// which is a token, a digest of one or a payload (see ledger.HistoryEntry).

// Receipt names the history entry that recorded a step: its number in the
// ledger's history and its hash (64 lower-case hex characters).
type Receipt struct {
	Seq  int64  `json:"seq" jsonschema:"the entry's number in the history"`
	Hash string `json:"hash" jsonschema:"the entry's hash, in hex"`
}

// TransitionReceipt is the receipt of one transition of a change, as
// get_change_status lists them: the entry's Seq and Hash, the status the
// change moved to, and when.
type TransitionReceipt struct {
	Seq  int64  `json:"seq" jsonschema:"the entry's number in the history"`
	Hash string `json:"hash" jsonschema:"the entry's hash, in hex"`
	To   string `json:"to" jsonschema:"the status it moved to"`
	At   string `json:"at" jsonschema:"when"`
}

// maxReceipts bounds the receipts of a change's status, keeping the
// newest. The state machine moves a change at most five times (pending,
// applying, applied, undoing, undone), so the bound only guards against a
// history no Guard wrote.
const maxReceipts = 8

// receiptPage is how many history entries transitions reads at a time:
// a change's entries include those of its approvals, which it skips.
const receiptPage = 50

// transitions returns the history entries of change id's own transitions,
// oldest first (by Seq), the newest maxReceipts of them; the entries of
// its approvals are left out, since their statuses are an approval's.
func (g *Guard) transitions(ctx context.Context, id string) ([]ledger.HistoryEntry, error) {
	var out []ledger.HistoryEntry
	f := ledger.HistoryFilter{ChangeID: id, Limit: receiptPage}
	for {
		page, err := g.ledger.History(ctx, f)
		if err != nil {
			return nil, err
		}
		for _, e := range page {
			if e.ApprovalID == "" && e.ChangeID == id {
				out = append(out, e)
			}
		}
		if len(out) > maxReceipts {
			out = append(out[:0], out[len(out)-maxReceipts:]...)
		}
		if len(page) < receiptPage {
			return out, nil
		}
		f.After = page[len(page)-1].Seq
	}
}

// receiptOf is the receipt of change id's move to status to: the link of
// the newest entry of its history that recorded that move. It is read
// after the move committed, since the ledger numbers and hashes entries
// at the commit. The step it describes has happened whatever this read
// does, so a ledger that cannot be read now costs the result its receipt,
// never its success: receiptOf then logs why and returns nil.
func (g *Guard) receiptOf(ctx context.Context, id string, to ledger.Status) *Receipt {
	entries, err := g.transitions(context.WithoutCancel(ctx), id)
	if err != nil {
		g.log.Warn("receipt not read; the result carries none", "change_id", id, "status", string(to), "err", err)
		return nil
	}
	for i := len(entries) - 1; i >= 0; i-- {
		if e := entries[i]; e.To == string(to) {
			return &Receipt{Seq: e.Seq, Hash: e.Hash.String()}
		}
	}
	g.log.Warn("receipt not found in the history; the result carries none", "change_id", id, "status", string(to))
	return nil
}

// receiptsOf lists entries, as transitions returns them, as the receipts
// of a change's status.
func receiptsOf(entries []ledger.HistoryEntry) []TransitionReceipt {
	out := make([]TransitionReceipt, 0, len(entries))
	for _, e := range entries {
		out = append(out, TransitionReceipt{Seq: e.Seq, Hash: e.Hash.String(), To: e.To, At: voice.Time(e.At)})
	}
	return out
}
