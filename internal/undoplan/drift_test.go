package undoplan

import (
	"encoding/json"
	"strings"
	"testing"
)

// DriftOf compares two canonical states: field by field when both are
// objects (a field missing on one side reads null there, so missing and
// null are no drift), else the whole state at once.
func TestDriftOf(t *testing.T) {
	show := func(d []Drift) string {
		var lines []string
		for _, e := range d {
			lines = append(lines, e.Field+" "+string(e.Expected)+"→"+string(e.Found))
		}
		return strings.Join(lines, "\n")
	}
	for _, tc := range []struct {
		name, expected, found, want string
	}{
		{"equal states", `{"a":1}`, `{"a":1}`, ""},
		{"one field moved, in name order", `{"b":2,"a":1,"c":3}`, `{"a":1,"b":5,"c":4}`, "b 2→5\nc 3→4"},
		{"a field added reads null where it was missing", `{"a":1}`, `{"a":1,"z":"new"}`, `z null→"new"`},
		{"a field removed reads null where it is missing", `{"a":1,"z":"old"}`, `{"a":1}`, `z "old"→null`},
		{"missing and null are the same state", `{"a":1,"n":null}`, `{"a":1}`, ""},
		{"a thing that no longer exists is the whole state", `{"a":1}`, `null`, ` {"a":1}→null`},
		{"a thing created since is the whole state", `null`, `{"a":1}`, ` null→{"a":1}`},
		{"scalars are the whole state", `"light"`, `"dark"`, ` "light"→"dark"`},
		{"an object replaced by an array", `{"a":1}`, `[1]`, ` {"a":1}→[1]`},
		{"a missing state reads null", ``, `7`, ` null→7`},
	} {
		t.Run(tc.name, func(t *testing.T) {
			got := DriftOf(raw(tc.expected), raw(tc.found))
			if got == nil {
				t.Fatal("DriftOf returned nil, want a list")
			}
			if s := show(got); s != tc.want {
				t.Errorf("DriftOf(%s, %s):\n%s\nwant:\n%s", tc.expected, tc.found, s, tc.want)
			}
		})
	}
}

// A nested object that moved is one drift entry holding both whole
// objects: the reader of a report sees the field, the dashboard expands it.
func TestDriftOf_NestedObjectIsOneField(t *testing.T) {
	got := DriftOf(json.RawMessage(`{"addr":{"city":"Oslo","zip":"0150"}}`), json.RawMessage(`{"addr":{"city":"Bergen","zip":"0150"}}`))
	if len(got) != 1 || got[0].Field != "addr" || string(got[0].Found) != `{"city":"Bergen","zip":"0150"}` {
		t.Errorf("DriftOf = %+v", got)
	}
}
