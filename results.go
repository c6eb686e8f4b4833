package changeset

import (
	"encoding/json"

	"github.com/mcp-changeset/changeset-go/internal/diffview"
	"github.com/mcp-changeset/changeset-go/internal/voice"
	"github.com/mcp-changeset/changeset-go/ledger"
)

// PreviewResult is what a preview returns to the agent.
type PreviewResult struct {
	Status   string      `json:"status" jsonschema:"preview"`
	ChangeID string      `json:"change_id" jsonschema:"the change"`
	Action   string      `json:"action" jsonschema:"the operation"`
	Summary  string      `json:"summary" jsonschema:"what it does"`
	Diff     []DiffEntry `json:"diff" jsonschema:"what would change"`
	// ConfirmationToken unlocks apply_change once. It is left out when the
	// user approves changes through the client instead.
	ConfirmationToken string   `json:"confirmation_token,omitempty" jsonschema:"applies it once"`
	ExpiresAt         string   `json:"expires_at" jsonschema:"when the preview expires"`
	WritesEnabled     bool     `json:"writes_enabled" jsonschema:"false: writes are off"`
	NextStep          string   `json:"next_step" jsonschema:"what to do next"`
	RunID             string   `json:"run_id,omitempty" jsonschema:"its run"`
	Warnings          []string `json:"warnings,omitempty" jsonschema:"what cannot be undone exactly"`
	// Approval is the people's approval the apply needs, under person
	// approval: requested with the preview, bound to its payload.
	Approval *ApprovalRef `json:"approval,omitempty" jsonschema:"{id, url, needed}: a person approves at url"`
}

// ApprovalRef names an approval that people must give before a write (see
// PersonApproval): the agent gives the user its URL. Its output schema is
// a plain object whose fields the description of the field that holds it
// names, to keep tools/list small.
type ApprovalRef struct {
	ID     string `json:"id" jsonschema:"the approval, apr_..."`
	URL    string `json:"url,omitempty" jsonschema:"where a person approves; give it to the user"`
	Needed int    `json:"needed" jsonschema:"how many people must approve"`
	// Status is where the approval stands (waiting, approved, declined,
	// expired, used), in a change's status only.
	Status string `json:"status,omitempty" jsonschema:"waiting, approved, declined, expired or used"`
}

// ApplyResult is what a successful apply returns.
type ApplyResult struct {
	Status   string          `json:"status" jsonschema:"applied"`
	ChangeID string          `json:"change_id" jsonschema:"the change"`
	Result   json.RawMessage `json:"result" jsonschema:"what the operation returned"`
	// UndoToken unlocks undo_change once; absent when the operation has no
	// inverse.
	UndoToken     string `json:"undo_token,omitempty" jsonschema:"undoes it once, if it has an undo"`
	UndoExpiresAt string `json:"undo_expires_at,omitempty" jsonschema:"when the undo token expires"`
	// Receipt names the history entry that recorded the apply (see
	// Receipt); absent only when the ledger could not be read back.
	Receipt *Receipt `json:"receipt,omitempty" jsonschema:"the history entry that recorded it"`
}

// UndoResult is what a successful undo returns.
type UndoResult struct {
	Status   string `json:"status" jsonschema:"undone"`
	ChangeID string `json:"change_id" jsonschema:"the change"`
	// Receipt names the history entry that recorded the undo, as
	// ApplyResult's does.
	Receipt *Receipt `json:"receipt,omitempty" jsonschema:"the history entry that recorded it"`
}

