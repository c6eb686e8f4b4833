package voice

import (
	"encoding/json"
	"regexp"
	"strings"
	"testing"
)

// A drift description quotes resource and field names and values, so a
// name or a value cannot end the sentence or reorder it.
func TestMoved_QuotesNamesAndValues(t *testing.T) {
	v := New("crm_", "CRM_WRITES", Token)
	evil := "a\"b\nc\x1b[0m\u202ed"
	raw, _ := json.Marshal(evil)
	for _, d := range [][]Drift{
		{{Field: "", Expected: json.RawMessage(`"dark"`), Found: raw}},
		{{Field: evil, Expected: json.RawMessage(`1`), Found: json.RawMessage(`2`)}},
		{{Resource: evil, Field: "v", Expected: json.RawMessage(`1`), Found: raw}},
		{{Resource: evil, Field: "v"}, {Resource: "row:b", Field: "v"}},
		{{Field: evil}, {Field: "x"}},
	} {
		got := v.Moved(d)
		for _, bad := range []string{"\n", "\x1b", "\u202e", `a"b`} {
			if strings.Contains(got, bad) {
				t.Errorf("Moved(%+v) = %q holds %q unescaped", d, got, bad)
			}
		}
		if !strings.Contains(got, `a\"b\nc\u001b[0m\u202ed`) {
			t.Errorf("Moved(%+v) = %q does not quote the name or value", d, got)
		}
	}
	if got := v.Moved([]Drift{{Field: "theme", Expected: json.RawMessage(`"dark"`), Found: json.RawMessage(`"blue"`)}}); got != `"theme" is now "blue" (this change left "dark")` {
		t.Errorf("Moved = %q", got)
	}
}

// Every text of a run's undo names the Guard's tools with its prefix.
func TestRunTexts_NameToolsWithThePrefix(t *testing.T) {
	unprefixed := regexp.MustCompile(`(^|[^a-z_])(apply_change|undo_change|get_change_status|start_run|get_run|list_runs|undo_run)`)
	for _, mode := range []Mode{Token, User} {
		v := New("crm_", "CRM_WRITES", mode)
		for _, s := range []string{
			v.RunNotFound("run_0123456789abcdef0123"), v.RunBusy("run_0123456789abcdef0123"), v.RunMoved("run_0123456789abcdef0123", "undoing"),
			v.RunCursorInvalid("x", "run_0123456789abcdef0123"), v.RunNeedsToken("run_0123456789abcdef0123"),
			v.RunTokenInvalid("run_0123456789abcdef0123"), v.RunPlanChanged("run_0123456789abcdef0123"), v.RunDryRunNext(),
			v.RunNothingToUndo(true), v.RunNothingToUndo(false), v.RunReplayed("undone", "2026-01-01T00:00:00Z", "agent"),
			v.ReasonUndoFailedEarlier("state_changed", true),
		} {
			if m := unprefixed.FindString(s); m != "" {
				t.Errorf("%q names %q without the prefix", s, m)
			}
		}
	}
}

// A replayed report's note says when and by whom, the who quoted.
func TestRunReplayed_SaysWhenAndWho(t *testing.T) {
	got := New("", "", Token).RunReplayed("partially_undone", "2026-11-30T09:00:00Z", "person:a\nb")
	for _, want := range []string{"already undone", "partially_undone", "2026-11-30T09:00:00Z", `"person:a\nb"`, "Nothing was done now"} {
		if !strings.Contains(got, want) {
			t.Errorf("RunReplayed = %q, want %q in it", got, want)
		}
	}
}

// A failure the library decided is said in words; an operation's own
// error by its type name only.
func TestFailureError_NoLibraryIdentifiers(t *testing.T) {
	v := New("", "", Token)
	for _, c := range []struct{ failure, typ, kind string }{
		{"state_changed", "changeset.StateChangedError", "state_changed"},
		{"result_too_large", "changeset.ChangeError", "refused"},
		{"interrupted", "Reconciled", "interrupted"},
		{"error", "changeset.PanicError", "panic"},
		{"error", "changeset.ChangeError", "refused"},
		{"error", "ledger.Error", "ledger"},
		{"error", "RunUndo", "run_undo"},
		{"error", "changeset.SomethingNew", ""},
	} {
		got := v.FailureError(c.failure, c.typ, c.kind)
		if got == "" || strings.Contains(got, "changeset.") || strings.Contains(got, "ledger.") || strings.Contains(got, "RunUndo") {
			t.Errorf("FailureError(%q, %q) = %q", c.failure, c.typ, got)
		}
	}
	if got := v.FailureError("error", "fs.PathError", ""); got != "fs.PathError" {
		t.Errorf("an operation's own error = %q, want its type name", got)
	}
	if got := v.FailureError("", "", ""); got != "" {
		t.Errorf("no failure = %q, want none", got)
	}
}
