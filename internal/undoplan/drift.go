package undoplan

import (
	"bytes"
	"encoding/json"

	"github.com/mcp-changeset/changeset-go/internal/members"
	"github.com/mcp-changeset/changeset-go/internal/voice"
)

// Drift is one difference between the state the undo expected a resource
// to be in (the state the change left) and the state it found: one per
// top-level field of two objects, or one for the whole state (Field
// empty). It is the type the voice words reasons from; changeset.Drift,
// which results carry, converts from it.
type Drift = voice.Drift

// DriftOf compares two canonical states of one resource: member by
// member when both are JSON objects, where a member missing on one side
// reads null there (so a missing member and a null one are no drift);
// otherwise as one whole state, with Field empty.
func DriftOf(expected, found json.RawMessage) []Drift {
	if bytes.Equal(expected, found) {
		return []Drift{}
	}
	e, eObj := members.Of(expected)
	f, fObj := members.Of(found)
	if !eObj || !fObj {
		return []Drift{{Field: "", Expected: orNull(expected), Found: orNull(found)}}
	}
	out := []Drift{}
	members.Diff(e, f, members.Same, func(name, _ string, ev, fv json.RawMessage) {
		ev, fv = orNull(ev), orNull(fv)
		if members.Same(ev, fv) {
			return // missing on one side and null on the other: the same state
		}
		out = append(out, Drift{Field: name, Expected: ev, Found: fv})
	})
	return out
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
