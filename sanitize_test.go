package changeset

import (
	"github.com/mcp-changeset/changeset-go/internal/token"
	"github.com/mcp-changeset/changeset-go/ledger"
	"strings"
	"testing"
	"unicode/utf8"
)

func TestNeutralize_MakesControlFormatAndSeparatorCharactersVisible(t *testing.T) {
	for _, tc := range []struct{ in, want string }{
		{"plain text, café 😀", "plain text, café 😀"},
		{"a\nb", "a⏎b"},
		{"a\tb", "a b"},
		{"\r", "<U+000D>"},
		{"\x1b[31mred", "<U+001B>[31mred"},
		{"\x00\x7f\u0085", "<U+0000><U+007F><U+0085>"},
		{"abc\u202edef", "abc<U+202E>def"},
		{"\u2066x\u2069", "<U+2066>x<U+2069>"},
		{"zero\u200bwidth\u200d\ufeff", "zero<U+200B>width<U+200D><U+FEFF>"},
		{"\u00ad", "<U+00AD>"},
		{"line\u2028para\u2029", "line<U+2028>para<U+2029>"},
		{"tag\U000E0041", "tag<U+E0041>"},
		{"bad\xffbyte", "bad<invalid byte>byte"},
		{"\ufffd", "\ufffd"},
	} {
		if got := neutralize(tc.in); got != tc.want {
			t.Errorf("neutralize(%q) = %q, want %q", tc.in, got, tc.want)
		}
	}
}

func TestClip_CutsFromTheMiddleAndKeepsBothEnds(t *testing.T) {
	if got := clip("short\n", 20); got != "short⏎" {
		t.Errorf("clip of a short value = %q", got)
	}
	long := "BEGIN" + strings.Repeat("\u202e", 500) + "END"
	got := clip(long, 100)
	if len(got) > 100 || !utf8.ValidString(got) {
		t.Fatalf("clip = %q (%d bytes)", got, len(got))
	}
	if !strings.HasPrefix(got, "BEGIN<U+202E>") || !strings.HasSuffix(got, "<U+202E>END") {
		t.Errorf("clip lost an end: %q", got)
	}
	if strings.Contains(got, "\u202e") || !strings.Contains(got, "characters omitted] …") {
		t.Errorf("clip = %q", got)
	}
	// Placeholders are never split.
	if strings.Count(got, "<") != strings.Count(got, ">") {
		t.Errorf("a placeholder was cut: %q", got)
	}
	for n := 40; n < 120; n++ { // from the marker's own length up
		if s := clip(strings.Repeat("é", 200), n); len(s) > n {
			t.Fatalf("clip(_, %d) is %d bytes", n, len(s))
		}
	}
}

func TestComposeMessage_StaysWithinTheLimitAndCountsWhatItLeavesOut(t *testing.T) {
	var sections []section
	for _, title := range []string{"First:", "Second:", "Third:"} {
		s := section{title: title, noun: "items"}
		for range 50 {
			s.items = append(s.items, clip(strings.Repeat("x", 1000), maxValueBytes))
		}
		sections = append(sections, s)
	}
	msg := composeMessage([]string{"Question?", "", "Summary: " + clip(strings.Repeat("s", 999), maxTextBytes)}, sections, "Footer.")
	if len(msg) > maxMessageBytes {
		t.Fatalf("message is %d bytes", len(msg))
	}
	for _, want := range []string{"Question?", "First:", "Second:", "Third:", "more items, not shown here", "\nFooter."} {
		if !strings.Contains(msg, want) {
			t.Errorf("message lacks %q", want)
		}
	}
	// Everything fits: nothing is counted as left out.
	small := composeMessage([]string{"Q?"}, []section{{"Items:", "items", []string{"a", "b"}}}, "F.")
	if small != "Q?\n\nItems:\n• a\n• b\n\nF." {
		t.Errorf("small message = %q", small)
	}
}

// TestChangeMessage_DiffRules: the approval question shows a diff by the
// rules the dashboard shares (package diffview): nested objects by the
// fields that differ, an added field as "(none)" on its before side, null
// as null; the undo question swaps the sides.
func TestChangeMessage_DiffRules(t *testing.T) {
	diff, err := Diff(
		map[string]any{"address": map[string]any{"city": "Oslo", "zip": "0150"}, "email": nil},
		map[string]any{"address": map[string]any{"city": "Bergen", "zip": "0150"}, "email": "a@b", "note": "new\nline"},
	)
	if err != nil {
		t.Fatal(err)
	}
	sp, err := canonicalProposal(Proposal[int]{Diff: diff})
	if err != nil {
		t.Fatal(err)
	}
	c := &ledger.Change{ID: "chg_1", Action: "edit", Summary: "Edit", Diff: sp.Diff}
	apply := changeMessage(token.PurposeApply, c)
	for _, want := range []string{
		"• address.city: \"Oslo\" → \"Bergen\"\n",
		"• email: null → \"a@b\"\n",
		"• note: (none) → \"new\\nline\"\n",
	} {
		if !strings.Contains(apply, want) {
			t.Errorf("apply question lacks %q:\n%s", want, apply)
		}
	}
	if strings.Contains(apply, "zip") {
		t.Errorf("apply question shows the unchanged nested field zip:\n%s", apply)
	}
	undo := changeMessage(token.PurposeUndo, c)
	for _, want := range []string{"• address.city: \"Bergen\" → \"Oslo\"\n", "• note: \"new\\nline\" → (none)\n", "• email: \"a@b\" → null\n"} {
		if !strings.Contains(undo, want) {
			t.Errorf("undo question lacks %q:\n%s", want, undo)
		}
	}
}
