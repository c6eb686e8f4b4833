// Package canonjson produces the one canonical JSON form used for every
// stored payload, snapshot and hash in the changeset ledger.
//
// The form follows RFC 8785, the JSON Canonicalization Scheme (JCS): object
// members are sorted by the UTF-16 code units of their names, there is no
// insignificant whitespace, strings use the shortest escaping, and numbers
// are written the way ECMAScript writes an IEEE 754 double. Two JSON texts
// that denote the same value therefore canonicalize to the same bytes, which
// is what makes a hash of the canonical bytes a stable identity for a value.
//
// Canonicalization is strict. Input that could be read in more than one way
// is refused rather than repaired: invalid UTF-8, unpaired surrogate escapes,
// duplicate member names, numbers outside the range of a double, and text
// after the value all cause an error that wraps [ErrInvalid]. Silently
// repairing such input would let two different documents share a hash.
//
// Numbers are IEEE 754 doubles, as RFC 8785 requires. Integers of magnitude
// above 2^53 cannot all be represented and are rounded to the nearest double,
// so 9007199254740993 canonicalizes to 9007199254740992. Values that need
// exact large integers must carry them as strings.
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
// \u00xx otherwise; '/' and U+2028 are not escaped. Numbers are rewritten
// in ECMAScript's Number-to-String form: 1.0 becomes 1, 1E+2 becomes 100,
// 1e21 becomes 1e+21, and -0 becomes 0.
//
// Canonicalize refuses, with an error wrapping [ErrInvalid] that gives the
// byte offset of the problem: malformed JSON, invalid UTF-8 anywhere, escapes
// of unpaired surrogates, duplicate member names (also when they differ only
// in escaping, like "a" and "\u0061"), a byte order mark, anything but
// whitespace after the value, numbers too large for a double such as 1e400,
// and nesting deeper than [MaxDepth]. Numbers too small for a double
// underflow to 0, as they do in ECMAScript.
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
