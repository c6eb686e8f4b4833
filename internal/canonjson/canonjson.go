// Package canonjson produces the one canonical JSON form used for every
// stored payload, snapshot and hash in the changeset ledger.
//
// The form follows RFC 8785, the JSON Canonicalization Scheme (JCS): object
// members are sorted by the UTF-16 code units of their names, there is no
// insignificant whitespace, strings use the shortest escaping ('<', '>' and
// '&' are not escaped), and numbers other than plain integers are written
// the way ECMAScript writes an IEEE 754 double. Two JSON texts that denote
// the same value therefore canonicalize to the same bytes, which is what
// makes a hash of the canonical bytes a stable identity for a value.
//
// Canonicalization is strict. Input that could be read in more than one way
// is refused rather than repaired: invalid UTF-8, unpaired surrogate escapes,
// duplicate member names, numbers that cannot be kept without rounding an
// integer, and text after the value all cause an error that wraps
// [ErrInvalid]. Silently repairing such input would let two different
// documents share a hash.
//
// # Numbers
//
// RFC 8785 reads every number as a double, which rounds integers beyond
// 2^53: it would store the int64 1152921504606846977 as
// 1152921504606847000, and an Apply decoding the stored payload would get a
// different integer than its Preview put in. A payload must reach Apply
// exactly, so this package departs from RFC 8785 for integers:
//
//   - A number written as plain digits, with no fraction and no exponent,
//     is an integer and is kept exactly, at any size:
//     1152921504606846977, 18446744073709551615 and a 30-digit integer stay
//     as they are. -0 becomes 0. JSON allows no leading zeros and no '+',
//     so an integer has no other plain spelling.
//   - Any other number is read as the nearest double and written as
//     ECMAScript writes it (RFC 8785 section 3.2.2.3): 1.0 becomes 1, 1E+2
//     and 100.0 become 100, 4.50 becomes 4.5, 1e21 becomes 1e+21, and
//     333333333.33333329 becomes 333333333.3333333. Fractions are doubles;
//     a value that needs more precision must be carried as a string.
//   - Such a number whose value is an integer that the double does not
//     hold, such as 9007199254740993.0 or 1.152921504606846977e18, is
//     refused instead of rounded. Written as plain digits it is kept.
//
// No integer is ever rounded, and equal values still have equal bytes: 100,
// 1e2, 100.0 and 1.00E+2 all become 100. Decoding the canonical form with
// encoding/json into an int64, uint64, float64 or *big.Int gives the value
// that decoding the input gives, whenever the input decodes, so a Go value
// that encoding/json encodes (integers of any width, big.Int, float64)
// survives [Marshal] unchanged.
//
// The output differs from RFC 8785 only for integers written as plain
// digits that RFC 8785 would rewrite: those whose double has other shortest
// digits (9007199254740993, 18446744073709551616) and those of 10^21 and
// more (RFC 8785 writes 1000000000000000000000 as 1e+21). An integer of
// 10^21 or more therefore has two canonical forms, its digits and, when a
// double holds it, the exponent form of that double: 1000000000000000000000
// stays, so that decoders of big integers such as math/big can read it,
// while 1e21, as encoding/json writes the float64, becomes 1e+21. Go's and
// Python's decoders read the two differently too (an integer, a float).
package canonjson

import (
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"strconv"
)

// MaxDepth is the deepest nesting of arrays and objects that [Canonicalize]
// and [Marshal] accept. The parser is recursive, so the limit bounds its
// stack use on hostile input; real payloads are nowhere near this deep.
const MaxDepth = 1000

// ErrInvalid is the error that every refusal wraps, so callers can tell
// input that can never be canonicalized (test with errors.Is) from other
// failures. The wrapping error says what is wrong and where: a byte offset
// for [Canonicalize], a path such as .payload.name for [Marshal].
var ErrInvalid = errors.New("canonjson: invalid input")

// syntaxError reports why input was refused. A negative off means the
// location is given in msg instead (Marshal reports value paths).
type syntaxError struct {
	msg string
	off int
}

func (e *syntaxError) Error() string {
	if e.off < 0 {
		return "canonjson: " + e.msg
	}
	return "canonjson: " + e.msg + " at offset " + strconv.Itoa(e.off)
}

func (e *syntaxError) Unwrap() error { return ErrInvalid }

// Canonicalize parses the JSON text in data and returns its canonical form.
//
// Member names are sorted by UTF-16 code units, as RFC 8785 specifies, so the
// order agrees with other JCS implementations even for names that mix
// characters above U+FFFF with characters in U+E000..U+FFFF. Strings are
// emitted as raw UTF-8 except for '"', '\\' and control characters below
// U+0020, which use the short escapes \b \f \n \r \t where they exist and
// \u00xx otherwise; '/', '<', '>', '&' and U+2028 are not escaped. Integers
// written as plain digits are kept exactly, -0 becoming 0; other numbers are
// rewritten in ECMAScript's Number-to-String form of the nearest double: 1.0
// becomes 1, 1E+2 becomes 100, 1e21 becomes 1e+21 (see "Numbers" above).
//
// Canonicalize refuses, with an error wrapping [ErrInvalid] that gives the
// byte offset of the problem: malformed JSON, invalid UTF-8 anywhere, escapes
// of unpaired surrogates, duplicate member names (also when they differ only
// in escaping, like "a" and "\u0061"), a byte order mark, anything but
// whitespace after the value, numbers with a fraction or exponent too large
// for a double such as 1e400, such numbers whose value is an integer that
// the double would round such as 9007199254740993.0, and nesting deeper than
// [MaxDepth]. Numbers too small for a double underflow to 0, as they do in
// ECMAScript.
//
// Canonicalize is idempotent: applied to its own output it returns the same
// bytes. The returned slice is newly allocated and owned by the caller.
func Canonicalize(data []byte) ([]byte, error) {
	p := getParser(data)
	defer putParser(p)
	if err := p.document(); err != nil {
		return nil, err
	}
	out := make([]byte, len(p.out))
	copy(out, p.out)
	return out, nil
}

// Hash returns the SHA-256 digest of canonical as lowercase hexadecimal.
//
// Hash does not canonicalize; it trusts that canonical came from
// [Canonicalize] or [Marshal]. Hashing non-canonical bytes gives a digest that
// other encodings of the same value will not reproduce.
func Hash(canonical []byte) string {
	sum := sha256.Sum256(canonical)
	return hex.EncodeToString(sum[:])
}
