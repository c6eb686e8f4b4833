package changeset

import (
	"bytes"
	"encoding/json"
	"fmt"
	"maps"
	"slices"
	"strings"
	"unicode/utf8"
)

// Drift is one difference between the state a run's undo expected a
// resource to be in (the state the change left it in) and the state it
// found. When both states are JSON objects there is one Drift per
// top-level field that differs, named by Field; otherwise there is one
// Drift for the whole state, with Field empty. Expected and Found are JSON;
// a field missing on one side is null there.
type Drift struct {
	Field    string          `json:"field"`
	Expected json.RawMessage `json:"expected"`
	Found    json.RawMessage `json:"found"`
}

// driftOf compares two canonical states.
func driftOf(expected, found json.RawMessage) []Drift {
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

// Bounds of the drift a report carries, so that a report of a long run
// stays small: at most maxDriftEntries fields per change, each value cut
// to maxDriftBytes (a cut value becomes a JSON string of its beginning).
const (
	maxDriftEntries = 8
	maxDriftBytes   = 1 << 10
)

// boundDrift applies the bounds above; a last entry with Field "…" counts
// the fields left out.
func boundDrift(d []Drift) []Drift {
	out := make([]Drift, 0, min(len(d), maxDriftEntries+1))
	for i, e := range d {
		if i == maxDriftEntries {
			more, _ := json.Marshal(fmt.Sprintf("%d more fields differ", len(d)-maxDriftEntries))
			out = append(out, Drift{Field: "…", Expected: json.RawMessage("null"), Found: more})
			break
		}
		e.Expected, e.Found = boundValue(e.Expected), boundValue(e.Found)
		out = append(out, e)
	}
	return out
}

func boundValue(v json.RawMessage) json.RawMessage {
	if len(v) <= maxDriftBytes {
		return v
	}
	cut := maxDriftBytes
	for cut > 0 && !utf8.RuneStart(v[cut]) {
		cut--
	}
	s, _ := json.Marshal(fmt.Sprintf("%s… (%d bytes in all)", v[:cut], len(v)))
	return s
}

func orNull(b json.RawMessage) json.RawMessage {
	if b == nil {
		return json.RawMessage("null")
	}
	return b
}

// maxDriftValue caps a value quoted in a reason.
const maxDriftValue = 60

// describeDrift says in a few words what changed, for a skip's reason:
// `theme is "blue" (this change left "dark")`.
func describeDrift(d []Drift) string {
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
func quoteValue(v json.RawMessage) string { return cut(string(v), maxDriftValue) }
