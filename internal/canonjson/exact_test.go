package canonjson

import (
	"encoding/json"
	"errors"
	"math"
	"math/big"
	"strconv"
	"strings"
	"testing"
)

// TestExactIntegers checks that an integer written as plain digits is kept
// exactly, whatever its size: a double would round all of these but the
// zeros.
func TestExactIntegers(t *testing.T) {
	tests := []struct{ name, in, want string }{
		{"2^53+1", "9007199254740993", "9007199254740993"},
		{"2^60+1", "1152921504606846977", "1152921504606846977"},
		{"max int64", strconv.FormatInt(math.MaxInt64, 10), "9223372036854775807"},
		{"min int64", strconv.FormatInt(math.MinInt64, 10), "-9223372036854775808"},
		{"max uint64", strconv.FormatUint(math.MaxUint64, 10), "18446744073709551615"},
		{"2^64, a double with other shortest digits", "18446744073709551616", "18446744073709551616"},
		{"30 digits", "123456789012345678901234567891", "123456789012345678901234567891"},
		{"30 digits negative", "-999999999999999999999999999999", "-999999999999999999999999999999"},
		{"10^21 as digits", "1000000000000000000000", "1000000000000000000000"},
		{"beyond double range", "1" + strings.Repeat("0", 400), "1" + strings.Repeat("0", 400)},
		{"minus zero", "-0", "0"},
		{"zero", "0", "0"},
		{"in an object", `{"u":18446744073709551615,"i":-9223372036854775808}`, `{"i":-9223372036854775808,"u":18446744073709551615}`},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got, err := Canonicalize([]byte(tt.in))
			if err != nil {
				t.Fatalf("Canonicalize(%s): %v", tt.in, err)
			}
			if string(got) != tt.want {
				t.Fatalf("Canonicalize(%s)\n got %s\nwant %s", tt.in, got, tt.want)
			}
			if again, err := Canonicalize(got); err != nil || string(again) != string(got) {
				t.Fatalf("not idempotent: %s -> %s, %v", got, again, err)
			}
		})
	}
}

// TestNumberSpellings checks that the spellings of one value give the same
// bytes: a number with a fraction or an exponent is the double it denotes,
// written as ECMAScript writes it.
func TestNumberSpellings(t *testing.T) {
	groups := []struct {
		want  string
		using []string
	}{
		{"100", []string{"100", "1e2", "1E2", "1e+2", "1E+02", "100.0", "1.00E+2", "10e1", "1000e-1", "0.1e3", "100.000e0"}},
		{"15", []string{"15", "1.5e1", "150e-1", "15.0", "0.015e3", "0.0015e+4"}},
		{"0", []string{"0", "-0", "0.0", "-0.0", "0e5", "-0e-5", "0.000e+999999999999999999999", "1e-400", "-1e-400"}},
		{"-7", []string{"-7", "-7.0", "-0.7e1", "-700e-2"}},
		{"9007199254740992", []string{"9007199254740992", "9.007199254740992e15", "9007199254740992.0"}},
		{"100000000000000000000", []string{"100000000000000000000", "1e20", "1.0e20"}},
		{"1e+21", []string{"1e21", "1E+21", "10e20", "1000000000000000000000.0", "1e+21"}},
		{"1e+30", []string{"1E30", "1e+30"}},
		{"4.5", []string{"4.50", "45e-1", "0.45e1"}},
		{"0.002", []string{"2e-3", "0.0020"}},
		{"1e-7", []string{"1e-7", "0.0000001", "1E-07"}},
		{"333333333.3333333", []string{"333333333.33333329", "333333333.3333333"}},
		// Fractions are doubles: these round to one, as RFC 8785 has it.
		{"1", []string{"1", "1.0", "0.99999999999999999999", "1.00000000000000000001"}},
	}
	for _, g := range groups {
		for _, in := range g.using {
			got, err := Canonicalize([]byte(in))
			if err != nil || string(got) != g.want {
				t.Errorf("Canonicalize(%s) = %s, %v; want %s", in, got, err, g.want)
			}
		}
	}
}

// TestDistinctIntegersDistinctBytes checks the property a hash relies on:
// neighbouring integers, which one double would hold, never share bytes.
func TestDistinctIntegersDistinctBytes(t *testing.T) {
	seen := map[string]string{}
	for _, base := range []string{"9007199254740992", "1152921504606846976", "18446744073709551614", "123456789012345678901234567890"} {
		b, _ := new(big.Int).SetString(base, 10)
		for i := 0; i < 4; i++ {
			n := new(big.Int).Add(b, big.NewInt(int64(i))).String()
			for _, s := range []string{n, "-" + n} {
				got, err := Canonicalize([]byte(s))
				if err != nil {
					t.Fatalf("Canonicalize(%s): %v", s, err)
				}
				if prev, ok := seen[string(got)]; ok {
					t.Fatalf("%s and %s both canonicalize to %s", prev, s, got)
				}
				seen[string(got)] = s
			}
		}
	}
}

