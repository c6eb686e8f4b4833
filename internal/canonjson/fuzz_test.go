package canonjson

import (
	"bytes"
	"encoding/json"
	"errors"
	"reflect"
	"strings"
	"testing"
	"unicode/utf8"
)

// extraRules are the refusals Canonicalize makes for input that
// encoding/json accepts. Any other refusal of json.Valid input is a bug.
var extraRules = []string{
	"invalid UTF-8",
	"surrogate",
	"duplicate member name",
	"out of range",
	"nesting deeper than",
}

// FuzzCanonicalize checks, for arbitrary input, that Canonicalize either
// refuses it with ErrInvalid or returns valid JSON that is a fixed point of
// Canonicalize and denotes the same value as the input. Seeds are in
// testdata/fuzz/FuzzCanonicalize as well as below.
func FuzzCanonicalize(f *testing.F) {
	for _, s := range []string{
		``, `null`, `0`, `-0`, `1e21`, `1E-7`, `123456789012345680000`, `[1.0,4.50,2e-3]`,
		`"\u00e9\u001f\/\u2028"`, `"\ud83d\ude00"`, `"\ud800"`, `"\udc00"`,
		`{"b":1,"a":{"d":[],"c":{}}}`, `{"a":1,"\u0061":2}`, `{"\u20ac":1,"\ufb33":2,"\ud83d\ude00":3}`,
		`[[[[[[[[[[]]]]]]]]]]`, "\"\xff\"", "\xef\xbb\xbf[]", `1e400`, `{} x`, " [ true , false ] ",
		benchPayload,
	} {
		f.Add([]byte(s))
	}
	f.Fuzz(func(t *testing.T, in []byte) {
		out, err := Canonicalize(in)
		valid := json.Valid(in)
		if err != nil {
			if !errors.Is(err, ErrInvalid) {
				t.Fatalf("error %v does not wrap ErrInvalid", err)
			}
			if valid && !matchesAny(err.Error(), extraRules) {
				t.Fatalf("refused JSON that encoding/json accepts: %v", err)
			}
			return
		}
		if !valid {
			t.Fatalf("accepted %q, which encoding/json rejects, as %q", in, out)
		}
		if !json.Valid(out) || !utf8.Valid(out) {
			t.Fatalf("invalid output %q", out)
		}
		again, err := Canonicalize(out)
		if err != nil || !bytes.Equal(again, out) {
			t.Fatalf("not idempotent: %q -> %q, %v", out, again, err)
		}

		// Duplicates and unpaired surrogates are refused, so encoding/json
		// reads input and output as the same value; floats compare with ==.
		var vin, vout any
		if err := json.Unmarshal(in, &vin); err != nil {
			t.Fatalf("unmarshal input: %v", err)
		}
		if err := json.Unmarshal(out, &vout); err != nil {
			t.Fatalf("unmarshal output: %v", err)
		}
		if !reflect.DeepEqual(vin, vout) {
			t.Fatalf("value changed:\n in %#v\nout %#v", vin, vout)
		}

		// Equal values give equal bytes: encoding/json's own rendering of
		// the value (different escaping, number format and key order)
		// canonicalizes to the same output.
		re, err := json.Marshal(vin)
		if err != nil {
			t.Fatalf("marshal: %v", err)
		}
		if c, err := Canonicalize(re); err != nil || !bytes.Equal(c, out) {
			t.Fatalf("re-encoded value canonicalizes differently:\n%q\n%q (%v)", out, c, err)
		}
		if m, err := Marshal(vin); err != nil || !bytes.Equal(m, out) {
			t.Fatalf("Marshal differs:\n%q\n%q (%v)", out, m, err)
		}
	})
}

func matchesAny(s string, subs []string) bool {
	for _, sub := range subs {
		if strings.Contains(s, sub) {
			return true
		}
	}
	return false
}
