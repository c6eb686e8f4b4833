package diffview

import (
	"encoding/json"
	"strings"
	"testing"
)

func show(lines []Line) string {
	var b strings.Builder
	for _, l := range lines {
		b.WriteString(l.Field + " " + l.Kind + " " + Value(l.Before) + " → " + Value(l.After) + "\n")
	}
	return b.String()
}

func TestLines(t *testing.T) {
	for _, tc := range []struct {
		name, field, kind, before, after, want string
	}{
		{"a scalar change", "theme", "changed", `"light"`, `"dark"`, "theme changed \"light\" → \"dark\"\n"},
		{"added: the before side does not exist, whatever it holds", "note", "added", `null`, `"x"`, "note added (none) → \"x\"\n"},
		{"removed", "note", "removed", `"x"`, `null`, "note removed \"x\" → (none)\n"},
		{"null is not absent", "email", "changed", `null`, `"a@b"`, "email changed null → \"a@b\"\n"},
		{"a nested object shows only what differs",
			"address", "changed", `{"city":"Oslo","street":"Main 1","zip":"0150"}`, `{"city":"Bergen","street":"Main 1"}`,
			"address.city changed \"Oslo\" → \"Bergen\"\naddress.zip removed \"0150\" → (none)\n"},
		{"deeper levels too", "", "changed", `{"a":{"b":{"c":1,"d":2}}}`, `{"a":{"b":{"c":1,"d":3}},"e":true}`,
			"a.b.d changed 2 → 3\ne added (none) → true\n"},
		{"an object replaced by a scalar is shown whole", "cfg", "changed", `{"a":1}`, `"off"`, "cfg changed {\"a\":1} → \"off\"\n"},
		{"arrays are shown whole", "tags", "changed", `["a","b"]`, `["a"]`, "tags changed [\"a\",\"b\"] → [\"a\"]\n"},
		{"an added object is not expanded", "address", "added", `null`, `{"city":"Oslo"}`, "address added (none) → {\"city\":\"Oslo\"}\n"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			got := show(Lines(tc.field, tc.kind, json.RawMessage(tc.before), json.RawMessage(tc.after)))
			if got != tc.want {
				t.Errorf("Lines:\n%s\nwant:\n%s", got, tc.want)
			}
		})
	}
}

func TestLines_StopsExpandingAtMaxDepth(t *testing.T) {
	deep := func(leaf string) string {
		return strings.Repeat(`{"x":`, maxDepth+2) + leaf + strings.Repeat("}", maxDepth+2)
	}
	lines := Lines("f", "changed", json.RawMessage(deep("1")), json.RawMessage(deep("2")))
	if len(lines) != 1 || lines[0].Field != "f"+strings.Repeat(".x", maxDepth) {
		t.Fatalf("lines = %+v", lines)
	}
	if !strings.Contains(string(lines[0].Before), `{"x":1}`) {
		t.Errorf("the deepest line shows %s, want the rest as a whole value", lines[0].Before)
	}
}

// Decode reads the stored diff the Guard keeps: kinds as stored, or
// inferred for an entry stored before kinds existed, and a missing side
// read as null.
func TestDecode(t *testing.T) {
	stored := `[{"field":"a","kind":"changed","before":null,"after":1},` +
		`{"field":"b","before":null,"after":"x"},{"field":"c","before":[1],"after":null},{"field":"d"},` +
		`{"field":"e","kind":"added","after":{"k":12345678901234567890}}]`
	got, ok := Decode(json.RawMessage(stored))
	if !ok {
		t.Fatal("Decode refused a stored diff")
	}
	want := "a changed null → 1\nb added null → \"x\"\nc removed [1] → null\nd changed null → null\ne added null → {\"k\":12345678901234567890}\n"
	if s := show(got); s != want {
		t.Errorf("Decode:\n%s\nwant:\n%s", s, want)
	}
	for _, bad := range []string{``, `{}`, `[1]`, `[{"field":2}]`} {
		if got, ok := Decode(json.RawMessage(bad)); ok || got != nil {
			t.Errorf("Decode(%q) = %+v, %v; want it refused", bad, got, ok)
		}
	}
	if got, ok := Decode(json.RawMessage(`[]`)); !ok || len(got) != 0 {
		t.Errorf("Decode([]) = %+v, %v", got, ok)
	}
}
