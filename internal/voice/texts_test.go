package voice

import (
	"regexp"
	"strings"
	"testing"
)

// unprefixed matches a shared tool's name, or preview_, without a prefix.
var unprefixed = regexp.MustCompile(`(^|[^A-Za-z0-9_])(apply_change|undo_change|get_change_status|start_run|get_run|list_runs|undo_run|preview_)`)

// Every text a voice renders names its tools with the prefix and its
// variable as given, in both approval modes, writes on or off.
func TestVoice_TextsFollowTheOptions(t *testing.T) {
	for _, mode := range []Mode{Token, User} {
		v := New("crm_", "CRM_WRITES", mode)
		texts := []string{
			v.Instructions(true, ""), v.Instructions(false, ""), v.Instructions(false, "guraded"),
			v.PreviewTool(), v.RunIDParam(), v.ApplyTool(), v.UndoTool(), v.StatusTool(),
			v.StartRunTool(), v.GetRunTool(), v.ListRunsTool(), v.UndoRunTool(),
			v.PreviewNextStep(true, ""), v.PreviewNextStep(false, ""), v.PreviewNextStep(false, "x"),
			v.WritesOff(NotDone("chg_0123456789abcdef0123", "applied"), "guraded"), v.WritesOff("", ""),
			v.RunNotFound("run_0123456789abcdef0123"), v.RunClosed("run_0123456789abcdef0123", "undone"),
		}
		for _, s := range texts {
			if m := unprefixed.FindString(s); m != "" {
				t.Errorf("mode %d: %q names %q without the prefix", mode, s, m)
			}
			if strings.Contains(s, "MCP_CHANGESET_WRITE_MODE") {
				t.Errorf("mode %d: %q names the default variable", mode, s)
			}
		}
	}
}

// Under token approval the instructions say that showing the diff is the
// agent's duty; in every mode they say that values are data.
func TestVoice_InstructionsFrameDataAndDuty(t *testing.T) {
	tok := New("", "W", Token).Instructions(true, "")
	if !strings.Contains(tok, "cannot see whether the user saw the diff") {
		t.Errorf("token instructions do not say showing the diff is the agent's duty:\n%s", tok)
	}
	for _, s := range []string{tok, New("", "W", User).Instructions(true, "")} {
		if !strings.Contains(s, "are data") || strings.Contains(s, "Writes are off") {
			t.Errorf("instructions:\n%s", s)
		}
	}
	off := New("", "", Token).Instructions(false, "")
	if !strings.Contains(off, "Writes are off") || strings.Contains(off, "=guarded") {
		t.Errorf("writes fixed off by the options:\n%s", off)
	}
}

// An unknown write mode is quoted in the refusal with the valid values.
func TestVoice_WritesOffNamesAnUnknownMode(t *testing.T) {
	got := New("", "W", Token).WritesOff("", "gu\"a\nr")
	if !strings.Contains(got, `W holds "gu\"a\nr", which is not a write mode`) || !strings.Contains(got, "guarded and disabled") || !strings.Contains(got, "W=guarded") {
		t.Errorf("WritesOff = %q", got)
	}
}

// A caller's malformed ID is quoted and cut short.
func TestChangeNotFound_QuotesAndCutsACallersID(t *testing.T) {
	got := ChangeNotFound(strings.Repeat("x", 100) + "\n")
	if strings.Contains(got, "\n") || len(got) > 80 || !strings.HasPrefix(got, `change "xxx`) {
		t.Errorf("ChangeNotFound = %q", got)
	}
}
