package ledger

import (
	"encoding/json"
	"time"
)

// RunStatus is the state of a run.
type RunStatus string

// The statuses of a run.
const (
	// RunOpen: changes may join the run.
	RunOpen RunStatus = "open"
	// RunUndoing: an undo of the run is in progress; no change may join.
	RunUndoing RunStatus = "undoing"
	// RunUndone: every change of the run was undone or needed no write.
	RunUndone RunStatus = "undone"
	// RunPartiallyUndone: the undo finished but skipped some changes (people
	// had since made them their own) or could not undo them.
	RunPartiallyUndone RunStatus = "partially_undone"
)

// RunStatuses lists every run status.
var RunStatuses = []RunStatus{RunOpen, RunUndoing, RunUndone, RunPartiallyUndone}

// Valid reports whether s is one of the run statuses above.
func (s RunStatus) Valid() bool {
	for _, v := range RunStatuses {
		if s == v {
			return true
		}
	}
	return false
}

// RunKind says how a run was started.
type RunKind string

// The kinds of run.
const (
	// RunTask: started by start_run (or Guard.StartRun) for a named task.
	RunTask RunKind = "task"
	// RunSession: started by the library for a caller's session, joined
	// by the previews that name no run.
	RunSession RunKind = "session"
)

// Run groups the changes of one agent task so that they can be reviewed and
// undone as a unit.
type Run struct {
	ID        string // "run_" + 20 lowercase hex characters
	Label     string
	ScopeHash Digest
	Status    RunStatus
	// Kind says how the run was started: RunTask or RunSession.
	Kind RunKind
	// SessionKey identifies the session (or principal) a session run
	// belongs to: a digest, never shown to people. Empty for task runs.
	SessionKey Digest
	// StartedBy names who started the run ("agent:alice"), as its first
	// history entry does: set by Tx.InsertRunBy. Empty for a run started
	// by nobody in particular, and for a run from before the ledger
	// recorded it whose history did not say.
	StartedBy string

	// PlanHash and ConfirmHash bind the confirmation token of the latest
	// undo dry run to the plan it showed; ConfirmExpiresAt is that token's
	// expiry. All three are cleared when the token is spent.
	PlanHash         Digest
	ConfirmHash      Digest
	ConfirmExpiresAt time.Time

	// Report is the stored report of the undo, canonical JSON, or nil.
	Report json.RawMessage
	// UndoneBy names who undid the run ("agent", "person:<name>").
	UndoneBy string

	CreatedAt time.Time
	UpdatedAt time.Time
}

// Clone returns a copy of r that shares no mutable memory with it.
func (r *Run) Clone() *Run {
	d := *r
	d.Report = cloneBytes(r.Report)
	return &d
}
