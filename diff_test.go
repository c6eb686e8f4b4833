package changeset_test

import (
	"context"
	"encoding/json"
	"fmt"
	"math"
	"strings"
	"testing"

	changeset "github.com/mcp-changeset/changeset-go"
	"github.com/modelcontextprotocol/go-sdk/mcp"
)

type address struct {
	City string `json:"city"`
	Zip  string `json:"zip,omitempty"`
}

type contact struct {
	Name    string   `json:"name"`
	Email   *string  `json:"email"`          // null when unknown
	Note    string   `json:"note,omitempty"` // absent when empty
	Age     int      `json:"age"`
	ID      uint64   `json:"id"`
	Tags    []string `json:"tags,omitempty"`
	Address *address `json:"address,omitempty"`
}

// render shows entries as "field kind before→after" with canonical JSON,
// "-" for a side that is nil.
func render(t *testing.T, entries []changeset.DiffEntry) string {
	t.Helper()
	side := func(v any) string {
		if v == nil {
			return "-"
		}
		b, err := json.Marshal(v)
		if err != nil {
			t.Fatal(err)
		}
		return string(b)
	}
	var lines []string
	for _, e := range entries {
		lines = append(lines, fmt.Sprintf("%s %s %s→%s", e.Field, e.Kind, side(e.Before), side(e.After)))
	}
	return strings.Join(lines, "\n")
}

func TestDiff(t *testing.T) {
	mail := "a@example.com"
	for _, tc := range []struct {
		name          string
		before, after any
		want          string
	}{
		{"equal structs", contact{Name: "Ann", Age: 3}, contact{Name: "Ann", Age: 3}, ""},
		{"a changed field", contact{Name: "Ann"}, contact{Name: "Bea"}, `name changed "Ann"→"Bea"`},
		{"zero is a value", contact{Name: "Ann", Age: 3}, contact{Name: "Ann", Age: 0}, `age changed 3→0`},
		{"null to a value is a change, not an addition", contact{Name: "Ann"}, contact{Name: "Ann", Email: &mail},
			`email changed null→"a@example.com"`},
		{"absent (omitempty) to a value is an addition", contact{Name: "Ann"}, contact{Name: "Ann", Note: "vip"},
			`note added -→"vip"`},
		{"a value to absent is a removal", contact{Name: "Ann", Tags: []string{"x"}}, contact{Name: "Ann"},
			`tags removed ["x"]→-`},
		{"a nested object is one field with both whole values",
			contact{Name: "Ann", Address: &address{City: "Oslo", Zip: "0150"}}, contact{Name: "Ann", Address: &address{City: "Bergen", Zip: "0150"}},
			`address changed {"city":"Oslo","zip":"0150"}→{"city":"Bergen","zip":"0150"}`},
		{"integers beyond 2^53 compare exactly", contact{ID: 1<<60 + 1}, contact{ID: 1<<60 + 2},
			`id changed 1152921504606846977→1152921504606846978`},
		{"1 and 1.0 are equal", map[string]any{"n": 1}, map[string]any{"n": 1.0}, ""},
		{"a creation adds every field", nil, map[string]any{"b": 2, "a": nil}, "a added -→null\nb added -→2"},
		{"a removal removes every field", map[string]int{"a": 1}, nil, "a removed 1→-"},
		{"a nil pointer is a thing that does not exist", (*contact)(nil), &contact{Name: "Ann"},
			"age added -→0\nemail added -→null\nid added -→0\nname added -→\"Ann\""},
		{"scalars are one entry with no field name", "light", "dark", ` changed "light"→"dark"`},
		{"equal arrays: nothing", []int{1, 2}, []int{1, 2}, ""},
		{"an array to nothing", []int{1}, nil, ` removed [1]→-`},
		{"an object to a scalar", map[string]int{"a": 1}, 7, ` changed {"a":1}→7`},
		{"raw JSON is compared as JSON", json.RawMessage(`{"a": 1.0, "b": [1]}`), map[string]any{"b": []int{1}, "a": 1}, ""},
	} {
		t.Run(tc.name, func(t *testing.T) {
			got, err := changeset.Diff(tc.before, tc.after)
			if err != nil {
				t.Fatalf("Diff: %v", err)
			}
			if got == nil {
				t.Fatal("Diff returned nil, want an empty slice (the stored diff is [])")
			}
			if s := render(t, got); s != tc.want {
				t.Errorf("Diff:\n%s\nwant:\n%s", s, tc.want)
			}
		})
	}
}

