package changeset

import (
	"bytes"
	"context"
	"database/sql"
	"encoding/json"
	"errors"
	"fmt"
	"reflect"
	"slices"
	"strconv"
	"strings"
	"unicode/utf8"

	"github.com/mcp-changeset/changeset-go/internal/canonjson"
	"github.com/mcp-changeset/changeset-go/internal/voice"
)

// Operation is a state-changing operation split into preview, apply and
// undo. In is the preview tool's input (its JSON schema is inferred from
// the type, as mcp.AddTool does), P the payload stored in the ledger and R
// what the apply returns. Define one as a struct literal and add it to a
// Guard with [Register]:
//
//	changeset.Register(guard, &mcp.Tool{Name: "set_setting", Description: "Change a setting."},
//		changeset.Operation[SetIn, SetIn, Previous]{
//			Preview: func(ctx context.Context, in SetIn) (*changeset.Proposal[SetIn], error) {
//				old, ok := settings[in.Key]
//				if !ok {
//					return nil, changeset.Refuse("unknown setting %s", changeset.Quote(in.Key))
//				}
//				return &changeset.Proposal[SetIn]{Payload: in, Resource: "setting:" + in.Key, …}, nil
//			},
//			Apply:   func(ctx context.Context, p SetIn) (Previous, error) { … },
//			Undo:    func(ctx context.Context, p SetIn, r Previous) error { … },
//			Observe: func(ctx context.Context, p SetIn) (any, error) { … },
//		})
//
// Only Preview is reachable by the agent. The other functions are trusted
// code: they receive the payload decoded from the ledger's stored canonical
// JSON, never from the agent's call, so a token can only ever apply the
// exact payload that was previewed.
//
// # Data in the ledger's own database
//
// When the data lives in the ledger's database (see [Guard.Ledger] and
// ledger.Ledger.DB), set ApplyTx, UndoTx and ObserveTx instead of Apply,
// Undo and Observe. They receive the ledger's write transaction and run
// inside it, so the claim, the state check, the write and the ledger's
// bookkeeping commit together or not at all: the change is applied exactly
// once, and a crash at any point leaves it either pending with nothing
// written or applied with the write, never applying for an operator to
// reconcile. For anything else (files, remote APIs) at most once is the
// best any library can promise. The Tx functions must do all their work
// through tx and must not commit or roll it back; on SQLite the transaction
// holds the database's write lock, so keep them short. Preview always runs
// outside any transaction. An operation sets one family or the other.
type Operation[In, P, R any] struct {
	// Preview validates the input, reads what it needs and proposes a
	// change. It must not write. Return a refusal made by [Refuse] to
	// reject the input with a message for the agent; a nil proposal with
	// a nil error is an error.
	Preview func(ctx context.Context, in In) (*Proposal[P], error)
	// Apply performs the change and returns what Undo needs (e.g. the value
	// it replaced). The result is shown to the agent and stored.
	Apply func(ctx context.Context, p P) (R, error)
	// Undo reverses an applied change. Leave it nil for an operation that
	// cannot be undone; the agent then gets no undo token.
	Undo func(ctx context.Context, p P, result R) error
	// Observe returns the current state of what the change touches, as a
	// plain JSON value ([States] for a change that names several
	// resources). It is called at preview, again after the claim (the
	// apply is refused if the state changed), after the apply (the "after"
	// snapshot) and before an undo (refused unless the state still equals
	// that snapshot). Return only what counts as someone's work: what a
	// person may change that an undo must not destroy. Leave it nil to
	// skip the state checks.
	Observe func(ctx context.Context, p P) (any, error)

	// ApplyTx is Apply for data in the ledger's own database: it runs
	// inside the ledger's write transaction tx.
	ApplyTx func(ctx context.Context, tx *sql.Tx, p P) (R, error)
	// UndoTx is Undo inside the ledger's write transaction; nil if the
	// change cannot be undone.
	UndoTx func(ctx context.Context, tx *sql.Tx, p P, result R) error
	// ObserveTx is Observe inside the ledger's write transaction (at
	// preview, inside a read-only view of the database); nil skips the
	// state checks.
	ObserveTx func(ctx context.Context, tx *sql.Tx, p P) (any, error)

	// AllowEmptyDiff lets a preview whose diff is empty be stored and
	// applied. By default such a preview is refused ("nothing would
	// change", [ErrNoChange]) and nothing is stored, so that no one is
	// asked to approve a change that changes nothing. Set it for an
	// operation whose effect its diff does not show, such as one that only
	// touches a timestamp or triggers a side effect.
	AllowEmptyDiff bool
}

