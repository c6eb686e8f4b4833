package changeset

import (
	"bytes"
	"encoding/json"
	"fmt"

	"github.com/mcp-changeset/changeset-go/internal/canonjson"
	"github.com/mcp-changeset/changeset-go/internal/members"
)

// DiffKind says how a field changed: it keeps a field that did not exist
// apart from one that held null.
type DiffKind string

// The kinds of DiffEntry.
const (
	// DiffAdded: the field did not exist before; Before is nil.
	DiffAdded DiffKind = "added"
	// DiffRemoved: the field does not exist after; After is nil.
	DiffRemoved DiffKind = "removed"
	// DiffChanged: the field exists on both sides with different values
	// (either may be null).
	DiffChanged DiffKind = "changed"
)

// Diff compares two values of any JSON-encodable type (structs with json
// tags, maps, or nil for a thing that does not exist) and returns an entry
// for every top-level field whose JSON value differs, sorted by field name:
//
//	before := Flag{Enabled: false, Rollout: 10}
//	after := Flag{Enabled: true, Rollout: 10}
//	diff, err := changeset.Diff(before, after) // [{enabled false → true}]
//
// Values are compared in their canonical JSON form, so 1 and 1.0 are equal
// and integers are compared exactly at any size. A field missing on one
// side is DiffAdded or DiffRemoved; a field that holds null is a value
// like any other (DiffChanged), so "absent", null and a zero value stay
// three different things (use omitempty on a struct field to make its zero
// value absent). A nested object is one field: its entry holds both whole
// objects, and the dashboard and the approval question show only the
// nested fields that differ.
//
// A nil before (or a value that encodes to null) is a creation: every field
// of after is added; a nil after is a removal. When either side is not a
// JSON object (a string, a number, an array), the result is one entry with
// the empty field name, as for a drift report, unless the two are equal.
// Diff fails only when a value cannot be encoded as JSON (NaN, invalid
// UTF-8, a channel).
func Diff(before, after any) ([]DiffEntry, error) {
	b, err := canonjson.Marshal(before)
	if err != nil {
		return nil, fmt.Errorf("changeset.Diff: the before value: %w", err)
	}
	a, err := canonjson.Marshal(after)
	if err != nil {
		return nil, fmt.Errorf("changeset.Diff: the after value: %w", err)
	}
	return diffCanonical(b, a), nil
}

// diffCanonical compares two canonical JSON values as Diff does.
func diffCanonical(before, after []byte) []DiffEntry {
	bm, bObj := objectMembers(before)
	am, aObj := objectMembers(after)
	if !bObj || !aObj {
		if bytes.Equal(before, after) {
			return []DiffEntry{}
		}
		e := DiffEntry{Field: "", Kind: DiffChanged, Before: json.RawMessage(before), After: json.RawMessage(after)}
		if isNull(before) {
			e.Kind, e.Before = DiffAdded, nil
		} else if isNull(after) {
			e.Kind, e.After = DiffRemoved, nil
		}
		return []DiffEntry{e}
	}
	return diffMembers(bm, am, members.Same)
}

// objectMembers splits a canonical JSON object into its members. null
// counts as an object with no members (a thing that does not exist); any
// other value reports false.
func objectMembers(v []byte) (map[string]json.RawMessage, bool) {
	if isNull(v) {
		return map[string]json.RawMessage{}, true
	}
	return members.Of(v)
}

// isNull reports whether a JSON value is null (or missing).
func isNull(v []byte) bool { return len(v) == 0 || string(v) == "null" }

// withKinds fills in the Kind of entries built without one (by hand, or by
// code written before DiffKind existed): a nil Before is an addition, a nil
// After a removal, anything else a change.
func withKinds(entries []DiffEntry) []DiffEntry {
	for i, e := range entries {
		if e.Kind != "" {
			continue
		}
		switch {
		case e.Before == nil && e.After != nil:
			entries[i].Kind = DiffAdded
		case e.After == nil && e.Before != nil:
			entries[i].Kind = DiffRemoved
		default:
			entries[i].Kind = DiffChanged
		}
	}
	return entries
}
