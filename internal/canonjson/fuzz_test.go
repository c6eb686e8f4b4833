package canonjson

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"math/big"
	"reflect"
	"strconv"
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
	"has no exact double",
	"nesting deeper than",
}

// FuzzCanonicalize checks, for arbitrary input, that Canonicalize either
// refuses it with ErrInvalid or returns valid JSON that is a fixed point of
// Canonicalize and denotes the same value as the input: the same structure
// and strings, integers written as plain digits unchanged, no integer
// rounded, and every number decoding into int64, uint64, float64 and
// *big.Int as the input's does. Equal values give equal bytes. Seeds are in
// testdata/fuzz/FuzzCanonicalize as well as below.
func FuzzCanonicalize(f *testing.F) {
	for _, s := range []string{
		``, `null`, `0`, `-0`, `1e21`, `1E-7`, `123456789012345680000`, `[1.0,4.50,2e-3]`,
		`"\u00e9\u001f\/\u2028"`, `"\ud83d\ude00"`, `"\ud800"`, `"\udc00"`,
		`{"b":1,"a":{"d":[],"c":{}}}`, `{"a":1,"\u0061":2}`, `{"\u20ac":1,"\ufb33":2,"\ud83d\ude00":3}`,
		`[[[[[[[[[[]]]]]]]]]]`, "\"\xff\"", "\xef\xbb\xbf[]", `1e400`, `{} x`, " [ true , false ] ",
		`[9007199254740993,1152921504606846977,9223372036854775807,-9223372036854775808,18446744073709551615]`,
		`[123456789012345678901234567890,-0.0,1e2,100.0,1.00E+2,1000e-1,1.5e1]`,
		`[9007199254740993.0,1.152921504606846977e18]`, `[1e-400,0e999999999999999999999,1e-999999999999999999]`,
		`{"lt":"<","gt":"\u003e","amp":"\u0026"}`,
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
		// reads input and output as the same tree. Numbers are compared
		// as the literals json.Number keeps.
		vin, vout := decodeNumbers(t, in), decodeNumbers(t, out)
		var nums [][2]string
		if msg := sameTree(vin, vout, &nums); msg != "" {
			t.Fatalf("value changed: %s\n in %q\nout %q", msg, in, out)
		}
		for _, n := range nums {
			checkNumber(t, n[0], n[1])
		}

		// Equal values give equal bytes: encoding/json's own rendering of
		// the value (HTML escapes, other key order, whitespace) and Marshal
		// of the decoded value canonicalize to the same output.
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

// decodeNumbers decodes data keeping numbers as json.Number literals.
func decodeNumbers(t *testing.T, data []byte) any {
	t.Helper()
	dec := json.NewDecoder(bytes.NewReader(data))
	dec.UseNumber()
	var v any
	if err := dec.Decode(&v); err != nil {
		t.Fatalf("decode %q: %v", data, err)
	}
	return v
}

// sameTree compares two decoded values, collecting the pairs of number
// literals at the same place for checkNumber. It returns what differs.
func sameTree(a, b any, nums *[][2]string) string {
	switch a := a.(type) {
	case map[string]any:
		bm, ok := b.(map[string]any)
		if !ok || len(a) != len(bm) {
			return fmt.Sprintf("object %v became %v", a, b)
		}
		for k, av := range a {
			bv, ok := bm[k]
			if !ok {
				return fmt.Sprintf("member %q lost", k)
			}
			if msg := sameTree(av, bv, nums); msg != "" {
				return msg
			}
		}
	case []any:
		bs, ok := b.([]any)
		if !ok || len(a) != len(bs) {
			return fmt.Sprintf("array %v became %v", a, b)
		}
		for i := range a {
			if msg := sameTree(a[i], bs[i], nums); msg != "" {
				return msg
			}
		}
	case json.Number:
		bn, ok := b.(json.Number)
		if !ok {
			return fmt.Sprintf("number %s became %v", a, b)
		}
		*nums = append(*nums, [2]string{string(a), string(bn)})
	default: // string, bool, nil
		if a != b {
			return fmt.Sprintf("%#v became %#v", a, b)
		}
	}
	return ""
}

// checkNumber checks the canonical form out of the number literal in.
func checkNumber(t *testing.T, in, out string) {
	t.Helper()
	if isPlainInteger(in) && out != in && !(in == "-0" && out == "0") {
		t.Fatalf("integer %s became %s", in, out)
	}
	// Every decoder that reads the input reads the output the same.
	for _, target := range []func() any{
		func() any { return new(int64) },
		func() any { return new(uint64) },
		func() any { return new(float64) },
		func() any { return new(*big.Int) },
	} {
		vi, vo := target(), target()
		if json.Unmarshal([]byte(in), vi) != nil {
			continue
		}
		if err := json.Unmarshal([]byte(out), vo); err != nil {
			t.Fatalf("%s decodes into %T but its canonical %s does not: %v", in, vi, out, err)
		}
		if !sameDecoded(vi, vo) {
			t.Fatalf("%s decodes into %T as %v, its canonical %s as %v", in, vi, deref(vi), out, deref(vo))
		}
	}
	// No integer is rounded, however it is written. big.Rat is the
	// oracle; exponents are bounded so that it stays fast.
	if r, ok := exactValue(in); ok && r.IsInt() {
		ro, ok := exactValue(out)
		if !ok || ro.Cmp(r) != 0 {
			t.Fatalf("integer %s became %s, another value", in, out)
		}
	}
	// One form per value: an integer below 10^21 written with a fraction
	// or an exponent is either the same bytes or refused, never another
	// text.
	if isPlainInteger(out) && len(strings.TrimPrefix(out, "-")) <= 21 {
		alts := []string{out + ".0", out + "e0", out + "0e-1"}
		if out == "0" {
			alts = alts[:2] // 00e-1 is not JSON
		}
		for _, alt := range alts {
			c, err := Canonicalize([]byte(alt))
			if err != nil && !strings.Contains(err.Error(), "has no exact double") {
				t.Fatalf("%s: unexpected refusal %v", alt, err)
			}
			if err == nil && string(c) != out {
				t.Fatalf("%s canonicalizes to %s, %s to %s", out, out, alt, c)
			}
		}
	}
}

func isPlainInteger(s string) bool {
	s = strings.TrimPrefix(s, "-")
	return s != "" && strings.Trim(s, "0123456789") == ""
}

// exactValue is the exact value of a number literal, when its exponent is
// small enough to compute it quickly.
func exactValue(s string) (*big.Rat, bool) {
	if i := strings.IndexAny(s, "eE"); i >= 0 {
		e, err := strconv.Atoi(s[i+1:])
		if err != nil || e > 1000 || e < -1000 {
			return nil, false
		}
	}
	return new(big.Rat).SetString(s)
}

func sameDecoded(a, b any) bool {
	if x, ok := a.(**big.Int); ok {
		return (*x).Cmp(*b.(**big.Int)) == 0
	}
	return reflect.DeepEqual(a, b)
}

func deref(v any) any { return reflect.ValueOf(v).Elem().Interface() }

func matchesAny(s string, subs []string) bool {
	for _, sub := range subs {
		if strings.Contains(s, sub) {
			return true
		}
	}
	return false
}
