package changeset

import (
	"encoding/json"
	"strings"
	"testing"

	"github.com/google/jsonschema-go/jsonschema"
)

// TestOutputSchema_EveryFieldDescribedAndItemsDefinedOnce checks the shared
// tools' output schemas: every property, at every depth and in every
// definition, has a description; no property schema is the bare true the
// TypeScript SDK rejects; the run report's repeated item schemas are
// defined once; and a report with every list filled validates.
func TestOutputSchema_EveryFieldDescribedAndItemsDefinedOnce(t *testing.T) {
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
				if ps == nil || (ps.Description == "" && ps.Ref == "") {
					t.Errorf("%s: property %s%s has no description", name, path, p)
					continue
				}
				if ps.Items != nil {
					check(path+p+"[].", ps.Items)
				}
				check(path+p+".", ps)
			}
		}
		check("", s)
		for d, ds := range s.Defs {
			check("$defs."+d+".", ds)
		}
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
	if got := strings.Count(string(b), `"reason":`); got != 1 {
		t.Errorf("the run report's note schema appears %d times, want once: %s", got, b)
	}
	if report.Defs["RunNote"] == nil || report.Defs["RunStep"] == nil {
		t.Errorf("definitions = %v, want RunNote and RunStep", report.Defs)
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
		NotCarriedOut: []string{"chg_2"}, Notes: []RunNote{note}}
	var v any
	raw, _ := json.Marshal(full)
	_ = json.Unmarshal(raw, &v)
	if err := resolved.Validate(v); err != nil {
		t.Errorf("a full report does not validate: %v\n%s", err, raw)
	}
	// The schema still checks what it describes: a drift entry without its
	// field is refused.
	bad := strings.Replace(string(raw), `"field":"theme",`, "", 1)
	_ = json.Unmarshal([]byte(bad), &v)
	if err := resolved.Validate(v); err == nil {
		t.Errorf("a drift entry without field validates: %s", bad)
	}
}
