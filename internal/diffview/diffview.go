// Package diffview renders a stored diff for people, by one set of rules
// that the approval question and the dashboard share: one line per changed
// field; a field that did not exist reads "(none)", which is not the same
// as null; and a nested object whose entry holds both whole objects is
// expanded into the nested fields that differ ("address.city"), so that a
// person sees what changed rather than two large objects.
package diffview

import (
	"bytes"
	"encoding/json"
	"maps"
	"slices"
)

// maxDepth is how many levels of nested objects Lines expands; deeper
// differences are shown as whole values.
const maxDepth = 4

// Absent is how a side that does not exist is shown.
const Absent = "(none)"

// Line is one field as a person reads it.
type Line struct {
	// Field is the field's name, with the path into nested objects
	// ("address.city"); "" when the whole value is compared.
	Field string
	// Kind is "added", "removed" or "changed".
	Kind string
	// Before and After are the two values as canonical JSON, nil for a
	// side that does not exist.
	Before, After json.RawMessage
}

// Lines renders one stored diff entry. A changed entry whose sides are
// both JSON objects becomes one line per nested field that differs.
func Lines(field, kind string, before, after json.RawMessage) []Line {
	if kind == "added" {
		before = nil
	}
	if kind == "removed" {
		after = nil
	}
	var out []Line
	expand(&out, field, kind, before, after, 0)
	return out
}

func expand(out *[]Line, field, kind string, before, after json.RawMessage, depth int) {
	bm, bObj := object(before)
	am, aObj := object(after)
	if kind != "changed" || !bObj || !aObj || depth >= maxDepth {
		*out = append(*out, Line{Field: field, Kind: kind, Before: before, After: after})
		return
	}
	keys := maps.Collect(maps.All(bm))
	maps.Copy(keys, am)
	n := len(*out)
	for _, k := range slices.Sorted(maps.Keys(keys)) {
		b, inB := bm[k]
		a, inA := am[k]
		name := k
		if field != "" {
			name = field + "." + k
		}
		switch {
		case !inB:
			*out = append(*out, Line{Field: name, Kind: "added", After: a})
		case !inA:
			*out = append(*out, Line{Field: name, Kind: "removed", Before: b})
		case !sameJSON(b, a):
			expand(out, name, "changed", b, a, depth+1)
		}
	}
	if len(*out) == n { // equal objects written differently: show them whole
		*out = append(*out, Line{Field: field, Kind: kind, Before: before, After: after})
	}
}

// object decodes a JSON object's members; false for anything else.
func object(v json.RawMessage) (map[string]json.RawMessage, bool) {
	v = bytes.TrimSpace(v)
	if len(v) == 0 || v[0] != '{' {
		return nil, false
	}
	var m map[string]json.RawMessage
	if err := json.Unmarshal(v, &m); err != nil {
		return nil, false
	}
	return m, true
}

// sameJSON compares two members of one canonical document: canonical
// forms are equal exactly when the values are.
func sameJSON(a, b json.RawMessage) bool { return bytes.Equal(bytes.TrimSpace(a), bytes.TrimSpace(b)) }

// Value shows one side: its JSON text (a string in quotes, with JSON's
// escapes), or Absent when the side does not exist. null reads "null".
func Value(v json.RawMessage) string {
	if v == nil {
		return Absent
	}
	return string(v)
}
