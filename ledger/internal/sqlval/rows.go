package sqlval

import (
	"encoding/json"
	"time"

	"github.com/mcp-changeset/changeset-go/ledger"
)

// Changes is the one mapping between rows of the changes table and
// ledger.Change, for every backend. Fixed columns are set when the change
// is previewed and never written again: id, action, scope_hash, run_id,
// created_at, depends_on, previewed_by and resources. A backend also keeps
// change_deps, one row per resource of depends_on, when it inserts a
// change.
var Changes = NewTable(
	fixed(Text("id", func(c *ledger.Change) *string { return &c.ID })),
	fixed(Text("action", func(c *ledger.Change) *string { return &c.Action })),
	Text("status", func(c *ledger.Change) *ledger.Status { return &c.Status }),
	fixed(Text("scope_hash", func(c *ledger.Change) *ledger.Digest { return &c.ScopeHash })),
	fixed(OptText("run_id", func(c *ledger.Change) *string { return &c.RunID })),
	Text("resource", func(c *ledger.Change) *string { return &c.Resource }),
	JSON("payload", func(c *ledger.Change) *json.RawMessage { return &c.Payload }),
	Text("payload_hash", func(c *ledger.Change) *ledger.Digest { return &c.PayloadHash }),
	JSON("diff", func(c *ledger.Change) *json.RawMessage { return &c.Diff }),
	Text("summary", func(c *ledger.Change) *string { return &c.Summary }),
	Strings("warnings", func(c *ledger.Change) *[]string { return &c.Warnings }),
	Text("state_hash", func(c *ledger.Change) *ledger.Digest { return &c.StateHash }),
	JSON("before_state", func(c *ledger.Change) *json.RawMessage { return &c.Before }),
	JSON("after_state", func(c *ledger.Change) *json.RawMessage { return &c.After }),
	Text("confirm_hash", func(c *ledger.Change) *ledger.Digest { return &c.ConfirmHash }),
	Text("undo_hash", func(c *ledger.Change) *ledger.Digest { return &c.UndoHash }),
	Bool("undoable", func(c *ledger.Change) *bool { return &c.Undoable }),
	Bool("transactional", func(c *ledger.Change) *bool { return &c.Transactional }),
	JSON("result", func(c *ledger.Change) *json.RawMessage { return &c.Result }),
	Text("error_type", func(c *ledger.Change) *string { return &c.ErrorType }),
	Text("error", func(c *ledger.Change) *string { return &c.Error }),
	Text("note", func(c *ledger.Change) *string { return &c.Note }),
	Text("applied_by", func(c *ledger.Change) *string { return &c.AppliedBy }),
	Text("undone_by", func(c *ledger.Change) *string { return &c.UndoneBy }),
	fixed(Time("created_at", func(c *ledger.Change) *time.Time { return &c.CreatedAt })),
	Time("updated_at", func(c *ledger.Change) *time.Time { return &c.UpdatedAt }),
	Time("expires_at", func(c *ledger.Change) *time.Time { return &c.ExpiresAt }),
	Time("applied_at", func(c *ledger.Change) *time.Time { return &c.AppliedAt }),
	Time("undo_expires_at", func(c *ledger.Change) *time.Time { return &c.UndoExpiresAt }),
	Time("undone_at", func(c *ledger.Change) *time.Time { return &c.UndoneAt }),
	Strings("redact_fields", func(c *ledger.Change) *[]string { return &c.RedactFields }),
	Time("redacted_at", func(c *ledger.Change) *time.Time { return &c.RedactedAt }),
	Text("failure", func(c *ledger.Change) *ledger.Failure { return &c.Failure }),
	Bool("nothing_written", func(c *ledger.Change) *bool { return &c.NothingWritten }),
	fixed(Strings("depends_on", func(c *ledger.Change) *[]string { return &c.DependsOn })),
	fixed(Text("previewed_by", func(c *ledger.Change) *string { return &c.PreviewedBy })),
	JSON("undo_found_state", func(c *ledger.Change) *json.RawMessage { return &c.UndoFound }),
	fixed(Strings("resources", func(c *ledger.Change) *[]string { return &c.Resources })),
)

// Runs is the one mapping between rows of the runs table and ledger.Run,
// for every backend. Fixed columns are set when the run starts: id,
// scope_hash, created_at, kind, session_key and started_by. An empty Kind is stored,
// and reads back, as ledger.RunTask.
var Runs = NewTable(
	fixed(Text("id", func(r *ledger.Run) *string { return &r.ID })),
	Text("label", func(r *ledger.Run) *string { return &r.Label }),
	fixed(Text("scope_hash", func(r *ledger.Run) *ledger.Digest { return &r.ScopeHash })),
	Text("status", func(r *ledger.Run) *ledger.RunStatus { return &r.Status }),
	Text("plan_hash", func(r *ledger.Run) *ledger.Digest { return &r.PlanHash }),
	Text("confirm_hash", func(r *ledger.Run) *ledger.Digest { return &r.ConfirmHash }),
	Time("confirm_expires_at", func(r *ledger.Run) *time.Time { return &r.ConfirmExpiresAt }),
	JSON("report", func(r *ledger.Run) *json.RawMessage { return &r.Report }),
	Text("undone_by", func(r *ledger.Run) *string { return &r.UndoneBy }),
	fixed(Time("created_at", func(r *ledger.Run) *time.Time { return &r.CreatedAt })),
	Time("updated_at", func(r *ledger.Run) *time.Time { return &r.UpdatedAt }),
	fixed(TextOr("kind", func(r *ledger.Run) *ledger.RunKind { return &r.Kind }, ledger.RunTask)),
	fixed(Text("session_key", func(r *ledger.Run) *ledger.Digest { return &r.SessionKey })),
	fixed(Text("started_by", func(r *ledger.Run) *string { return &r.StartedBy })),
)

// ScanKey reads a change's key, as the columns created_at, id.
func ScanKey(s Scanner) (ledger.ChangeKey, error) {
	var k ledger.ChangeKey
	var created int64
	err := s.Scan(&created, &k.ID)
	k.CreatedAt = time.UnixMicro(created).UTC()
	return k, err
}