// ChangeStatus is a change as the agent may see it: no tokens, no digests,
// and of a failure only its Go type name.
type ChangeStatus struct {
	ChangeID      string      `json:"change_id" jsonschema:"the change"`
	Action        string      `json:"action" jsonschema:"the operation"`
	Status        string      `json:"status" jsonschema:"pending, applied, undone, expired, apply_failed..."`
	Summary       string      `json:"summary" jsonschema:"what it does"`
	Diff          []DiffEntry `json:"diff" jsonschema:"what changes"`
	RunID         string      `json:"run_id,omitempty" jsonschema:"its run"`
	Resource      string      `json:"resource,omitempty" jsonschema:"what it changes"`
	Warnings      []string    `json:"warnings,omitempty" jsonschema:"what cannot be undone exactly"`
	Undoable      bool        `json:"undoable" jsonschema:"an undo can be claimed now"`
	CreatedAt     string      `json:"created_at" jsonschema:"when previewed"`
	UpdatedAt     string      `json:"updated_at" jsonschema:"last update"`
	ExpiresAt     string      `json:"expires_at" jsonschema:"when the preview expires"`
	AppliedAt     string      `json:"applied_at,omitempty" jsonschema:"when applied"`
	UndoExpiresAt string      `json:"undo_expires_at,omitempty" jsonschema:"when the undo window closes"`
	UndoneAt      string      `json:"undone_at,omitempty" jsonschema:"when undone"`
	Error         string      `json:"error,omitempty" jsonschema:"why it failed (words or an error type)"`
	// Failure says why an apply_failed or undo_failed change failed:
	// state_changed, error, result_too_large or interrupted.
	// PreviewedBy, AppliedBy and UndoneBy name who took each step:
	// "agent:<principal>", "agent", or "person:<name>".
	PreviewedBy string `json:"previewed_by,omitempty" jsonschema:"who previewed it"`
	AppliedBy   string `json:"applied_by,omitempty" jsonschema:"who applied it"`
	UndoneBy    string `json:"undone_by,omitempty" jsonschema:"who undid it"`
	Failure     string `json:"failure,omitempty" jsonschema:"state_changed, error, result_too_large or interrupted"`
	// NothingWritten is true when the library knows the failed change
	// wrote nothing.
	NothingWritten bool `json:"nothing_written,omitempty" jsonschema:"the failure wrote nothing"`
	// Approval is the change's latest approval by people, under person
	// approval (get_change_status only).
	Approval *ApprovalRef `json:"approval,omitempty" jsonschema:"{id, url, needed, status}: its latest approval by people"`
	// Receipts are the receipts of the change's transitions, oldest
	// first: the history entries that recorded them (get_change_status
	// only; a run's list of changes leaves them out).
	Receipts []TransitionReceipt `json:"receipts,omitempty" jsonschema:"the history entries of its transitions"`
}

// statusOf builds the agent's view of a change, as of now: Undoable only
// when an undo could be claimed now, AppliedBy only for a change that was
// applied, and a failure in the words of the voice (see
// voice.Voice.FailureError).
func (g *Guard) statusOf(c *ledger.Change) *ChangeStatus {
	appliedBy := ""
	switch c.Status {
	case ledger.Applied, ledger.Undoing, ledger.Undone, ledger.UndoFailed:
		appliedBy = c.AppliedBy
	}
	return &ChangeStatus{
		ChangeID:       c.ID,
		Action:         c.Action,
		Status:         string(c.Status),
		Summary:        c.Summary,
		Diff:           diffEntries(c.Diff),
		RunID:          c.RunID,
		Resource:       c.Resource,
		Warnings:       c.Warnings,
		Undoable:       g.undoableNow(c),
		CreatedAt:      voice.Time(c.CreatedAt),
		UpdatedAt:      voice.Time(c.UpdatedAt),
		ExpiresAt:      voice.Time(c.ExpiresAt),
		AppliedAt:      voice.Time(c.AppliedAt),
		UndoExpiresAt:  voice.Time(c.UndoExpiresAt),
		UndoneAt:       voice.Time(c.UndoneAt),
		Error:          g.voice.FailureError(string(c.Failure), c.ErrorType, storedErrorKind(c.ErrorType)),
		PreviewedBy:    c.PreviewedBy,
		AppliedBy:      appliedBy,
		UndoneBy:       c.UndoneBy,
		Failure:        string(c.Failure),
		NothingWritten: c.NothingWritten,
	}
}

// undoableNow reports whether an undo of c could be claimed now: it is
// applied, its operation has an inverse and is still registered, its undo
// token is live, and its undo window is open.
func (g *Guard) undoableNow(c *ledger.Change) bool {
	if c.Status != ledger.Applied || !c.Undoable || c.UndoHash == "" {
		return false
	}
	if !c.UndoExpiresAt.IsZero() && !g.now().Before(c.UndoExpiresAt) {
		return false
	}
	o, ok := g.lookup(c.Action)
	return ok && o.HasUndo()
}

// diffEntries decodes a stored canonical diff for a result: every entry
// with its kind, and Before and After as the stored JSON text (null for
// the side an added or removed field lacks). The ledger only ever holds
// diffs the Guard encoded, so a decoding failure yields an empty diff.
func diffEntries(stored json.RawMessage) []DiffEntry {
	lines, _ := diffview.Decode(stored)
	out := make([]DiffEntry, 0, len(lines))
	for _, l := range lines {
		out = append(out, DiffEntry{Field: l.Field, Kind: DiffKind(l.Kind), Before: l.Before, After: l.After})
	}
	return out
}

// rawLen is the length of a result's diff value: its JSON text.
func rawLen(v any) int {
	raw, _ := v.(json.RawMessage)
	return len(raw)
}