func TestDiff_RefusesWhatJSONCannotHold(t *testing.T) {
	if _, err := changeset.Diff(map[string]float64{"x": math.NaN()}, nil); err == nil || !strings.Contains(err.Error(), "before") {
		t.Errorf("Diff(NaN) = %v, want an error naming the before value", err)
	}
	if _, err := changeset.Diff(nil, map[string]any{"c": make(chan int)}); err == nil || !strings.Contains(err.Error(), "after") {
		t.Errorf("Diff(chan) = %v, want an error naming the after value", err)
	}
}

func TestDiffFields_SetsKinds(t *testing.T) {
	got := render(t, changeset.DiffFields(map[string]any{"a": 1, "b": nil, "c": 3}, map[string]any{"a": 2, "b": nil, "d": nil}))
	// d is added with the value nil, which reads "-" here (the stored form
	// is null): its kind, not its value, says it was added.
	want := "a changed 1→2\nc removed 3→-\nd added -→-"
	if got != want {
		t.Errorf("DiffFields:\n%s\nwant:\n%s", got, want)
	}
}

// A DiffEntry decoded from JSON, as a Go client reads a result, holds its
// values as their exact JSON text; null is a value, a missing side nil.
func TestDiffEntry_UnmarshalJSONKeepsValuesExact(t *testing.T) {
	var entries []changeset.DiffEntry
	in := `[{"field":"id","kind":"changed","before":null,"after":1152921504606846977},{"field":"tags","kind":"added","after":["a",{"b":1.5}]},null]`
	if err := json.Unmarshal([]byte(in), &entries); err != nil {
		t.Fatal(err)
	}
	if len(entries) != 3 {
		t.Fatalf("entries %+v", entries)
	}
	id, tags := entries[0], entries[1]
	if b, ok := id.Before.(json.RawMessage); !ok || string(b) != "null" {
		t.Errorf("before %#v, want json.RawMessage null", id.Before)
	}
	if a, ok := id.After.(json.RawMessage); !ok || string(a) != "1152921504606846977" {
		t.Errorf("after %#v, want the exact integer", id.After)
	}
	if tags.Kind != changeset.DiffAdded || tags.Before != nil {
		t.Errorf("tags %+v, want added with no before", tags)
	}
	if a, ok := tags.After.(json.RawMessage); !ok || string(a) != `["a",{"b":1.5}]` {
		t.Errorf("tags after %#v", tags.After)
	}
	if entries[2].Field != "" || entries[2].Before != nil || entries[2].After != nil {
		t.Errorf("null decoded as %+v, want the zero entry", entries[2])
	}
	kept := changeset.DiffEntry{Field: "kept", Kind: changeset.DiffChanged}
	if err := json.Unmarshal([]byte("null"), &kept); err != nil || kept.Field != "kept" {
		t.Errorf("null into an entry: %v, %+v; want it left as it was, as for any struct", err, kept)
	}
	if out, _ := json.Marshal(entries[:1]); string(out) != `[{"field":"id","kind":"changed","before":null,"after":1152921504606846977}]` {
		t.Errorf("re-encoded as %s", out)
	}
	if err := json.Unmarshal([]byte(`[{"field":7}]`), &entries); err == nil {
		t.Error("a field that is not a string decoded without an error")
	}
}

