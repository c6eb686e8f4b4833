package changeset

import (
	"encoding/json"
	"strings"
	"testing"

	"github.com/google/jsonschema-go/jsonschema"
	"github.com/mcp-changeset/changeset-go/internal/voice"
)

// TestOutputSchema_EveryFieldDescribed checks the shared tools' output
// schemas: every property, at every depth, is described in its schema or
// by the instructions' glossary (voice.Glossary); no property schema is
// the bare true the TypeScript SDK rejects; a list of objects names its
// items' fields in words, once per schema; and a report with every list
// filled validates, while one with a field of the wrong type does not.
func TestOutputSchema_EveryFieldDescribed(t *testing.T) {
	for name, s := range map[string]*jsonschema.Schema{
		"PreviewResult": outputSchema[PreviewResult](),
		"ApplyResult":   outputSchema[ApplyResult](),
		"UndoResult":    outputSchema[UndoResult](),
		"ChangeStatus":  outputSchema[ChangeStatus](),
		"RunInfo":       outputSchema[RunInfo](),
		"RunDetail":     outputSchema[RunDetail](),
		"listRuns":      outputSchema[listRunsOutput](),
		"RunReport":     outputSchema[RunReport](),
	} {
		var check func(path string, s *jsonschema.Schema)
		check = func(path string, s *jsonschema.Schema) {
			for p, ps := range s.Properties {
				switch {
				case ps == nil:
					t.Errorf("%s: property %s%s is nil", name, path, p)
				case voice.InGlossary(p):
					if ps.Description != "" {
						t.Errorf("%s: %s%s is described by the glossary and again in the schema", name, path, p)
					}
				case ps.Description == "":
					t.Errorf("%s: property %s%s has no description", name, path, p)
				}
				if ps != nil && ps.Items != nil && len(ps.Items.Properties) > 0 {
					t.Errorf("%s: the items of %s%s are a schema, not words: %v", name, path, p, ps.Items.Properties)
				}
				if ps != nil {
					check(path+p+".", ps)
				}
			}
		}
		check("", s)
		b, err := json.Marshal(s)
		if err != nil {
			t.Fatal(err)
		}
		if strings.Contains(string(b), ":true") || strings.Contains(string(b), `"additionalProperties"`) {
			t.Errorf("%s: %s", name, b)
		}
	}

	report := outputSchema[RunReport]()
	b, _ := json.Marshal(report)
	if got := strings.Count(string(b), "reason"); got != 1 {
		t.Errorf("the run report names a note's fields %d times, want once: %s", got, b)
	}
	resolved, err := report.Resolve(nil)
	if err != nil {
		t.Fatal(err)
	}
	step := RunStep{ChangeID: "chg_1", Action: "set", Summary: "s", Resources: []string{"a", "b"}}
	note := RunNote{ChangeID: "chg_2", Action: "set", Resource: "r", Summary: "s", Reason: "why",
		Drift: []Drift{{Field: "theme", Expected: json.RawMessage(`"dark"`), Found: json.RawMessage(`{"x":[1]}`)}}}
	full := RunReport{RunID: "run_1", Status: "undone", WillUndo: []RunStep{step}, Undone: []RunStep{step},
		NoNetChange: []RunStep{}, Skipped: []RunNote{note}, Irreversible: []RunNote{}, Failed: []RunNote{note},
		NotCarriedOut: []string{"chg_2"}, Notes: []RunNote{note}, Replayed: true, ReplayNote: "n"}
	var v any
	raw, _ := json.Marshal(full)
	_ = json.Unmarshal(raw, &v)
	if err := resolved.Validate(v); err != nil {
		t.Errorf("a full report does not validate: %v\n%s", err, raw)
	}
	// The schema still checks the types it states.
	bad := strings.Replace(string(raw), `"dry_run":false`, `"dry_run":"no"`, 1)
	_ = json.Unmarshal([]byte(bad), &v)
	if err := resolved.Validate(v); err == nil {
		t.Errorf("a report whose dry_run is text validates: %s", bad)
	}
}

// A diff entry's schema is never the bare true the TypeScript SDK
// rejects, though Before and After are Go `any`: schemaOptions infers
// them as every JSON type. (In a result the glossary reduces "diff" to
// its type; this is the schema any other place would carry.)
func TestOutputSchema_DiffEntryIsNoBareTrue(t *testing.T) {
	s, err := jsonschema.For[DiffEntry](schemaOptions)
	if err != nil {
		t.Fatal(err)
	}
	b, _ := json.Marshal(s)
	if strings.Contains(string(b), ":true") || s.Properties["before"] == nil || len(s.Properties["before"].Types) != len(anyJSONTypes) {
		t.Fatalf("DiffEntry schema %s", b)
	}
	resolved, err := s.Resolve(nil)
	if err != nil {
		t.Fatal(err)
	}
	for _, entry := range []string{
		`{"field":"a","kind":"changed","before":{"x":[1,"y"]},"after":null}`,
		`{"field":"","kind":"added","before":null,"after":1152921504606846977}`,
	} {
		var v any
		if err := json.Unmarshal([]byte(entry), &v); err != nil {
			t.Fatal(err)
		}
		if err := resolved.Validate(v); err != nil {
			t.Errorf("%s does not validate: %v", entry, err)
		}
	}
}
