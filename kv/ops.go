package kv

import (
	"context"
	"encoding/json"
	"fmt"
	"regexp"
	"slices"

	changeset "github.com/mcp-changeset/changeset-go"
	"github.com/mcp-changeset/changeset-go/internal/canonjson"
	"github.com/modelcontextprotocol/go-sdk/mcp"
)

// change is the payload of every operation: the key and its whole value
// before and after, in canonical JSON. A side that is absent is a key that
// did not exist (a create) or will not (a delete).
type change struct {
	Key    string          `json:"key"`
	Before json.RawMessage `json:"before,omitempty"`
	After  json.RawMessage `json:"after,omitempty"`
}

// applied is what an apply returns to the agent: the key and the value it
// now holds (none after a delete).
type applied struct {
	Key   string          `json:"key"`
	Value json.RawMessage `json:"value,omitempty"`
}

// Create registers, under tool.Name, an operation that adds a new key: f
// turns the tool's input into the key and its value (or returns an error,
// such as a changeset.Refuse, for input it does not accept). The preview
// is refused if the key exists already.
func Create[In, V any](g *changeset.Guard, tool *mcp.Tool, k Kind[V], f func(ctx context.Context, in In) (key string, value V, err error)) {
	register(g, tool, k, func(ctx context.Context, in In) (*changeset.Proposal[change], error) {
		key, v, err := f(ctx, in)
		if err != nil {
			return nil, err
		}
		if key == "" {
			return nil, changeset.Refuse("the %s needs a non-empty key", k.Name)
		}
		after, err := canonjson.Marshal(v)
		if err != nil {
			return nil, fmt.Errorf("kv: the new %s %q has no JSON form: %w", k.Name, key, err)
		}
		cur, err := k.get(ctx, key)
		if err != nil {
			return nil, err
		}
		if cur != nil {
			return nil, changeset.Refuse("%s %q already exists; update or delete it instead", k.Name, key)
		}
		return k.propose("Create", key, nil, after)
	})
}

// Update registers, under tool.Name, an operation that changes the value
// of an existing key: key names it from the input, and f returns the new
// value from the input and the current one. The preview is refused if the
// key does not exist or if the new value equals the current one on every
// member that counts (see [Kind.Ignore]: a function that only stamps an
// ignored member changes nothing; one that stamps it along with a real
// change writes the stamp).
//
// Members of the stored JSON object that V does not know (a field a person
// added by hand, or one a newer version of the program writes) are kept
// as they are unless the new value sets them.
func Update[In, V any](g *changeset.Guard, tool *mcp.Tool, k Kind[V], key func(In) string, f func(ctx context.Context, in In, current V) (V, error)) {
	register(g, tool, k, func(ctx context.Context, in In) (*changeset.Proposal[change], error) {
		name := key(in)
		cur, err := k.existing(ctx, name)
		if err != nil {
			return nil, err
		}
		var v V
		if err := json.Unmarshal(cur, &v); err != nil {
			return nil, changeset.Refuse("%s %q holds a value this server cannot read (%v); fix it by hand or delete it", k.Name, name, err)
		}
		known, err := canonjson.Marshal(v)
		if err != nil {
			return nil, fmt.Errorf("kv: %s %q: %w", k.Name, name, err)
		}
		next, err := f(ctx, in, v)
		if err != nil {
			return nil, err
		}
		after, err := canonjson.Marshal(next)
		if err != nil {
			return nil, fmt.Errorf("kv: the new value of %s %q has no JSON form: %w", k.Name, name, err)
		}
		if after, err = keepUnknown(cur, known, after); err != nil {
			return nil, err
		}
		if same, err := k.sameCounted(cur, after); err != nil || same {
			if err != nil {
				return nil, err
			}
			return nil, changeset.Refuse("%s %q already holds this value; nothing to change", k.Name, name)
		}
		return k.propose("Update", name, cur, after)
	})
}

// Delete registers, under tool.Name, an operation that removes the key
// named by key from the input. The preview is refused if the key does not
// exist. Its undo writes the deleted value back exactly.
func Delete[In, V any](g *changeset.Guard, tool *mcp.Tool, k Kind[V], key func(In) string) {
	register(g, tool, k, func(ctx context.Context, in In) (*changeset.Proposal[change], error) {
		name := key(in)
		cur, err := k.existing(ctx, name)
		if err != nil {
			return nil, err
		}
		return k.propose("Delete", name, cur, nil)
	})
}