// TestOperation_RefusalsAreNilProposalsAndANilProposalIsABug
// drives an operation through the MCP tools: a
// refusal returned as (nil, err), a Preview that forgot to return a
// proposal, and a full preview, apply and undo whose stored diff carries
// kinds, whatever the Preview's entries said.
func TestOperation_RefusalsAreNilProposalsAndANilProposalIsABug(t *testing.T) {
	f := newFixture(t)
	store := map[string]contact{"ann": {Name: "Ann", Age: 40}}
	type renameIn struct {
		ID   string `json:"id"`
		Name string `json:"name"`
	}
	type renamePayload struct {
		ID         string  `json:"id"`
		BeforeJSON contact `json:"before"`
		AfterJSON  contact `json:"after"`
	}
	op := changeset.Operation[renameIn, renamePayload, contact]{
		Preview: func(ctx context.Context, in renameIn) (*changeset.Proposal[renamePayload], error) {
			cur, ok := store[in.ID]
			switch {
			case !ok:
				return nil, changeset.Refuse("no contact %q", in.ID)
			case in.Name == "":
				return nil, nil // a bug in the Preview: neither a proposal nor an error
			}
			next := cur
			next.Name = in.Name
			diff, err := changeset.Diff(cur, next)
			if err != nil {
				return nil, err
			}
			return &changeset.Proposal[renamePayload]{
				Payload: renamePayload{ID: in.ID, BeforeJSON: cur, AfterJSON: next},
				Diff:    diff, Summary: "Rename " + in.ID,
			}, nil
		},
		Apply: func(ctx context.Context, p renamePayload) (contact, error) {
			old := store[p.ID]
			store[p.ID] = p.AfterJSON
			return old, nil
		},
		Undo: func(ctx context.Context, p renamePayload, old contact) error {
			store[p.ID] = old
			return nil
		},
		Observe: func(ctx context.Context, p renamePayload) (any, error) { return store[p.ID], nil },
	}
	changeset.Register(f.guard, &mcp.Tool{Name: "rename_contact"}, op)
	cs := f.session

	mustFail(t, cs, "preview_rename_contact", map[string]any{"id": "bob", "name": "Bob"}, `no contact "bob"`)
	// A Preview that returns neither is a bug: the agent gets the error's
	// type and a reference to the log, and nothing is stored.
	before := countStoredChanges(t, f.guard)
	msg := mustFail(t, cs, "preview_rename_contact", map[string]any{"id": "ann", "name": ""}, "(reference ref_")
	if strings.Contains(msg, "neither a proposal nor an error") {
		t.Errorf("the agent reads the Go error's text: %q", msg)
	}
	if n := countStoredChanges(t, f.guard); n != before {
		t.Errorf("a Preview without a proposal stored %d changes", n-before)
	}

	p := mustCall(t, cs, "preview_rename_contact", map[string]any{"id": "ann", "name": "Anne"})
	diff, _ := p["diff"].([]any)
	if len(diff) != 1 {
		t.Fatalf("diff = %v, want one entry", p["diff"])
	}
	if e := diff[0].(map[string]any); e["field"] != "name" || e["kind"] != "changed" || e["before"] != "Ann" || e["after"] != "Anne" {
		t.Errorf("diff entry = %v", e)
	}
	mustCall(t, cs, "apply_change", map[string]any{"change_id": p["change_id"], "confirmation_token": p["confirmation_token"]})
	if store["ann"].Name != "Anne" || store["ann"].Age != 40 {
		t.Errorf("after apply: %+v", store["ann"])
	}
	st := mustCall(t, cs, "get_change_status", map[string]any{"change_id": p["change_id"]})
	if e := st["diff"].([]any)[0].(map[string]any); e["kind"] != "changed" {
		t.Errorf("get_change_status diff = %v", st["diff"])
	}
}

// TestProposal_DiffKindsAreInferredAndChecked: entries built by hand get a
// kind from which side is nil; an unknown kind is refused before anything
// is stored.
func TestProposal_DiffKindsAreInferredAndChecked(t *testing.T) {
	f := newFixture(t)
	type handIn struct {
		Kind string `json:"kind"`
	}
	changeset.Register(f.guard, &mcp.Tool{Name: "hand"}, changeset.Operation[handIn, handIn, string]{
		Preview: func(ctx context.Context, in handIn) (*changeset.Proposal[handIn], error) {
			return &changeset.Proposal[handIn]{Payload: in, Summary: "hand", Diff: []changeset.DiffEntry{
				{Field: "new", After: 1},
				{Field: "gone", Before: 1},
				{Field: "same", Before: 1, After: 2, Kind: changeset.DiffKind(in.Kind)},
			}}, nil
		},
		Apply: func(ctx context.Context, p handIn) (string, error) { return "", nil },
	})
	cs := f.session
	p := mustCall(t, cs, "preview_hand", map[string]any{"kind": ""})
	var kinds []string
	for _, e := range p["diff"].([]any) {
		kinds = append(kinds, e.(map[string]any)["field"].(string)+"="+e.(map[string]any)["kind"].(string))
	}
	if got := strings.Join(kinds, " "); got != "new=added gone=removed same=changed" {
		t.Errorf("kinds = %s", got)
	}
	mustFail(t, cs, "preview_hand", map[string]any{"kind": "moved"}, `kind "moved"`)
	if n := countStoredChanges(t, f.guard); n != 1 {
		t.Errorf("%d changes stored, want 1 (the refused preview stores nothing)", n)
	}
}