// check reports the first programming error in o's definition, or "".
func (o *Operation[In, P, R]) check() string {
	switch {
	case o.Preview == nil:
		return "Preview is required"
	case o.Apply == nil && o.ApplyTx == nil:
		return "Apply (or ApplyTx, for data in the ledger's database) is required"
	case o.Apply != nil && o.ApplyTx != nil:
		return "set Apply or ApplyTx, not both"
	case o.Apply != nil && (o.UndoTx != nil || o.ObserveTx != nil):
		return "an operation with Apply uses Undo and Observe, not UndoTx or ObserveTx"
	case o.ApplyTx != nil && (o.Undo != nil || o.Observe != nil):
		return "an operation with ApplyTx uses UndoTx and ObserveTx, not Undo or Observe"
	}
	return ""
}

// op is an Operation with its types erased to canonical JSON, as the Guard
// stores and calls it.
type op struct {
	name        string
	description string
	preview     func(ctx context.Context, args json.RawMessage) (storedProposal, error)
	apply       func(ctx context.Context, payload json.RawMessage) (any, error)
	undo        func(ctx context.Context, payload, result json.RawMessage) error // nil: no undo
	observe     func(ctx context.Context, payload json.RawMessage) (any, error)  // nil: no state checks
	// redact names the payload fields tagged `changeset:"redact"`.
	redact []string
	// tx holds the functions of an operation on the ledger's database
	// (ApplyTx, UndoTx, ObserveTx), which replace apply, undo and observe;
	// nil for any other operation.
	tx *txFuncs
	// allowEmptyDiff is the operation's AllowEmptyDiff.
	allowEmptyDiff bool
}

// hasUndo reports whether the operation has an inverse.
func (o *op) hasUndo() bool { return o.undo != nil || (o.tx != nil && o.tx.undo != nil) }

// hasObserve reports whether the operation checks state.
func (o *op) hasObserve() bool { return o.observe != nil || (o.tx != nil && o.tx.observe != nil) }

// storedProposal is a Proposal in the form the ledger keeps.
type storedProposal struct {
	payload   json.RawMessage
	diff      json.RawMessage
	summary   string
	warnings  []string
	resource  string
	resources []string // of a change that names several; then resource is ""
	depends   []string
	// state is the canonical Snapshot the preview was computed from, or
	// nil when the proposal carries none.
	state json.RawMessage
}

// erase turns a typed Operation into an op.
func erase[In, P, R any](name, description string, o Operation[In, P, R]) *op {
	e := &op{
		name:           name,
		description:    description,
		redact:         redactFields[P](),
		allowEmptyDiff: o.AllowEmptyDiff,
		preview: func(ctx context.Context, args json.RawMessage) (storedProposal, error) {
			var in In
			if err := decodeStrict(args, &in); err != nil {
				return storedProposal{}, Refuse("%s", voice.InvalidArgs(name, decodeProblem(err)))
			}
			p, err := o.Preview(ctx, in)
			switch {
			case err != nil:
				return storedProposal{}, err
			case p == nil:
				return storedProposal{}, errNoProposal
			}
			return canonicalProposal(*p)
		},
	}
	if o.ApplyTx != nil {
		e.tx = eraseTx(o)
		return e
	}
	e.apply = func(ctx context.Context, payload json.RawMessage) (any, error) {
		p, err := decodePayload[P](payload)
		if err != nil {
			return nil, err
		}
		return o.Apply(ctx, p)
	}
	if o.Undo != nil {
		e.undo = func(ctx context.Context, payload, result json.RawMessage) error {
			p, r, err := decodeStored[P, R](payload, result)
			if err != nil {
				return err
			}
			return o.Undo(ctx, p, r)
		}
	}
	if o.Observe != nil {
		e.observe = func(ctx context.Context, payload json.RawMessage) (any, error) {
			p, err := decodePayload[P](payload)
			if err != nil {
				return nil, err
			}
			return o.Observe(ctx, p)
		}
	}
	return e
}

// errNoProposal is what a Preview gets when it returns neither a proposal
// nor an error.
var errNoProposal = errors.New("changeset: the Preview returned neither a proposal nor an error")

// Bounds of a proposal's resource names.
const (
	maxDependsOn     = 32
	maxResources     = 1000
	maxResourceBytes = 512
)

