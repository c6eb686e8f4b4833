package kv

import (
	"context"
	"encoding/json"
	"fmt"
	"maps"
	"slices"
	"strings"

	changeset "github.com/mcp-changeset/changeset-go"
	"github.com/mcp-changeset/changeset-go/internal/canonjson"
	"github.com/modelcontextprotocol/go-sdk/mcp"
)

// changes is the payload of SetMany: every key the change sets, in key
// order, each with its whole value before and after.
type changes struct {
	Keys []change `json:"keys"`
}

// appliedMany is what SetMany's apply returns to the agent: each key and
// the value it now holds.
type appliedMany struct {
	Keys []applied `json:"keys"`
}

// maxSummaryKeys is how many keys a summary names before "and N more".
const maxSummaryKeys = 5

// SetMany registers, under tool.Name, an operation that sets several keys
// in one change: f turns the tool's input into the keys and their new
// values (or returns an error, such as a changeset.Refuse, for input it
// does not accept). A key that is absent is created, one that exists is
// updated; there is one change, with one resource per key it changes
// ("setting:currency", "setting:tax_rate"), applied and undone as a whole:
//
//	settings := kv.Kind[any]{Name: "setting", Store: kv.NewJSONFile("settings.json")}
//	kv.SetMany(guard, &mcp.Tool{Name: "set_store_settings"}, settings,
//		func(ctx context.Context, in SettingsIn) (map[string]any, error) {
//			return map[string]any{"currency": in.Currency, "tax_rate": in.TaxRate}, nil
//		})
//
// The preview leaves out the keys that already hold their value, and is
// refused when none is left. Its diff has one entry per key it changes,
// named by the key, with the whole values before and after (a created key
// is "added"); its summary names the keys ("Set setting currency,
// tax_rate"). As Update does, it keeps the members of a stored object that
// the new value does not set, and the ignored members (Kind.Ignore) of a
// key that exists: SetMany sets what counts and nothing else. A value is
// stored as its JSON (a nil of an interface type is null, not a deletion).
// f is not given the current values; the change is bound to what the
// preview reads right after f returns, so a function that reads the Store
// itself to compute new values should keep that read close to its return.
//
// What is guaranteed. Before writing anything, the apply reads every key
// and refuses the whole change, writing nothing, if one of them differs
// from what the preview read (ignored members aside); its undo does the
// same against what the apply left. Every key is then compare-and-set
// against the exact value just read, so a writer who comes in between is
// caught too:
//
//   - On a Batcher (JSONFile, Map) every key is swapped in one step: the
//     change is written whole or not at all, and a JSONFile's readers see
//     the file before it or after it.
//   - On any other Store the keys are swapped one at a time. When one fails
//     the keys already swapped are swapped back, each compare-and-set, and
//     the change fails with nothing written. Only if a key was changed by
//     someone else in that instant too, so that it cannot be set back, are
//     the keys that could not be restored left as the change wrote them,
//     reported in a *PartialWriteError for an operator.
//
// A process that dies part-way through leaves the change "applying" (or
// "undoing") in the ledger for an operator, as for any changeset.Operation.
func SetMany[In, V any](g *changeset.Guard, tool *mcp.Tool, k Kind[V], f func(ctx context.Context, in In) (map[string]V, error)) {
	k.mustBeValid(tool)
	preview := func(ctx context.Context, in In) (*changeset.Proposal[changes], error) {
		values, err := f(ctx, in)
		if err != nil {
			return nil, err
		}
		if len(values) == 0 {
			return nil, changeset.Refuse("no %s to set", k.Name)
		}
		var (
			p             changes
			before, after = map[string]json.RawMessage{}, map[string]json.RawMessage{}
			states        = changeset.States{}
			resources     []string
		)
		for _, key := range slices.Sorted(maps.Keys(values)) {
			c, err := k.setOne(ctx, key, values[key])
			if err != nil || c == nil {
				if err != nil {
					return nil, err
				}
				continue // the key holds this value already
			}
			b, err := k.counted(c.Before)
			if err != nil {
				return nil, err
			}
			if b != nil {
				before[key] = b
			}
			if after[key], err = k.counted(c.After); err != nil {
				return nil, err
			}
			if states[k.resource(key)], err = k.state(c.Before); err != nil {
				return nil, err
			}
			resources = append(resources, k.resource(key))
			p.Keys = append(p.Keys, *c)
		}
		if len(p.Keys) == 0 {
			if len(values) == 1 {
				return nil, changeset.Refuse("the %s already holds this value; nothing to change", k.Name)
			}
			return nil, changeset.Refuse("every %s already holds its value; nothing to change", k.Name)
		}
		diff, err := changeset.Diff(before, after)
		if err != nil {
			return nil, err
		}
		return &changeset.Proposal[changes]{
			Payload:   p,
			Diff:      diff,
			Summary:   summarize("Set "+k.Name, p.Keys),
			Resources: resources,
			Snapshot:  &changeset.Snapshot{Value: states},
		}, nil
	}
	changeset.Register(g, tool, changeset.Operation[In, changes, appliedMany]{
		Preview: preview,
		Apply: func(ctx context.Context, p changes) (appliedMany, error) {
			return k.commitMany(ctx, p, true)
		},
		Undo: func(ctx context.Context, p changes, _ appliedMany) error {
			_, err := k.commitMany(ctx, p, false)
			return err
		},
		Observe: func(ctx context.Context, p changes) (any, error) {
			states := make(changeset.States, len(p.Keys))
			for _, c := range p.Keys {
				s, err := k.observe(ctx, c.Key)
				if err != nil {
					return nil, err
				}
				states[k.resource(c.Key)] = s
			}
			return states, nil
		},
	})
}

