package ledger

import (
	"fmt"
	"log/slog"
)

// Digest is a hash the ledger stores to check something without keeping
// it: a token's digest, the hash of a scope, a payload, an observed state
// or a run's plan, a session's key. None of them is a secret by itself,
// but none belongs in a log, an error, a page or a CLI listing either (a
// scope's hash can be matched against guesses, and a token digest is half
// of a check): a Digest prints as "[digest]" through fmt, encoding/json
// and log/slog. Code that must store or compare the value itself converts
// it with string(d) or compares Digests with ==.
type Digest string

// redacted is how a Digest prints.
const redacted = "[digest]"

// String returns "[digest]", or "" for an empty Digest.
func (d Digest) String() string {
	if d == "" {
		return ""
	}
	return redacted
}

// Format prints the redacted form for every verb, so that %x, %q and %#v
// cannot reveal the value either.
func (d Digest) Format(f fmt.State, verb rune) {
	s := d.String()
	if verb == 'q' {
		s = fmt.Sprintf("%q", s)
	}
	_, _ = f.Write([]byte(s))
}

// MarshalJSON encodes the redacted form.
func (d Digest) MarshalJSON() ([]byte, error) {
	return []byte(`"` + d.String() + `"`), nil
}

// LogValue logs the redacted form.
func (d Digest) LogValue() slog.Value { return slog.StringValue(d.String()) }

// IsZero reports whether no digest is stored.
func (d Digest) IsZero() bool { return d == "" }