// TestInexactIntegerRefused checks that an integer written with a fraction
// or an exponent is refused when the double would round it, rather than
// stored as another integer, and that its plain digits are accepted.
func TestInexactIntegerRefused(t *testing.T) {
	tests := []struct{ in, digits string }{
		{"9007199254740993.0", "9007199254740993"},
		{"9.007199254740993e15", "9007199254740993"},
		{"1.152921504606846977e18", "1152921504606846977"},
		{"1152921504606846977e0", "1152921504606846977"},
		{"11529215046068469770e-1", "1152921504606846977"},
		{"18446744073709551615.000", "18446744073709551615"},
		{"-9223372036854775807.0", "-9223372036854775807"},
		{"1.23456789012345678901234567891e29", "123456789012345678901234567891"},
		{"1000000000000000000001.0", "1000000000000000000001"},
	}
	for _, tt := range tests {
		got, err := Canonicalize([]byte("[" + tt.in + "]"))
		if err == nil {
			t.Errorf("Canonicalize(%s) = %s, want a refusal", tt.in, got)
			continue
		}
		want := "canonjson: integer " + tt.in + " has no exact double; write it as plain digits, without fraction or exponent, to keep it exact at offset 1"
		if !errors.Is(err, ErrInvalid) || err.Error() != want {
			t.Errorf("Canonicalize(%s): %v\nwant %s", tt.in, err, want)
		}
		if got, err := Canonicalize([]byte(tt.digits)); err != nil || string(got) != tt.digits {
			t.Errorf("Canonicalize(%s) = %s, %v; want it kept", tt.digits, got, err)
		}
	}

	long := "1" + strings.Repeat("1", 60) + ".0"
	_, err := Canonicalize([]byte(long))
	if err == nil || !strings.Contains(err.Error(), "integer "+long[:37]+"... has no exact double") {
		t.Errorf("long literal: %v, want it shortened in the message", err)
	}
}

// TestDecodersAgree checks that encoding/json decodes the canonical form
// into each numeric type as it decodes the input, whenever the input
// decodes at all.
func TestDecodersAgree(t *testing.T) {
	inputs := []string{
		"9007199254740993", "1152921504606846977", "9223372036854775807", "-9223372036854775808",
		"18446744073709551615", "123456789012345678901234567891", "-0", "1e2", "100.0", "1.5",
		"-12.5e0", "1e21", "1e20", "123456789012345680000", "5e-324", "0.1",
	}
	for _, in := range inputs {
		out, err := Canonicalize([]byte(in))
		if err != nil {
			t.Fatalf("Canonicalize(%s): %v", in, err)
		}
		var i1, i2 int64
		if json.Unmarshal([]byte(in), &i1) == nil && (json.Unmarshal(out, &i2) != nil || i1 != i2) {
			t.Errorf("int64: %s is %d, canonical %s is %d", in, i1, out, i2)
		}
		var u1, u2 uint64
		if json.Unmarshal([]byte(in), &u1) == nil && (json.Unmarshal(out, &u2) != nil || u1 != u2) {
			t.Errorf("uint64: %s is %d, canonical %s is %d", in, u1, out, u2)
		}
		var f1, f2 float64
		if json.Unmarshal([]byte(in), &f1) == nil && (json.Unmarshal(out, &f2) != nil || f1 != f2) {
			t.Errorf("float64: %s is %g, canonical %s is %g", in, f1, out, f2)
		}
		var b1, b2 *big.Int
		if json.Unmarshal([]byte(in), &b1) == nil && (json.Unmarshal(out, &b2) != nil || b1.Cmp(b2) != 0) {
			t.Errorf("big.Int: %s is %v, canonical %s is %v", in, b1, out, b2)
		}
	}
}

// TestMarshalExact checks that the Go values that encoding/json writes as
// integers come out of Marshal with every digit, and that float64 values
// keep their RFC 8785 form.
func TestMarshalExact(t *testing.T) {
	big30, _ := new(big.Int).SetString("-123456789012345678901234567891", 10)
	v := struct {
		MaxInt  int64            `json:"max_int"`
		MinInt  int64            `json:"min_int"`
		MaxUint uint64           `json:"max_uint"`
		Big     *big.Int         `json:"big"`
		Number  json.Number      `json:"number"`
		Float   float64          `json:"float"`
		Huge    float64          `json:"huge"`
		Map     map[string]int64 `json:"map"`
	}{math.MaxInt64, math.MinInt64, math.MaxUint64, big30, "1152921504606846977", 0.1, 1e21,
		map[string]int64{"b": 1<<53 + 1, "a": -(1<<53 + 1)}}
	got, err := Marshal(v)
	if err != nil {
		t.Fatal(err)
	}
	want := `{"big":-123456789012345678901234567891,"float":0.1,"huge":1e+21,"map":{"a":-9007199254740993,"b":9007199254740993},` +
		`"max_int":9223372036854775807,"max_uint":18446744073709551615,"min_int":-9223372036854775808,"number":1152921504606846977}`
	if string(got) != want {
		t.Fatalf("Marshal\n got %s\nwant %s", got, want)
	}

	_, err = Marshal(map[string]json.Number{"n": "1.152921504606846977e18"})
	if !errors.Is(err, ErrInvalid) || !strings.Contains(err.Error(), "has no exact double") {
		t.Fatalf("Marshal of an inexact json.Number: %v, want a refusal", err)
	}
}
