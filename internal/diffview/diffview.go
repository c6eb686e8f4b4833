// Package diffview reads a stored diff (Decode) and renders it for people
// (Lines), by one set of rules that the approval question and the
// dashboard share: one line per changed field; a field that did not exist
// reads "(none)", which is not the same as null; and a nested object whose
// entry holds both whole objects is expanded into the nested fields that
// differ ("address.city"), so that a person sees what changed rather than
// two large objects. The Guard's results read the stored diff with Decode
// too.
package diffview

import (
	"encoding/json"

	"github.com/mcp-changeset/changeset-go/internal/members"
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
	// Before and After are the two values as canonical JSON. In a line
	// from Lines a side that does not exist is nil; in an entry from
	// Decode it is null, as stored.
	Before, After json.RawMessage
}

// Decode reads a stored diff, the JSON array of {field, kind, before,
// after} entries the Guard keeps for a change, as one Line per entry, not
// yet expanded (Lines expands each). A side missing from an entry reads
// null, and an entry stored before kinds existed gets its kind from which
// side is null. ok is false when stored is not such an array.
func Decode(stored json.RawMessage) (entries []Line, ok bool) {
	if json.Unmarshal(stored, &entries) != nil {
		return nil, false
	}
	for i, e := range entries {
		if e.Kind == "" {
			switch {
			case isNull(e.Before) && !isNull(e.After):
				entries[i].Kind = members.Added
			case isNull(e.After) && !isNull(e.Before):
				entries[i].Kind = members.Removed
			default:
				entries[i].Kind = members.Changed
			}
		}
		entries[i].Before, entries[i].After = orNull(e.Before), orNull(e.After)
	}
	return entries, true
}

func isNull(v json.RawMessage) bool { return len(v) == 0 || string(v) == "null" }

func orNull(v json.RawMessage) json.RawMessage {
	if len(v) == 0 {
		return json.RawMessage("null")
	}
	return v
}

// Lines renders one stored diff entry. A changed entry whose sides are
// both JSON objects becomes one line per nested field that differs.
func Lines(field, kind string, before, after json.RawMessage) []Line {
	if kind == members.Added {
		before = nil
	}
	if kind == members.Removed {
		after = nil
	}
	var out []Line
	expand(&out, field, kind, before, after, 0)
	return out
}

func expand(out *[]Line, field, kind string, before, after json.RawMessage, depth int) {
	bm, bObj := members.Of(before)
	am, aObj := members.Of(after)
	if kind != members.Changed || !bObj || !aObj || depth >= maxDepth {
		*out = append(*out, Line{Field: field, Kind: kind, Before: before, After: after})
		return
	}
	n := len(*out)
	members.Diff(bm, am, members.Same, func(name, kind string, b, a json.RawMessage) {
		if field != "" {
			name = field + "." + name
		}
		if kind == members.Changed {
			expand(out, name, kind, b, a, depth+1)
			return
		}
		*out = append(*out, Line{Field: name, Kind: kind, Before: b, After: a})
	})
	if len(*out) == n { // equal objects written differently: show them whole
		*out = append(*out, Line{Field: field, Kind: kind, Before: before, After: after})
	}
}

// Value shows one side: its JSON text (a string in quotes, with JSON's
// escapes), or Absent when the side does not exist. null reads "null".
func Value(v json.RawMessage) string {
	if v == nil {
		return Absent
	}
	return string(v)
}