// setOne is the change that sets key to v, or nil when the key holds v
// already (ignored members aside).
func (k Kind[V]) setOne(ctx context.Context, key string, v V) (*change, error) {
	if key == "" {
		return nil, changeset.Refuse("every %s needs a non-empty key", k.Name)
	}
	after, err := canonjson.Marshal(v)
	if err != nil {
		return nil, fmt.Errorf("kv: the new value of %s %q has no JSON form: %w", k.Name, key, err)
	}
	cur, err := k.get(ctx, key)
	if err != nil || cur == nil {
		return &change{Key: key, After: after}, err
	}
	// Keep what V does not know, when the stored value is one V can read.
	var known V
	if json.Unmarshal(cur, &known) == nil {
		if kn, err := canonjson.Marshal(known); err == nil {
			if after, err = keepUnknown(cur, kn, after); err != nil {
				return nil, err
			}
		}
	}
	// Keep the ignored members as they are (target of an undo: every
	// ignored member from the current value).
	if after, err = k.target(write{key: key, to: after}, cur); err != nil {
		return nil, err
	}
	if same, err := k.sameCounted(cur, after); err != nil || same {
		return nil, err
	}
	return &change{Key: key, Before: cur, After: after}, nil
}

// commitMany writes the keys of p from their before values to their after
// values (an apply) or back (an undo), as one change.
func (k Kind[V]) commitMany(ctx context.Context, p changes, apply bool) (appliedMany, error) {
	ws := make([]write, len(p.Keys))
	for i, c := range p.Keys {
		ws[i] = write{key: c.Key, from: c.Before, to: c.After, apply: true}
		if !apply {
			ws[i] = write{key: c.Key, from: c.After, to: c.Before}
		}
	}
	written, err := k.commit(ctx, ws)
	if err != nil {
		return appliedMany{}, err
	}
	out := appliedMany{Keys: make([]applied, len(p.Keys))}
	for i, c := range p.Keys {
		out.Keys[i] = applied{Key: c.Key, Value: written[i]}
	}
	return out, nil
}

// summarize is verb followed by the keys of cs, at most maxSummaryKeys of
// them: "Set setting currency, tax_rate".
func summarize(verb string, cs []change) string {
	names := make([]string, 0, maxSummaryKeys)
	for _, c := range cs[:min(len(cs), maxSummaryKeys)] {
		names = append(names, keyText(c.Key))
	}
	s := verb + " " + strings.Join(names, ", ")
	if more := len(cs) - len(names); more > 0 {
		s += fmt.Sprintf(" and %d more", more)
	}
	return s
}
