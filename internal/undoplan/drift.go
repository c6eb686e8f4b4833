package undoplan

import (
	"bytes"
	"encoding/json"
	"maps"
	"slices"

	"github.com/mcp-changeset/changeset-go/internal/voice"
)

// Drift is one difference between the state the undo expected a resource
// to be in (the state the change left) and the state it found: one per
// top-level field of two objects, or one for the whole state (Field
// empty). Resource names the resource for a change that names several.
// It has the fields of changeset.Drift, which converts from it.
type Drift struct {
	Resource string          `json:"resource,omitempty"`
	Field    string          `json:"field"`
	Expected json.RawMessage `json:"expected"`
	Found    json.RawMessage `json:"found"`
}

// DriftOf compares two canonical states of one resource.
func DriftOf(expected, found json.RawMessage) []Drift {
	if bytes.Equal(expected, found) {
		return []Drift{}
	}
	var e, f map[string]json.RawMessage
	if json.Unmarshal(expected, &e) == nil && json.Unmarshal(found, &f) == nil && e != nil && f != nil {
		keys := slices.Sorted(maps.Keys(e))
		for k := range f {
			if _, ok := e[k]; !ok {
				keys = append(keys, k)
			}
		}
		slices.Sort(keys)
		out := []Drift{}
		for _, k := range keys {
			ev, fv := orNull(e[k]), orNull(f[k])
			if !bytes.Equal(ev, fv) {
				out = append(out, Drift{Field: k, Expected: ev, Found: fv})
			}
		}
		return out
	}
	return []Drift{{Field: "", Expected: orNull(expected), Found: orNull(found)}}
}

// driftOfStep compares, resource by resource, the states a step's change
// left (after) with the states found, and returns the drift of each
// resource that moved, in the order the change names them.
func driftOfStep(s *Step, after, found map[string]json.RawMessage) []Drift {
	out := []Drift{}
	for _, k := range s.Keys {
		d := DriftOf(orNull(after[k]), orNull(found[k]))
		if s.C.Resources != nil {
			for i := range d {
				d[i].Resource = k[2:]
			}
		}
		out = append(out, d...)
	}
	return out
}

// Describe says in a few words, worded by v, what changed, for a reason:
// `"theme" is now "blue" (this change left "dark")`. Field and resource
// names are quoted by voice.Quote and values by voice.Value.
func Describe(v *voice.Voice, d []Drift) string {
	moved := make([]voice.Drift, len(d))
	for i, e := range d {
		moved[i] = voice.Drift(e)
	}
	return v.Moved(moved)
}