// canonicalProposal converts a typed proposal to canonical JSON, refusing
// values that have no faithful JSON form (invalid UTF-8, NaN).
func canonicalProposal[P any](p Proposal[P]) (storedProposal, error) {
	payload, err := canonjson.Marshal(p.Payload)
	if err != nil {
		return storedProposal{}, Refuse("%s", voice.ProposalUnstorable("payload", err.Error()))
	}
	entries := withKinds(slices.Clone(p.Diff))
	if entries == nil {
		entries = []DiffEntry{}
	}
	for _, e := range entries {
		if e.Kind != DiffAdded && e.Kind != DiffRemoved && e.Kind != DiffChanged {
			return storedProposal{}, Refuse("%s", voice.BadDiffKind(e.Field, string(e.Kind)))
		}
	}
	diff, err := canonjson.Marshal(entries)
	if err != nil {
		return storedProposal{}, Refuse("%s", voice.ProposalUnstorable("diff", err.Error()))
	}
	if err := checkResources(p.Resource, p.Resources); err != nil {
		return storedProposal{}, err
	}
	for _, s := range append(append([]string{p.Summary, p.Resource}, p.Warnings...), p.DependsOn...) {
		if !utf8.ValidString(s) {
			return storedProposal{}, Refuse("%s", voice.ProposalBadUTF8())
		}
	}
	if len(p.DependsOn) > maxDependsOn {
		return storedProposal{}, Refuse("%s", voice.TooManyDependsOn(len(p.DependsOn), maxDependsOn))
	}
	for _, d := range p.DependsOn {
		if d == "" || len(d) > maxResourceBytes {
			return storedProposal{}, Refuse("%s", voice.DependsOnSize(maxResourceBytes))
		}
	}
	sp := storedProposal{payload: payload, diff: diff, summary: p.Summary, warnings: p.Warnings, resource: p.Resource, depends: p.DependsOn}
	if len(p.Resources) > 0 {
		sp.resources = slices.Clone(p.Resources)
	}
	if p.Snapshot != nil {
		if sp.state, err = canonjson.Marshal(p.Snapshot.Value); err != nil {
			return storedProposal{}, Refuse("%s", voice.ProposalUnstorable("snapshot", err.Error()))
		}
		if err := checkStates(sp.resources, sp.state); err != nil {
			return storedProposal{}, fmt.Errorf("the proposal's Snapshot: %w", err)
		}
	}
	return sp, nil
}

// checkResources checks the resource names of a proposal: Resource or
// Resources, each 1 to maxResourceBytes bytes of valid UTF-8, at most
// maxResources of them, none twice.
func checkResources(one string, several []string) error {
	switch {
	case one != "" && len(several) > 0:
		return errors.New("changeset: a proposal sets Resource or Resources, not both")
	case len(several) > maxResources:
		return Refuse("%s", voice.TooManyResources(len(several), maxResources))
	}
	seen := make(map[string]bool, len(several))
	for _, r := range several {
		if r == "" || len(r) > maxResourceBytes || !utf8.ValidString(r) {
			return Refuse("%s", voice.ResourceSize(maxResourceBytes))
		}
		if seen[r] {
			return fmt.Errorf("changeset: the proposal names resource %q twice", r)
		}
		seen[r] = true
	}
	return nil
}

// checkStates checks that a state observed for a change that names
// several resources is an object holding exactly those resources (see
// States). It accepts any state of a change that names one or none.
func checkStates(resources []string, state json.RawMessage) error {
	if resources == nil {
		return nil
	}
	var m map[string]json.RawMessage
	if err := json.Unmarshal(state, &m); err != nil || m == nil {
		return fmt.Errorf("changeset: a change that names several resources must be observed as a changeset.States, not %s", cut(string(state), 60))
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

// decodeProblem says what is wrong with arguments that did not decode,
// with the names and values the caller sent quoted as data.
func decodeProblem(err error) string {
	var (
		te *json.UnmarshalTypeError
		se *json.SyntaxError
	)
	switch {
	case errors.As(err, &te):
		if te.Field == "" {
			return "the arguments must be a JSON object"
		}
		return "field " + voice.Quote(te.Field) + " must be of JSON type " + jsonKind(te.Type) + ", not " + te.Value
	case errors.As(err, &se):
		return fmt.Sprintf("not valid JSON (at byte %d)", se.Offset)
	}
	if name, ok := strings.CutPrefix(err.Error(), "json: unknown field "); ok {
		if u, err := strconv.Unquote(name); err == nil {
			name = u
		}
		return "unknown field " + voice.Quote(name)
	}
	return voice.Quote(strings.TrimPrefix(err.Error(), "json: "))
}

// jsonKind names the JSON type that decodes into a Go type.
func jsonKind(t reflect.Type) string {
	switch t.Kind() {
	case reflect.String:
		return "string"
	case reflect.Bool:
		return "boolean"
	case reflect.Int, reflect.Int8, reflect.Int16, reflect.Int32, reflect.Int64,
		reflect.Uint, reflect.Uint8, reflect.Uint16, reflect.Uint32, reflect.Uint64, reflect.Float32, reflect.Float64:
		return "number"
	case reflect.Slice, reflect.Array:
		return "array"
	}
	return "object"
}

// decodeStrict decodes JSON into v, refusing unknown fields.
func decodeStrict(data json.RawMessage, v any) error {
	if len(data) == 0 {
		data = json.RawMessage("{}")
	}
	dec := json.NewDecoder(bytes.NewReader(data))
	dec.DisallowUnknownFields()
	return dec.Decode(v)
}
