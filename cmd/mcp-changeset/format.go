package main

import (
	"bytes"
	"encoding/json"
	"fmt"
	"io"
	"os"
	"strings"
	"text/tabwriter"
	"time"
	"unicode"
	"unicode/utf8"
)

// Human output shows values that an agent chose (summaries, payloads,
// error text). Printed raw, a value could move the cursor, recolour the
// terminal or reorder text with bidirectional controls, so every value is
// passed through clean or cleanBlock first. JSON output needs no such care:
// it is for programs, and encoding/json escapes control characters.

// clean returns s for one cell or line of human output: control and format
// characters (Unicode categories Cc, Cf, Zl, Zp), including tabs and
// newlines, become visible escapes such as \n or \u202e, and invalid UTF-8
// becomes \xNN.
func clean(s string) string { return neutralise(s, false) }

// cleanBlock is clean for text of several lines: newlines are kept.
func cleanBlock(s string) string { return neutralise(s, true) }

func neutralise(s string, keepNewlines bool) string {
	var sb strings.Builder
	for i := 0; i < len(s); {
		r, size := utf8.DecodeRuneInString(s[i:])
		switch {
		case r == utf8.RuneError && size == 1:
			fmt.Fprintf(&sb, `\x%02x`, s[i])
		case r == '\n' && keepNewlines:
			sb.WriteByte('\n')
		case r == '\n':
			sb.WriteString(`\n`)
		case r == '\t':
			sb.WriteString(`\t`)
		case r == '\r':
			sb.WriteString(`\r`)
		case unicode.In(r, unicode.Cc, unicode.Cf, unicode.Zl, unicode.Zp):
			fmt.Fprintf(&sb, `\u%04x`, r)
		default:
			sb.WriteRune(r)
		}
		i += size
	}
	return sb.String()
}

// truncate cuts s to at most n runes, marking the cut with an ellipsis.
func truncate(s string, n int) string {
	if utf8.RuneCountInString(s) <= n {
		return s
	}
	r := []rune(s)
	return string(r[:n-1]) + "…"
}

// orDash returns s, or "-" for an empty s, so that table cells never
// vanish.
func orDash(s string) string {
	if s == "" {
		return "-"
	}
	return s
}

// localTime formats t in local time for people, or "-" for the zero time.
func localTime(t time.Time) string {
	if t.IsZero() {
		return "-"
	}
	return t.Local().Format("2006-01-02 15:04:05")
}

// when formats t in local time with its age relative to now:
// "2026-11-30 10:15:03 (3m ago)", "… (in 14m)". The zero time is "-".
func when(t, now time.Time) string {
	if t.IsZero() {
		return "-"
	}
	return localTime(t) + " (" + age(t, now) + ")"
}

// age says how long ago t was, or how long until it comes: "45s ago",
// "3m ago", "5h ago", "12d ago", "in 14m", "now".
func age(t, now time.Time) string {
	d := now.Sub(t)
	future := d < 0
	if future {
		d = -d
	}
	var s string
	switch {
	case d < time.Second:
		return "now"
	case d < time.Minute:
		s = fmt.Sprintf("%ds", int(d/time.Second))
	case d < time.Hour:
		s = fmt.Sprintf("%dm", int(d/time.Minute))
	case d < 48*time.Hour:
		s = fmt.Sprintf("%dh", int(d/time.Hour))
	default:
		s = fmt.Sprintf("%dd", int(d/(24*time.Hour)))
	}
	if future {
		return "in " + s
	}
	return s + " ago"
}

// table writes aligned columns. Cells must already be clean.
type table struct{ tw *tabwriter.Writer }

func newTable(w io.Writer, header ...string) *table {
	t := &table{tw: tabwriter.NewWriter(w, 0, 4, 2, ' ', 0)}
	t.row(header...)
	return t
}

func (t *table) row(cells ...string) { fmt.Fprintln(t.tw, strings.Join(cells, "\t")) }

func (t *table) flush() error { return t.tw.Flush() }

// writeJSON writes v as one indented JSON document.
func writeJSON(w io.Writer, v any) error {
	enc := json.NewEncoder(w)
	enc.SetIndent("", "  ")
	return enc.Encode(v)
}

// indentJSON pretty-prints a stored canonical JSON value for people,
// prefixing every line with prefix. Characters that clean would escape are
// written as JSON escapes, which keeps the text valid JSON. A nil value is
// "null".
func indentJSON(raw json.RawMessage, prefix string) string {
	if len(raw) == 0 {
		return prefix + "null"
	}
	var buf bytes.Buffer
	if err := json.Indent(&buf, raw, prefix, "  "); err != nil {
		return prefix + clean(string(raw))
	}
	return prefix + cleanBlock(buf.String())
}

// isTerminal reports whether w is a terminal, where progress lines are
// welcome. It takes any character device for one, which also counts
// /dev/null: harmless, and it needs no dependency.
func isTerminal(w io.Writer) bool {
	f, ok := w.(*os.File)
	if !ok {
		return false
	}
	fi, err := f.Stat()
	return err == nil && fi.Mode()&os.ModeCharDevice != 0
}
