package changeset

import (
	"fmt"
	"strconv"
	"strings"
	"unicode"
	"unicode/utf8"
)

// The approval question is read by a person and built from text an agent
// may have chosen: a summary, field names, values, warnings, a run's label.
// Such text must not be able to change how the question reads. Before any
// of it goes into a message, neutralize makes every character that could
// start a new line, reorder the text around it (bidirectional controls) or
// hide itself (zero-width and other format characters, terminal escapes)
// visible, and clip cuts long text from the middle so that both of its ends
// stay in view.
//
// The limits below are in bytes of UTF-8, which is never less than the
// number of characters a client counts, in code points or UTF-16 units.
const (
	// maxMessageBytes bounds a whole approval message. The contract is
	// "under 4,000 characters".
	maxMessageBytes = 3900
	// maxValueBytes bounds one rendered value of a diff.
	maxValueBytes = 240
	// maxNameBytes bounds a field name, an action or an ID.
	maxNameBytes = 80
	// maxTextBytes bounds a summary, a warning, a reason or a label.
	maxTextBytes = 300
)

// neutralize returns s as a person should see it inside one line of a
// message: a line feed becomes "⏎", a tab a space, and every other
// character of the Unicode categories Cc (controls, such as ESC), Cf
// (format: bidirectional controls such as U+202E, zero-width characters,
// the byte order mark), Zl and Zp (line and paragraph separators) becomes
// a placeholder naming it, such as "<U+202E>". Bytes that are not valid
// UTF-8 become "<invalid byte>". Everything else is kept as it is.
func neutralize(s string) string {
	var b strings.Builder
	for _, u := range displayUnits(s) {
		b.WriteString(u)
	}
	return b.String()
}

// clip neutralizes s and, if the result is longer than max bytes, keeps
// its head and its tail and puts "… [N characters omitted] …" between
// them, N counting the characters of s left out. The result is at most
// max bytes long (max must leave room for the marker).
func clip(s string, max int) string {
	units := displayUnits(s)
	total := 0
	for _, u := range units {
		total += len(u)
	}
	if total <= max {
		return strings.Join(units, "")
	}
	// Size the marker for the largest count it could show.
	half := (max - len(omitted(len(units)))) / 2
	head, headLen := 0, 0
	for head < len(units) && headLen+len(units[head]) <= half {
		headLen += len(units[head])
		head++
	}
	tail, tailLen := len(units), 0
	for tail > head && tailLen+len(units[tail-1]) <= half {
		tailLen += len(units[tail-1])
		tail--
	}
	return strings.Join(units[:head], "") + omitted(tail-head) + strings.Join(units[tail:], "")
}

func omitted(n int) string {
	noun := "characters"
	if n == 1 {
		noun = "character"
	}
	return fmt.Sprintf("… [%d %s omitted] …", n, noun)
}

// displayUnits splits s into what a person sees of each of its characters
// (see neutralize): one entry per character, or per invalid byte.
func displayUnits(s string) []string {
	units := make([]string, 0, len(s))
	for i, r := range s {
		if r == utf8.RuneError {
			if _, size := utf8.DecodeRuneInString(s[i:]); size <= 1 {
				units = append(units, "<invalid byte>")
				continue
			}
		}
		units = append(units, displayRune(s, i, r))
	}
	return units
}

// displayRune is the visible form of the character r at s[i:].
func displayRune(s string, i int, r rune) string {
	switch {
	case r == '\n':
		return "⏎"
	case r == '\t':
		return " "
	case unicode.In(r, unicode.Cc, unicode.Cf, unicode.Zl, unicode.Zp):
		return placeholder(r)
	}
	return s[i : i+utf8.RuneLen(r)]
}

// placeholder names a character: "<U+202E>".
func placeholder(r rune) string {
	h := strings.ToUpper(strconv.FormatInt(int64(r), 16))
	for len(h) < 4 {
		h = "0" + h
	}
	return "<U+" + h + ">"
}
