// Package voice holds every sentence a changeset Guard says to an agent:
// the server instructions, tool descriptions, next steps, refusals and the
// reasons of a run's undo. Nothing else in the library writes a sentence
// for the agent, so that one reading of this package is a reading of
// everything the agent can be told, and so that every sentence follows the
// Guard's options: tools are named with Options.Prefix, the write-mode
// variable is Options.WriteModeEnv, and the approval mode decides what
// the agent is asked to do.
//
// # Data is never instructions
//
// A value that did not come from the library's own words (a diff value, a
// state found by a check, a summary, a name an agent or a person chose, a
// client's name) reaches the agent only inside a JSON field of its own or,
// inside a sentence, quoted by Quote or Value: as a JSON string or value,
// with every control and bidirectional-formatting character escaped, so
// that it reads as data and cannot end the sentence, start a new line or
// reorder the text around it. IDs the library made are written as they
// are (see ID).
package voice

import (
	"bytes"
	"encoding/json"
	"fmt"
	"slices"
	"strings"
	"time"
	"unicode"
	"unicode/utf8"
)

// Mode is how changes are approved, which decides what the agent is asked
// to do.
type Mode int

// The approval modes.
const (
	// Token: the agent holds the tokens; the user's approval is on the
	// agent's honour.
	Token Mode = iota
	// User: the user approves in the client (elicitation).
	User
	// Person: the agent holds the tokens, and a named person approves
	// every write out of band, at a link.
	Person
)

// Voice renders the library's sentences for one Guard's options.
type Voice struct {
	prefix string
	env    string
	mode   Mode
}

// New returns the voice of a Guard whose tools carry prefix, whose writes
// are enabled by the environment variable env ("" when the Guard's
// options fix the write mode, so that no variable turns writes on),
// approving by mode.
func New(prefix, env string, mode Mode) *Voice {
	return &Voice{prefix: prefix, env: env, mode: mode}
}

// Tool is the name the agent sees for one of the Guard's tools: name with
// the Guard's prefix.
func (v *Voice) Tool(name string) string { return v.prefix + name }

// Env is the environment variable that turns writes on, or "" when none
// does.
func (v *Voice) Env() string { return v.env }

// Mode is the voice's approval mode.
func (v *Voice) Mode() Mode { return v.mode }

// maxQuoted caps how much of a value a sentence quotes.
const maxQuoted = 200

// Quote writes s as a JSON string for a sentence: quoted, with JSON's
// escapes and every other control, format (bidirectional overrides
// among them) and line-separating character escaped as \uXXXX, and cut to
// a readable length (the cut is marked with …).
func Quote(s string) string {
	if len(s) > maxQuoted {
		cut := maxQuoted
		for cut > 0 && !utf8.RuneStart(s[cut]) {
			cut--
		}
		s = s[:cut] + "…"
	}
	return escapeString(strings.ToValidUTF8(s, "\uFFFD"))
}

// Value writes a JSON value (a diff value, a state found) for a sentence:
// compact, every string inside it escaped as by Quote, and cut to a
// readable length. Invalid JSON is quoted as text.
func Value(raw json.RawMessage) string {
	var v any
	dec := json.NewDecoder(bytes.NewReader(raw))
	dec.UseNumber()
	if len(bytes.TrimSpace(raw)) == 0 || dec.Decode(&v) != nil {
		return Quote(string(raw))
	}
	var b strings.Builder
	writeValue(&b, v)
	out := b.String()
	if len(out) > maxQuoted {
		cut := maxQuoted
		for cut > 0 && !utf8.RuneStart(out[cut]) {
			cut--
		}
		out = out[:cut] + "…"
	}
	return out
}

// Cut shortens s to at most n bytes for a message, marking the cut with
// … and dropping a rune the cut split.
func Cut(s string, n int) string {
	if len(s) <= n {
		return s
	}
	return strings.ToValidUTF8(s[:n], "") + "…"
}

// Time writes t as every text and result gives a time: RFC 3339 in UTC,
// or "" for the zero time.
func Time(t time.Time) string {
	if t.IsZero() {
		return ""
	}
	return t.UTC().Format(time.RFC3339)
}

func writeValue(b *strings.Builder, v any) {
	switch x := v.(type) {
	case string:
		b.WriteString(escapeString(x))
	case map[string]any:
		b.WriteByte('{')
		keys := make([]string, 0, len(x))
		for k := range x {
			keys = append(keys, k)
		}
		slices.Sort(keys)
		for i, k := range keys {
			if i > 0 {
				b.WriteByte(',')
			}
			b.WriteString(escapeString(k))
			b.WriteByte(':')
			writeValue(b, x[k])
		}
		b.WriteByte('}')
	case []any:
		b.WriteByte('[')
		for i, e := range x {
			if i > 0 {
				b.WriteByte(',')
			}
			writeValue(b, e)
		}
		b.WriteByte(']')
	case json.Number:
		b.WriteString(x.String())
	case bool:
		fmt.Fprint(b, x)
	case nil:
		b.WriteString("null")
	}
}

// escapeString is s as a JSON string with every character that could
// change how the text around it reads escaped.
func escapeString(s string) string {
	var b strings.Builder
	b.WriteByte('"')
	for _, r := range s {
		switch {
		case r == '"':
			b.WriteString(`\"`)
		case r == '\\':
			b.WriteString(`\\`)
		case r == '\n':
			b.WriteString(`\n`)
		case r == '\r':
			b.WriteString(`\r`)
		case r == '\t':
			b.WriteString(`\t`)
		case mustEscape(r):
			if r > 0xFFFF {
				hi, lo := utf16Pair(r)
				fmt.Fprintf(&b, `\u%04x\u%04x`, hi, lo)
			} else {
				fmt.Fprintf(&b, `\u%04x`, r)
			}
		default:
			b.WriteRune(r)
		}
	}
	b.WriteByte('"')
	return b.String()
}

// mustEscape reports whether r may change how text reads: a control
// character (C0, DEL, C1), a format character (bidirectional embeddings,
// overrides and isolates, zero-width joiners, the byte-order mark), or a
// line or paragraph separator.
func mustEscape(r rune) bool {
	return unicode.IsControl(r) || unicode.Is(unicode.Cf, r) || r == '\u2028' || r == '\u2029' || r == utf8.RuneError
}

func utf16Pair(r rune) (rune, rune) {
	r -= 0x10000
	return 0xD800 + (r>>10)&0x3FF, 0xDC00 + r&0x3FF
}

// ID writes an identifier for a sentence: as it is when it looks like one
// the library made (a prefix, an underscore and lowercase hex), quoted
// otherwise, since then it came from the caller.
func ID(id string) string {
	if looksLikeID(id) {
		return id
	}
	return Quote(id)
}

func looksLikeID(id string) bool {
	i := strings.IndexByte(id, '_')
	if i < 1 || i > 8 || len(id)-i-1 < 8 || len(id) > 64 {
		return false
	}
	for _, r := range id[:i] {
		if r < 'a' || r > 'z' {
			return false
		}
	}
	for _, r := range id[i+1:] {
		if !(r >= '0' && r <= '9' || r >= 'a' && r <= 'f') {
			return false
		}
	}
	return true
}
