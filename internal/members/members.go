// Package members compares the members of two JSON objects. It is the one
// walk behind every field-by-field comparison the library makes: a
// change's diff (changeset.Diff and DiffFields), the drift a run's undo
// reports (undoplan.DriftOf), and the nested fields the approval question
// and the dashboard show (diffview.Lines). Each caller decides what
// "equal" means and what to make of a difference; the walk decides which
// members differ and in what order.
package members

import (
	"bytes"
	"encoding/json"
	"maps"
	"slices"
)

// The kinds of difference Diff reports, as a diff entry spells them.
const (
	// Added: only the after object has the member.
	Added = "added"
	// Removed: only the before object has the member.
	Removed = "removed"
	// Changed: both have the member, with values that are not the same.
	Changed = "changed"
)

// Diff calls f once for every member of before and after that differs, in
// byte order of the names: a member only one of them has (Added or
// Removed; the side that lacks it is V's zero value), and a member both
// have whose values same reports unequal (Changed). Members that are the
// same are skipped. A nil map is an object with no members.
func Diff[V any](before, after map[string]V, same func(a, b V) bool, f func(name, kind string, before, after V)) {
	names := slices.Collect(maps.Keys(before))
	for name := range after {
		if _, ok := before[name]; !ok {
			names = append(names, name)
		}
	}
	slices.Sort(names)
	for _, name := range names {
		b, inBefore := before[name]
		a, inAfter := after[name]
		switch {
		case !inBefore:
			f(name, Added, b, a)
		case !inAfter:
			f(name, Removed, b, a)
		case !same(b, a):
			f(name, Changed, b, a)
		}
	}
}

// Of splits a JSON object into its members. It reports false for any
// other value, null included, and for text that is not JSON. Of a name
// given twice, the last value counts, as encoding/json decodes it.
func Of(v json.RawMessage) (map[string]json.RawMessage, bool) {
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

// Same is the equality for members of canonical JSON (see package
// canonjson): there equal values have equal bytes, so 1 and 1.0, or two
// objects written in different orders, have already become one text.
func Same(a, b json.RawMessage) bool { return bytes.Equal(a, b) }
