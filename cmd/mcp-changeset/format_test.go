package main

import (
	"bytes"
	"errors"
	"flag"
	"os"
	"slices"
	"testing"
	"time"
)

func TestClean_NeutralisesControlAndFormatCharacters(t *testing.T) {
	for in, want := range map[string]string{
		"plain text, é ü 中":     "plain text, é ü 中",
		"\x1b[31mred\x1b[0m":    `\u001b[31mred\u001b[0m`,
		"a\tb\nc\rd":            `a\tb\nc\rd`,
		"\u202eevil\u202c":      `\u202eevil\u202c`,
		"line\u2028sep\u2029":   `line\u2028sep\u2029`,
		"zero\u200bwidth\u0085": `zero\u200bwidth\u0085`,
		"bad \xff byte":         `bad \xff byte`,
	} {
		if got := clean(in); got != want {
			t.Errorf("clean(%q) = %q, want %q", in, got, want)
		}
	}
	if got := cleanBlock("one\ntwo\x1b"); got != "one\ntwo\\u001b" {
		t.Errorf("cleanBlock = %q", got)
	}
}

func TestAge(t *testing.T) {
	now := time.Date(2026, 11, 30, 12, 0, 0, 0, time.UTC)
	for d, want := range map[time.Duration]string{
		0:                    "now",
		-45 * time.Second:    "45s ago",
		-3 * time.Minute:     "3m ago",
		-5 * time.Hour:       "5h ago",
		-47 * time.Hour:      "47h ago",
		-40 * 24 * time.Hour: "40d ago",
		14 * time.Minute:     "in 14m",
	} {
		if got := age(now.Add(d), now); got != want {
			t.Errorf("age(%v) = %q, want %q", d, got, want)
		}
	}
	if got := when(time.Time{}, now); got != "-" {
		t.Errorf("when(zero) = %q", got)
	}
}

func TestParseArgs_FlagsBeforeAndAfterPositionals(t *testing.T) {
	for _, tc := range []struct {
		args []string
		pos  []string
		json bool
	}{
		{[]string{"chg_1", "--json"}, []string{"chg_1"}, true},
		{[]string{"--json", "chg_1"}, []string{"chg_1"}, true},
		{[]string{"chg_1"}, []string{"chg_1"}, false},
		{[]string{"a", "--json", "b"}, []string{"a", "b"}, true},
		{[]string{"--", "--json"}, []string{"--json"}, false},
		{[]string{"a", "--", "-b"}, []string{"a", "-b"}, false},
	} {
		var ledgerFlag string
		var jsonFlag bool
		fs := newFlagSet("test", &ledgerFlag)
		fs.BoolVar(&jsonFlag, "json", false, "")
		pos, err := parseArgs(fs, tc.args)
		if err != nil || !slices.Equal(pos, tc.pos) || jsonFlag != tc.json {
			t.Errorf("parseArgs(%q) = %q, json %t, %v; want %q, json %t", tc.args, pos, jsonFlag, err, tc.pos, tc.json)
		}
	}
	fs := newFlagSet("test", nil)
	if _, err := parseArgs(fs, []string{"--help"}); !errors.Is(err, flag.ErrHelp) {
		t.Errorf("--help: %v", err)
	}
	var ue *usageError
	if _, err := parseArgs(fs, []string{"x", "--nope"}); !errors.As(err, &ue) {
		t.Errorf("unknown flag: %v", err)
	}
}

func TestFindingLines_SplitsMultiLineFindings(t *testing.T) {
	got := findingLines([]string{"integrity: *** in database main ***\nPage 12: never used\n", "change chg_1: pending\x1b"})
	// SQLite's heading is dropped: it is not a finding.
	want := []string{"integrity: Page 12: never used", `change chg_1: pending\u001b`}
	if !slices.Equal(got, want) {
		t.Errorf("findingLines = %q, want %q", got, want)
	}
}

func TestStatusCounts_InLifecycleOrder(t *testing.T) {
	got := statusCounts(map[string]int{"undone": 1, "pending": 2, "applied": 3, "weird": 1})
	if want := "2 pending, 3 applied, 1 undone, 1 weird"; got != want {
		t.Errorf("statusCounts = %q, want %q", got, want)
	}
}

func TestIsTerminal_PipesAndBuffersAreNot(t *testing.T) {
	r, w, err := os.Pipe()
	if err != nil {
		t.Fatal(err)
	}
	defer r.Close()
	defer w.Close()
	if isTerminal(w) || isTerminal(&bytes.Buffer{}) {
		t.Error("a pipe or a buffer taken for a terminal")
	}
}
