package undoplan

import (
	"bytes"
	"encoding/json"
	"fmt"
	"maps"
	"slices"
	"strings"
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

// maxDriftValue caps a value quoted in a reason.
const maxDriftValue = 60

// Describe says in a few words what changed, for a reason:
// `theme is "blue" (this change left "dark")`.
func Describe(d []Drift) string {
	resources := []string{}
	for _, e := range d {
		if e.Resource != "" && !slices.Contains(resources, e.Resource) {
			resources = append(resources, e.Resource)
		}
	}
	if len(resources) == 1 {
		own := make([]Drift, 0, len(d))
		for _, e := range d {
			e.Resource = ""
			own = append(own, e)
		}
		return "resource " + resources[0] + ": " + Describe(own)
	}
	if len(resources) > 0 {
		if len(resources) > 4 {
			resources = append(resources[:4], fmt.Sprintf("%d more", len(resources)-4))
		}
		return "resources " + strings.Join(resources, ", ") + " differ from what this change left"
	}
	switch {
	case len(d) == 0:
		return "its state differs from the one this change left"
	case len(d) == 1 && d[0].Field == "":
		return fmt.Sprintf("it is now %s (this change left %s)", quoteValue(d[0].Found), quoteValue(d[0].Expected))
	case len(d) == 1:
		return fmt.Sprintf("%s is now %s (this change left %s)", d[0].Field, quoteValue(d[0].Found), quoteValue(d[0].Expected))
	}
	names := make([]string, 0, len(d))
	for _, e := range d {
		names = append(names, e.Field)
	}
	if len(names) > 4 {
		names = append(names[:4], fmt.Sprintf("%d more", len(d)-4))
	}
	return "fields " + strings.Join(names, ", ") + " differ from what this change left"
}

// quoteValue cuts a JSON value short for a sentence.
func quoteValue(v json.RawMessage) string { return Cut(string(v), maxDriftValue) }

// Cut shortens s to n bytes of valid UTF-8 and an ellipsis.
func Cut(s string, n int) string {
	if len(s) <= n {
		return s
	}
	return strings.ToValidUTF8(s[:n], "") + "…"
}
