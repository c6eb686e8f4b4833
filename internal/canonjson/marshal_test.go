package canonjson

import (
	"encoding/json"
	"errors"
	"math"
	"strings"
	"testing"
)

type change struct {
	Op      string          `json:"op"`
	Path    string          `json:"path"`
	Old     any             `json:"old,omitempty"`
	New     any             `json:"new,omitempty"`
	Skipped string          `json:"-"`
	Raw     json.RawMessage `json:"raw,omitempty"`
}

type payload struct {
	Name    string            `json:"name"`
	Labels  map[string]string `json:"labels"`
	Changes []change          `json:"changes"`
	Blob    []byte            `json:"blob,omitempty"`
	Note    *string           `json:"note"`
	secret  string
}

type entry struct {
	ID      int      `json:"id"`
	Payload *payload `json:"payload"`
}

type Embedded struct {
	Inner string `json:"inner"`
}

type outer struct {
	Embedded
	Outer string
}

type badText struct{}

func (badText) MarshalText() ([]byte, error) { return []byte("\xff"), nil }

func TestMarshal(t *testing.T) {
	note := "a < b && c > d"
	tests := []struct {
		name string
		in   any
		want string
	}{
		{"struct tags and map order", entry{ID: 7, Payload: &payload{
			Name:    "svc",
			Labels:  map[string]string{"z": "1", "a": "2", "é": "3", "\U0001f600": "4", "\ue000": "5"},
			Changes: []change{{Op: "replace", Path: "/x", Old: 1.50, New: 1e21, Skipped: "no", Raw: json.RawMessage(`{"b":1, "a":2}`)}},
			Blob:    []byte{0xff, 0x00},
			secret:  "hidden",
		}}, `{"id":7,"payload":{"blob":"/wA=","changes":[{"new":1e+21,"old":1.5,"op":"replace","path":"/x","raw":{"a":2,"b":1}}],` +
			"\"labels\":{\"a\":\"2\",\"z\":\"1\",\"é\":\"3\",\"\U0001f600\":\"4\",\"\ue000\":\"5\"},\"name\":\"svc\",\"note\":null}}"},
		{"html not escaped", map[string]*string{"n": &note}, `{"n":"a < b && c > d"}`},
		{"embedded", outer{Embedded{"i"}, "o"}, `{"Outer":"o","inner":"i"}`},
		{"int keys sorted as strings", map[int]bool{10: true, 9: false}, `{"10":true,"9":false}`},
		{"nil", nil, `null`},
		{"minus zero", math.Copysign(0, -1), `0`},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got, err := Marshal(tt.in)
			if err != nil {
				t.Fatalf("Marshal: %v", err)
			}
			if string(got) != tt.want {
				t.Fatalf("Marshal\n got %s\nwant %s", got, tt.want)
			}
		})
	}
}

func TestMarshalRefusals(t *testing.T) {
	type cyclic struct {
		Next *cyclic `json:"next"`
	}
	loop := &cyclic{}
	loop.Next = loop
	var self any
	self = &self

	tests := []struct {
		name string
		in   any
		msg  string
	}{
		{"nested struct string", entry{Payload: &payload{Name: "bad\xffname"}},
			"canonjson: invalid UTF-8 in string at .payload.name"},
		{"slice element", entry{Payload: &payload{Changes: []change{{}, {Path: "\xc3"}}}},
			"canonjson: invalid UTF-8 in string at .payload.changes[1].path"},
		{"interface value", entry{Payload: &payload{Changes: []change{{New: []any{"ok", "\xed\xa0\x80"}}}}},
			"canonjson: invalid UTF-8 in string at .payload.changes[0].new[1]"},
		{"map value", map[string]any{"k": map[string]string{"": "\xff"}},
			"canonjson: invalid UTF-8 in string at .k."},
		{"map key", map[string]any{"k": map[string]int{"\xff": 1}},
			"canonjson: invalid UTF-8 in map key at .k"},
		{"top level", "\xff", "canonjson: invalid UTF-8 in string at ."},
		{"embedded field", outer{Embedded: Embedded{Inner: "\xff"}}, "invalid UTF-8 in string at .inner"},
		{"text marshaler", map[string]badText{"t": {}}, "invalid UTF-8 in text of canonjson.badText at .t"},
		{"text marshaler key", map[badText]int{{}: 1}, "invalid UTF-8 in map key at ."},
		{"raw message", json.RawMessage("\"\xff\""), "invalid UTF-8 in string at offset 1"},
		{"raw message duplicate", json.RawMessage(`{"a":1,"a":2}`), "duplicate member name"},
		{"NaN", math.NaN(), "unsupported value"},
		{"channel", make(chan int), "unsupported type"},
		{"struct cycle", loop, "nesting deeper than 1000"},
		{"pointer cycle", self, "pointer cycle"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got, err := Marshal(tt.in)
			if err == nil {
				t.Fatalf("Marshal = %s, want error", got)
			}
			if !errors.Is(err, ErrInvalid) {
				t.Errorf("error %v does not wrap ErrInvalid", err)
			}
			if !strings.Contains(err.Error(), tt.msg) {
				t.Errorf("error %q, want it to contain %q", err, tt.msg)
			}
		})
	}
}

// TestMarshalMatchesCanonicalize checks that Marshal and Canonicalize agree
// on the same value, so either may produce stored bytes.
func TestMarshalMatchesCanonicalize(t *testing.T) {
	var v any
	if err := json.Unmarshal([]byte(benchPayload), &v); err != nil {
		t.Fatal(err)
	}
	m, err := Marshal(v)
	if err != nil {
		t.Fatal(err)
	}
	c, err := Canonicalize([]byte(benchPayload))
	if err != nil {
		t.Fatal(err)
	}
	if string(m) != string(c) {
		t.Fatalf("Marshal and Canonicalize differ:\n%s\n%s", m, c)
	}
}
