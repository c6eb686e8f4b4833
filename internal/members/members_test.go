package members

import (
	"encoding/json"
	"fmt"
	"strings"
	"testing"
)

// diff renders what Diff reports, one "name kind before→after" per call,
// "-" for the side a member is missing from.
func diff(before, after map[string]json.RawMessage) string {
	side := func(v json.RawMessage) string {
		if v == nil {
			return "-"
		}
		return string(v)
	}
	var lines []string
	Diff(before, after, Same, func(name, kind string, b, a json.RawMessage) {
		lines = append(lines, name+" "+kind+" "+side(b)+"→"+side(a))
	})
	return strings.Join(lines, "\n")
}

func object(t *testing.T, s string) map[string]json.RawMessage {
	t.Helper()
	m, ok := Of(json.RawMessage(s))
	if !ok {
		t.Fatalf("Of(%s) is not an object", s)
	}
	return m
}

func TestDiff(t *testing.T) {
	for _, tc := range []struct {
		name, before, after, want string
	}{
		{"equal objects: nothing", `{"a":1,"b":[2]}`, `{"a":1,"b":[2]}`, ""},
		{"every kind, in byte order of the names", `{"b":1,"c":2,"Z":0}`, `{"a":true,"b":5,"Z":0}`,
			"a added -→true\nb changed 1→5\nc removed 2→-"},
		{"null is a value: a member that holds it is not missing", `{"n":null}`, `{"m":null,"n":1}`,
			"m added -→null\nn changed null→1"},
		{"nested objects are compared whole", `{"o":{"x":1}}`, `{"o":{"x":2}}`, `o changed {"x":1}→{"x":2}`},
		{"an empty object adds every member", `{}`, `{"a":1,"b":2}`, "a added -→1\nb added -→2"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			if got := diff(object(t, tc.before), object(t, tc.after)); got != tc.want {
				t.Errorf("Diff(%s, %s):\n%s\nwant:\n%s", tc.before, tc.after, got, tc.want)
			}
		})
	}
}

// Diff walks maps of any value type with the caller's equality, and a nil
// map is an object with no members.
func TestDiff_AnyValuesAndNilMaps(t *testing.T) {
	var got []string
	sameText := func(a, b any) bool { return fmt.Sprint(a) == fmt.Sprint(b) }
	Diff(nil, map[string]any{"a": 1, "b": "x"}, sameText, func(name, kind string, b, a any) {
		got = append(got, fmt.Sprint(name, " ", kind, " ", b, " ", a))
	})
	Diff(map[string]any{"n": 1, "s": "1"}, map[string]any{"n": "1", "s": "2"}, sameText, func(name, kind string, b, a any) {
		got = append(got, fmt.Sprint(name, " ", kind, " ", b, " ", a))
	})
	if want := "a added <nil> 1|b added <nil> x|s changed 1 2"; strings.Join(got, "|") != want {
		t.Errorf("got %s\nwant %s", strings.Join(got, "|"), want)
	}
}

func TestOf(t *testing.T) {
	for _, tc := range []struct {
		in   string
		want string // the members as JSON, or "" when Of reports false
	}{
		{`{"b":1,"a":[true]}`, `{"a":[true],"b":1}`},
		{` {"a":1} `, `{"a":1}`},
		{`{}`, `{}`},
		{`{"a":1,"a":2}`, `{"a":2}`},
		{`null`, ""},
		{`[{"a":1}]`, ""},
		{`"{}"`, ""},
		{`7`, ""},
		{``, ""},
		{`{"a":`, ""},
	} {
		m, ok := Of(json.RawMessage(tc.in))
		got := ""
		if ok {
			b, _ := json.Marshal(m)
			got = string(b)
		}
		if got != tc.want || ok != (tc.want != "") {
			t.Errorf("Of(%q) = %s, %v; want %q", tc.in, got, ok, tc.want)
		}
	}
}
