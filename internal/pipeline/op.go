package pipeline

import (
	"context"
	"database/sql"
	"encoding/json"
	"fmt"

	"github.com/mcp-changeset/changeset-go/internal/voice"
)

// Op is an operation with its types erased to canonical JSON, as the
// pipeline stores and calls it; the root package's Register builds one
// from a typed Operation. Its functions return a panic of the operation's
// code as an error, so that one bad operation cannot take the server down
// with a claim open.
type Op struct {
	Name        string
	Description string
	// Preview decodes the agent's arguments and proposes a change.
	Preview func(ctx context.Context, args json.RawMessage) (Proposal, error)
	Apply   func(ctx context.Context, payload json.RawMessage) (any, error)
	Undo    func(ctx context.Context, payload, result json.RawMessage) error // nil: no undo
	Observe func(ctx context.Context, payload json.RawMessage) (any, error)  // nil: no state checks
	// Tx holds the functions of an operation on the ledger's database
	// (ApplyTx, UndoTx, ObserveTx), which replace Apply, Undo and
	// Observe; nil for any other operation.
	Tx *TxFuncs
	// Redact names the payload fields tagged `changeset:"redact"`.
	Redact []string
	// AllowEmptyDiff lets a proposal with an empty diff be stored.
	AllowEmptyDiff bool
	// Approvers is how many distinct people must approve each apply and
	// undo of the operation's changes (person approval), 0 when nobody
	// but the token's holder has to. The Guard sets it from its options
	// and the operation's own override when it registers the operation.
	Approvers int
}

// TxFuncs are the ApplyTx, UndoTx and ObserveTx of an operation on the
// ledger's own database, with their types erased. They run inside the
// ledger's write transaction tx.
type TxFuncs struct {
	Apply   func(ctx context.Context, tx *sql.Tx, payload json.RawMessage) (any, error)
	Undo    func(ctx context.Context, tx *sql.Tx, payload, result json.RawMessage) error // nil: no undo
	Observe func(ctx context.Context, tx *sql.Tx, payload json.RawMessage) (any, error)  // nil: no checks
}

// HasUndo reports whether the operation has an inverse.
func (o *Op) HasUndo() bool { return o.Undo != nil || (o.Tx != nil && o.Tx.Undo != nil) }

// HasObserve reports whether the operation checks state.
func (o *Op) HasObserve() bool { return o.Observe != nil || (o.Tx != nil && o.Tx.Observe != nil) }

// Proposal is a proposal in the form the ledger keeps.
type Proposal struct {
	Payload   json.RawMessage
	Diff      json.RawMessage
	Summary   string
	Warnings  []string
	Resource  string
	Resources []string // of a change that names several; then Resource is ""
	DependsOn []string
	// State is the canonical Snapshot the preview was computed from, or
	// nil when the proposal carries none.
	State json.RawMessage
}

// CheckStates checks that a state observed for a change that names
// several resources is an object holding exactly those resources (see
// changeset.States). It accepts any state of a change that names one or
// none.
func CheckStates(resources []string, state json.RawMessage) error {
	if resources == nil {
		return nil
	}
	var m map[string]json.RawMessage
	if err := json.Unmarshal(state, &m); err != nil || m == nil {
		return fmt.Errorf("changeset: a change that names several resources must be observed as a changeset.States, not %s", voice.Cut(string(state), 60))
	}
	for _, r := range resources {
		if _, ok := m[r]; !ok {
			return fmt.Errorf("changeset: the observed States has no state for resource %q (a resource that does not exist is nil)", r)
		}
	}
	if len(m) != len(resources) {
		return fmt.Errorf("changeset: the observed States holds %d resources, but the change names %d", len(m), len(resources))
	}
	return nil
}
