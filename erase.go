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
	"github.com/mcp-changeset/changeset-go/internal/pipeline"
	"github.com/mcp-changeset/changeset-go/internal/voice"
)

// Erasure: Register turns a typed Operation into a pipeline.Op, whose
// functions take and return canonical JSON. The payload each function
// receives is decoded from the ledger's stored bytes, never from the
// agent's call, and a panic in the operation's code comes back as a
// *PanicError.

// erase turns a typed Operation into the pipeline's Op.
func erase[In, P, R any](name, description string, o Operation[In, P, R]) *pipeline.Op {
	e := &pipeline.Op{
		Name:           name,
		Description:    description,
		Redact:         redactFields[P](),
		AllowEmptyDiff: o.AllowEmptyDiff,
		Preview: func(ctx context.Context, args json.RawMessage) (pipeline.Proposal, error) {
			var in In
			if err := decodeStrict(args, &in); err != nil {
				return pipeline.Proposal{}, Refuse("%s", voice.InvalidArgs(name, decodeProblem(err)))
			}
			p, err := o.Preview(ctx, in)
			switch {
			case err != nil:
				return pipeline.Proposal{}, err
			case p == nil:
				return pipeline.Proposal{}, errNoProposal
			}
			return canonicalProposal(*p)
		},
	}
	if o.ApplyTx != nil {
		e.Tx = eraseTx(o)
		return e
	}
	e.Apply = func(ctx context.Context, payload json.RawMessage) (any, error) {
		return call(func() (any, error) {
			p, err := decodePayload[P](payload)
			if err != nil {
				return nil, err
			}
			return o.Apply(ctx, p)
		})
	}
	if o.Undo != nil {
		e.Undo = func(ctx context.Context, payload, result json.RawMessage) error {
			_, err := call(func() (any, error) {
				p, r, err := decodeStored[P, R](payload, result)
				if err != nil {
					return nil, err
				}
				return nil, o.Undo(ctx, p, r)
			})
			return err
		}
	}
	if o.Observe != nil {
		e.Observe = func(ctx context.Context, payload json.RawMessage) (any, error) {
			return call(func() (any, error) {
				p, err := decodePayload[P](payload)
				if err != nil {
					return nil, err
				}
				return o.Observe(ctx, p)
			})
		}
	}
	return e
}

// eraseTx erases the transactional functions of o.
func eraseTx[In, P, R any](o Operation[In, P, R]) *pipeline.TxFuncs {
	t := &pipeline.TxFuncs{
		Apply: func(ctx context.Context, tx *sql.Tx, payload json.RawMessage) (any, error) {
			return call(func() (any, error) {
				p, err := decodePayload[P](payload)
				if err != nil {
					return nil, err
				}
				return o.ApplyTx(ctx, tx, p)
			})
		},
	}
	if o.UndoTx != nil {
		t.Undo = func(ctx context.Context, tx *sql.Tx, payload, result json.RawMessage) error {
			_, err := call(func() (any, error) {
				p, r, err := decodeStored[P, R](payload, result)
				if err != nil {
					return nil, err
				}
				return nil, o.UndoTx(ctx, tx, p, r)
			})
			return err
		}
	}
	if o.ObserveTx != nil {
		t.Observe = func(ctx context.Context, tx *sql.Tx, payload json.RawMessage) (any, error) {
			return call(func() (any, error) {
				p, err := decodePayload[P](payload)
				if err != nil {
					return nil, err
				}
				return o.ObserveTx(ctx, tx, p)
			})
		}
	}
	return t
}

// call runs trusted operation code, turning a panic into a *PanicError so
// that one bad operation cannot take the server down with a claim open.
func call(fn func() (any, error)) (out any, err error) {
	defer func() {
		if v := recover(); v != nil {
			out, err = nil, &PanicError{Value: v}
		}
	}()
	return fn()
}

func decodePayload[P any](payload json.RawMessage) (P, error) {
	var p P
	if err := json.Unmarshal(payload, &p); err != nil {
		return p, fmt.Errorf("decode stored payload: %w", err)
	}
	return p, nil
}

// decodeStored decodes a change's stored payload and apply result.
func decodeStored[P, R any](payload, result json.RawMessage) (P, R, error) {
	var r R
	p, err := decodePayload[P](payload)
	if err != nil || len(result) == 0 {
		return p, r, err
	}
	if err := json.Unmarshal(result, &r); err != nil {
		return p, r, fmt.Errorf("decode stored result: %w", err)
	}
	return p, r, nil
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
func canonicalProposal[P any](p Proposal[P]) (pipeline.Proposal, error) {
	payload, err := canonjson.Marshal(p.Payload)
	if err != nil {
		return pipeline.Proposal{}, Refuse("%s", voice.ProposalUnstorable("payload", err.Error()))
	}
	entries := withKinds(slices.Clone(p.Diff))
	if entries == nil {
		entries = []DiffEntry{}
	}
	for _, e := range entries {
		if e.Kind != DiffAdded && e.Kind != DiffRemoved && e.Kind != DiffChanged {
			return pipeline.Proposal{}, Refuse("%s", voice.BadDiffKind(e.Field, string(e.Kind)))
		}
	}
	diff, err := canonjson.Marshal(entries)
	if err != nil {
		return pipeline.Proposal{}, Refuse("%s", voice.ProposalUnstorable("diff", err.Error()))
	}
	if err := checkResources(p.Resource, p.Resources); err != nil {
		return pipeline.Proposal{}, err
	}
	for _, s := range append(append([]string{p.Summary, p.Resource}, p.Warnings...), p.DependsOn...) {
		if !utf8.ValidString(s) {
			return pipeline.Proposal{}, Refuse("%s", voice.ProposalBadUTF8())
		}
	}
	if len(p.DependsOn) > maxDependsOn {
		return pipeline.Proposal{}, Refuse("%s", voice.TooManyDependsOn(len(p.DependsOn), maxDependsOn))
	}
	for _, d := range p.DependsOn {
		if d == "" || len(d) > maxResourceBytes {
			return pipeline.Proposal{}, Refuse("%s", voice.DependsOnSize(maxResourceBytes))
		}
	}
	sp := pipeline.Proposal{Payload: payload, Diff: diff, Summary: p.Summary, Warnings: p.Warnings, Resource: p.Resource, DependsOn: p.DependsOn}
	if len(p.Resources) > 0 {
		sp.Resources = slices.Clone(p.Resources)
	}
	if p.Snapshot != nil {
		if sp.State, err = canonjson.Marshal(p.Snapshot.Value); err != nil {
			return pipeline.Proposal{}, Refuse("%s", voice.ProposalUnstorable("snapshot", err.Error()))
		}
		if err := pipeline.CheckStates(sp.Resources, sp.State); err != nil {
			return pipeline.Proposal{}, fmt.Errorf("the proposal's Snapshot: %w", err)
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
