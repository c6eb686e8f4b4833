package undoplan

import (
	"encoding/json"

	"github.com/mcp-changeset/changeset-go/ledger"
)

// KeyOf is the key of a named resource.
func KeyOf(resource string) string { return "r:" + resource }

// Keys returns the resource keys of c: one per resource it names, or its
// own key when it names none.
func Keys(c *ledger.Change) []string {
	switch {
	case c.Resources != nil:
		keys := make([]string, len(c.Resources))
		for i, r := range c.Resources {
			keys[i] = KeyOf(r)
		}
		return keys
	case c.Resource != "":
		return []string{KeyOf(c.Resource)}
	}
	return []string{"c:" + c.ID}
}

// Split returns a state of c (its Before, its After, or what its Observe
// returned) per resource key: for a change that names several resources
// the state is an object keyed by their names (a resource missing from it
// reads null); otherwise the whole state belongs to the step's one key.
// It returns nil for a nil state.
func Split(s *Step, state json.RawMessage) map[string]json.RawMessage {
	if state == nil {
		return nil
	}
	out := make(map[string]json.RawMessage, len(s.Keys))
	if s.C.Resources == nil {
		out[s.Keys[0]] = state
		return out
	}
	var m map[string]json.RawMessage
	_ = json.Unmarshal(state, &m) // a malformed state reads as every resource null: it then matches nothing
	for _, r := range s.C.Resources {
		out[KeyOf(r)] = orNull(m[r])
	}
	return out
}

// Removes returns the names of the resources whose undo may remove them:
// those c created (their "before" is null), or all it names when no
// state was recorded to tell.
func Removes(c *ledger.Change) []string {
	switch {
	case c.Resources != nil:
		if c.Before == nil {
			return c.Resources
		}
		var m map[string]json.RawMessage
		if json.Unmarshal(c.Before, &m) != nil {
			return c.Resources
		}
		var out []string
		for _, r := range c.Resources {
			if isNull(m[r]) {
				out = append(out, r)
			}
		}
		return out
	case c.Resource != "" && isNull(c.Before):
		return []string{c.Resource}
	}
	return nil
}

func isNull(b json.RawMessage) bool { return b == nil || string(b) == "null" }

func orNull(b json.RawMessage) json.RawMessage {
	if b == nil {
		return json.RawMessage("null")
	}
	return b
}