// register adds the operation made of preview and the apply, undo and
// observe that every kind shares.
func register[In, V any](g *changeset.Guard, tool *mcp.Tool, k Kind[V], preview func(context.Context, In) (*changeset.Proposal[change], error)) {
	k.mustBeValid(tool)
	changeset.Register(g, tool, changeset.Operation[In, change, applied]{
		Preview: preview,
		Apply: func(ctx context.Context, c change) (applied, error) {
			written, err := k.commit(ctx, []write{{key: c.Key, from: c.Before, to: c.After, apply: true}})
			if err != nil {
				return applied{}, err
			}
			return applied{Key: c.Key, Value: written[0]}, nil
		},
		Undo: func(ctx context.Context, c change, _ applied) error {
			_, err := k.commit(ctx, []write{{key: c.Key, from: c.After, to: c.Before}})
			return err
		},
		Observe: func(ctx context.Context, c change) (any, error) {
			return k.observe(ctx, c.Key)
		},
	})
}

// mustBeValid panics, naming the tool, when k cannot be used.
func (k Kind[V]) mustBeValid(tool *mcp.Tool) {
	if k.Name == "" || k.Store == nil {
		panic(fmt.Sprintf("kv: the Kind of tool %q needs a Name and a Store", tool.Name))
	}
	if slices.Contains(k.Ignore, "") {
		panic(fmt.Sprintf("kv: the Kind of tool %q ignores a member with an empty name", tool.Name))
	}
}

// resource is the name of key in proposals, e.g. "flag:beta".
func (k Kind[V]) resource(key string) string { return k.Name + ":" + key }

// plainKey is a key a summary can show as it is.
var plainKey = regexp.MustCompile(`^[A-Za-z0-9][A-Za-z0-9._:/@+-]{0,127}$`)

// keyText is key as a summary shows it: as it is when it is a plain name
// ("beta"), quoted and escaped otherwise (see changeset.Quote), so that a
// key someone chose can never read as the server's own words.
func keyText(key string) string {
	if plainKey.MatchString(key) {
		return key
	}
	return changeset.Quote(key)
}

// propose is the proposal of a change of key from before to after: its
// diff and snapshot leave out the ignored members.
func (k Kind[V]) propose(verb, key string, before, after json.RawMessage) (*changeset.Proposal[change], error) {
	b, err := k.state(before)
	if err != nil {
		return nil, err
	}
	a, err := k.state(after)
	if err != nil {
		return nil, err
	}
	diff, err := changeset.Diff(b, a)
	if err != nil {
		return nil, err
	}
	return &changeset.Proposal[change]{
		Payload:  change{Key: key, Before: before, After: after},
		Diff:     diff,
		Summary:  verb + " " + k.Name + " " + keyText(key),
		Resource: k.resource(key),
		Snapshot: &changeset.Snapshot{Value: b},
	}, nil
}

// get reads key in canonical form, or nil if it is absent.
func (k Kind[V]) get(ctx context.Context, key string) (json.RawMessage, error) {
	v, err := k.Store.Get(ctx, key)
	if err != nil || v == nil {
		return nil, err
	}
	c, err := canonjson.Canonicalize(v)
	if err != nil {
		return nil, fmt.Errorf("kv: the stored %s %q is not valid JSON: %w", k.Name, key, err)
	}
	return c, nil
}

// existing is get for an update or a delete, which refuse an absent key.
func (k Kind[V]) existing(ctx context.Context, key string) (json.RawMessage, error) {
	v, err := k.get(ctx, key)
	if err == nil && v == nil {
		return nil, changeset.Refuse("there is no %s %q", k.Name, key)
	}
	return v, err
}

// keepUnknown returns after with the members of cur that known (cur read
// into V and encoded again) lost, unless after sets them itself. All three
// are canonical JSON; when one is not an object, after is returned as is.
func keepUnknown(cur, known, after json.RawMessage) (json.RawMessage, error) {
	var c, kn, a map[string]json.RawMessage
	if json.Unmarshal(cur, &c) != nil || json.Unmarshal(known, &kn) != nil || json.Unmarshal(after, &a) != nil || c == nil || a == nil {
		return after, nil
	}
	added := false
	for name, v := range c {
		_, inKnown := kn[name]
		_, inAfter := a[name]
		if !inKnown && !inAfter {
			a[name], added = v, true
		}
	}
	if !added {
		return after, nil
	}
	return canonjson.Marshal(a)
}
