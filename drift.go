package changeset

import (
	"encoding/json"
	"unicode/utf8"

	"github.com/mcp-changeset/changeset-go/internal/undoplan"
	"github.com/mcp-changeset/changeset-go/internal/voice"
)

// Drift is one difference between the state a run's undo expected a
// resource to be in (the state the change left it in) and the state it
// found. When both states are JSON objects there is one Drift per
// top-level field that differs, named by Field; otherwise there is one
// Drift for the whole state, with Field empty. Expected and Found are JSON;
// a field missing on one side is null there.
type Drift struct {
	// Resource names the resource that moved, for a change that names
	// several (Proposal.Resources); empty otherwise.
	Resource string          `json:"resource,omitempty" jsonschema:"the resource, when several"`
	Field    string          `json:"field" jsonschema:"the field; empty for the whole state"`
	Expected json.RawMessage `json:"expected" jsonschema:"what the change left"`
	Found    json.RawMessage `json:"found" jsonschema:"what is there now"`
}

// Bounds of the drift a report carries, so that a report of a long run
// stays small: at most maxDriftEntries fields per change, each value cut
// to maxDriftBytes (a cut value becomes a JSON string of its beginning).
const (
	maxDriftEntries = 8
	maxDriftBytes   = 1 << 10
)

// boundDrift applies the bounds above; a last entry with Field "…" counts
// the fields left out, in v's words.
func boundDrift(v *voice.Voice, d []undoplan.Drift) []Drift {
	out := make([]Drift, 0, min(len(d), maxDriftEntries+1))
	for i, e := range d {
		if i == maxDriftEntries {
			more, _ := json.Marshal(v.DriftMoreFields(len(d) - maxDriftEntries))
			out = append(out, Drift{Field: "…", Expected: json.RawMessage("null"), Found: more})
			break
		}
		e.Expected, e.Found = boundValue(v, e.Expected), boundValue(v, e.Found)
		out = append(out, Drift(e))
	}
	return out
}

func boundValue(v *voice.Voice, value json.RawMessage) json.RawMessage {
	if len(value) <= maxDriftBytes {
		return value
	}
	cut := maxDriftBytes
	for cut > 0 && !utf8.RuneStart(value[cut]) {
		cut--
	}
	s, _ := json.Marshal(v.DriftValueCut(string(value[:cut]), len(value)))
	return s
}
