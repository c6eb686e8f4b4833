package canonjson

import (
	"encoding/json"
	"errors"
	"math"
	"strconv"
	"strings"
	"testing"
)

func TestCanonicalize(t *testing.T) {
	tests := []struct {
		name, in, want string
	}{
		// RFC 8785 section 3.2.2.
		{"rfc8785 example", `{
			"numbers": [333333333.33333329, 1E30, 4.50, 2e-3, 0.000000000000000000000000001],
			"string": "\u20ac$\u000F\u000aA'\u0042\u0022\u005c\\\"\/",
			"literals": [null, true, false]
		}`, `{"literals":[null,true,false],"numbers":[333333333.3333333,1e+30,4.5,0.002,1e-27],"string":"€$\u000f\nA'B\"\\\\\"/"}`},
		// RFC 8785 section 3.2.3: sorting by UTF-16 code units puts the
		// emoji (surrogates D83D DE00) before U+FB33.
		{"rfc8785 sorting", `{
			"\u20ac": "Euro Sign",
			"\r": "Carriage Return",
			"\ufb33": "Hebrew Letter Dalet With Dagesh",
			"1": "One",
			"\ud83d\ude00": "Emoji: Grinning Face",
			"\u0080": "Control",
			"\u00f6": "Latin Small Letter O With Diaeresis"
		}`, "{\"\\r\":\"Carriage Return\",\"1\":\"One\",\"\u0080\":\"Control\"," +
			"\"ö\":\"Latin Small Letter O With Diaeresis\",\"€\":\"Euro Sign\"," +
			"\"\U0001f600\":\"Emoji: Grinning Face\",\"\ufb33\":\"Hebrew Letter Dalet With Dagesh\"}"},
		{"sort ascii", `{"b":1,"a":2,"c":{"z":1,"y":[{"k":1,"j":2}]}}`, `{"a":2,"b":1,"c":{"y":[{"j":2,"k":1}],"z":1}}`},
		{"sort prefix", `{"ab":1,"a":2,"":3}`, `{"":3,"a":2,"ab":1}`},
		{"sort U+E000 after supplementary", `{"\ue000":1,"\ud800\udc00":2,"\u00e9":3}`, "{\"é\":3,\"\U00010000\":2,\"\ue000\":1}"},
		{"sort escaped key", `{"b":1,"\"":2,"\\":3,"\u0001":4}`, `{"\u0001":4,"\"":2,"\\":3,"b":1}`},

		{"whitespace", " \t\r\n[ 1 , { \"a\" : [ ] } , { } ] \n", `[1,{"a":[]},{}]`},
		{"scalar", `"x"`, `"x"`},
		{"literals", `[true,false,null]`, `[true,false,null]`},

		{"escape e acute", `"\u00e9"`, `"é"`},
		{"escape unit separator", `"\u001f"`, `"\u001f"`},
		{"escape nul", `"\u0000"`, `"\u0000"`},
		{"escape short forms", `"\b\f\n\r\t\u0008\u000C"`, `"\b\f\n\r\t\b\f"`},
		{"solidus not escaped", `"\/a/b"`, `"/a/b"`},
		{"U+2028 raw", `"\u2028\u2029"`, "\"\u2028\u2029\""},
		{"html raw", `"\u003c\u003e\u0026"`, `"<>&"`},
		{"DEL raw", `"\u007f"`, "\"\x7f\""},
		{"surrogate pair", `"\uD83D\uDE00"`, `"😀"`},
		{"raw utf8 kept", `"ö€😀"`, `"ö€😀"`},

		{"1e21", `1e21`, `1e+21`},
		{"1e-7", `1e-7`, `1e-7`},
		{"0.000001", `0.000001`, `0.000001`},
		{"big integer", `123456789012345680000`, `123456789012345680000`},
		{"minus zero", `-0`, `0`},
		{"minus zero float", `-0.0e10`, `0`},
		{"1.0", `1.0`, `1`},
		{"4.50", `4.50`, `4.5`},
		{"2e-3", `2e-3`, `0.002`},
		{"1E+2", `1E+2`, `100`},
		{"negative", `-12.5e0`, `-12.5`},
		{"15 digits", `-999999999999999`, `-999999999999999`},
		{"2^53+1 kept", `9007199254740993`, `9007199254740993`},
		{"2^53 as double", `9.007199254740992e15`, `9007199254740992`},
		{"1e20", `1e20`, `100000000000000000000`},
		{"underflow", `1e-400`, `0`},
		{"max double", `1.7976931348623157e308`, `1.7976931348623157e+308`},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got, err := Canonicalize([]byte(tt.in))
			if err != nil {
				t.Fatalf("Canonicalize(%q): %v", tt.in, err)
			}
			if string(got) != tt.want {
				t.Fatalf("Canonicalize(%q)\n got %s\nwant %s", tt.in, got, tt.want)
			}
			again, err := Canonicalize(got)
			if err != nil || string(again) != string(got) {
				t.Fatalf("not idempotent: %q -> %q, %v", got, again, err)
			}
		})
	}
}

// TestNumbers checks the IEEE 754 test values of RFC 8785 appendix B.
func TestNumbers(t *testing.T) {
	tests := []struct {
		bits uint64
		want string
	}{
		{0x0000000000000000, "0"},
		{0x8000000000000000, "0"},
		{0x0000000000000001, "5e-324"},
		{0x8000000000000001, "-5e-324"},
		{0x7fefffffffffffff, "1.7976931348623157e+308"},
		{0xffefffffffffffff, "-1.7976931348623157e+308"},
		{0x4340000000000000, "9007199254740992"},
		{0xc340000000000000, "-9007199254740992"},
		{0x4430000000000000, "295147905179352830000"},
		{0x44b52d02c7e14af5, "9.999999999999997e+22"},
		{0x44b52d02c7e14af6, "1e+23"},
		{0x44b52d02c7e14af7, "1.0000000000000001e+23"},
		{0x444b1ae4d6e2ef4e, "999999999999999700000"},
		{0x444b1ae4d6e2ef4f, "999999999999999900000"},
		{0x444b1ae4d6e2ef50, "1e+21"},
		{0x3eb0c6f7a0b5ed8c, "9.999999999999997e-7"},
		{0x3eb0c6f7a0b5ed8d, "0.000001"},
		{0x41b3de4355555553, "333333333.3333332"},
		{0x41b3de4355555554, "333333333.33333325"},
		{0x41b3de4355555555, "333333333.3333333"},
		{0x41b3de4355555556, "333333333.3333334"},
		{0x41b3de4355555557, "333333333.33333343"},
		{0xbecbf647612f3696, "-0.0000033333333333333333"},
		{0x43143ff3c1cb0959, "1424953923781206.2"},
	}
	for _, tt := range tests {
		in := strconv.FormatFloat(math.Float64frombits(tt.bits), 'g', -1, 64)
		got, err := Canonicalize([]byte(in))
		if err != nil || string(got) != tt.want {
			t.Errorf("%016x: Canonicalize(%s) = %s, %v; want %s", tt.bits, in, got, err, tt.want)
		}
	}
}

func TestRefusals(t *testing.T) {
	deep := func(n int, open, close string) string {
		return strings.Repeat(open, n) + strings.Repeat(close, n)
	}
	tests := []struct {
		name, in, msg string
		off           int
	}{
		{"empty", "", "end of input", 0},
		{"only space", "  \n", "end of input", 3},
		{"BOM", "\xef\xbb\xbf{}", "byte order mark", 0},
		{"invalid UTF-8 in string", "[\"ab\xffc\"]", "invalid UTF-8", 4},
		{"invalid UTF-8 in key", "{\"k\xc3\":1}", "invalid UTF-8", 3},
		{"invalid UTF-8 after escape", "\"\\n\xff\"", "invalid UTF-8", 3},
		{"overlong UTF-8", "\"\xc0\xaf\"", "invalid UTF-8", 1},
		{"UTF-8 encoded surrogate", "\"\xed\xa0\x80\"", "invalid UTF-8", 1},
		{"invalid UTF-8 outside string", "[\xff]", "unexpected byte", 1},
		{"lone high surrogate", `"\ud800"`, "unpaired high surrogate", 1},
		{"high surrogate then text", `"\ud800x"`, "unpaired high surrogate", 1},
		{"high surrogate then BMP", `"\ud800\u0041"`, "unpaired high surrogate", 1},
		{"two high surrogates", `"\ud800\ud800"`, "unpaired high surrogate", 1},
		{"lone low surrogate", `"a\udc00"`, "unpaired low surrogate", 2},
		{"reversed pair", `"\udc00\ud800"`, "unpaired low surrogate", 1},
		{"surrogate in key", `{"\ud83d":1}`, "unpaired high surrogate", 2},
		{"duplicate key", `{"a":1,"a":2}`, `duplicate member name "a"`, 7},
		{"duplicate by escape", `{"a":1,"\u0061":2}`, `duplicate member name "a"`, 7},
		{"duplicate unsorted", `{"b":1,"a":2,"b":3}`, `duplicate member name "b"`, 13},
		{"duplicate nested", `[{"x":{"c":1,"c":1}}]`, `duplicate member name "c"`, 13},
		{"trailing garbage", `{} x`, "data after JSON value", 3},
		{"two values", `1 2`, "data after JSON value", 2},
		{"extra bracket", `[1]]`, "data after JSON value", 3},
		{"1e400", `[1e400]`, "out of range", 1},
		{"-1e400", `-1e400`, "out of range", 0},
		{"long overflow", "1" + strings.Repeat("0", 400) + ".0", "out of range", 0},
		{"depth 1001 arrays", deep(MaxDepth+1, "[", "]"), "nesting deeper than 1000", MaxDepth},
		{"depth 1001 objects", strings.Repeat(`{"a":`, MaxDepth+1) + "1" + strings.Repeat("}", MaxDepth+1), "nesting deeper than 1000", 5 * MaxDepth},
		{"NaN", `NaN`, "unexpected byte", 0},
		{"Infinity", `[-Infinity]`, "invalid number", 1},
		{"leading zero", `01`, "data after JSON value", 1},
		{"leading plus", `+1`, "unexpected byte", 0},
		{"bare minus", `-`, "invalid number", 0},
		{"trailing dot", `1.`, "invalid number", 0},
		{"leading dot", `.5`, "unexpected byte", 0},
		{"empty exponent", `1e+`, "invalid number", 0},
		{"hex", `0x10`, "data after JSON value", 1},
		{"control char", "\"a\tb\"", "control character", 2},
		{"bad escape", `"\x"`, "invalid escape", 1},
		{"short unicode escape", `"\u12"`, "invalid \\u escape", 1},
		{"unterminated string", `"abc`, "unterminated string", 0},
		{"unterminated escape", `"abc\`, "unterminated string", 0},
		{"bad literal", `tru`, "invalid literal", 0},
		{"trailing comma array", `[1,]`, "unexpected byte", 3},
		{"trailing comma object", `{"a":1,}`, "member name", 7},
		{"missing colon", `{"a" 1}`, "':'", 5},
		{"missing value", `{"a":}`, "unexpected byte", 5},
		{"unclosed array", `[1`, "end of input", 2},
		{"unclosed object", `{"a":1`, "end of input", 6},
		{"single quotes", `'a'`, "unexpected byte", 0},
		{"unquoted key", `{a:1}`, "member name", 1},
		{"comment", `[1 /* x */]`, "unexpected byte", 3},
		{"vertical tab", "\v1", "unexpected byte", 0},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got, err := Canonicalize([]byte(tt.in))
			if err == nil {
				t.Fatalf("Canonicalize(%q) = %s, want error", tt.in, got)
			}
			if !errors.Is(err, ErrInvalid) {
				t.Errorf("error %v does not wrap ErrInvalid", err)
			}
			msg := err.Error()
			wantOff := " at offset " + strconv.Itoa(tt.off)
			if !strings.Contains(msg, tt.msg) || !strings.HasSuffix(msg, wantOff) {
				t.Errorf("error %q, want it to contain %q and end with %q", msg, tt.msg, wantOff)
			}
		})
	}
}

func TestMaxDepthAccepted(t *testing.T) {
	in := strings.Repeat("[", MaxDepth) + strings.Repeat("]", MaxDepth)
	got, err := Canonicalize([]byte(in))
	if err != nil || string(got) != in {
		t.Fatalf("depth %d: %v", MaxDepth, err)
	}
	in = strings.Repeat(`{"a":`, MaxDepth) + "null" + strings.Repeat("}", MaxDepth)
	if _, err := Canonicalize([]byte(in)); err != nil {
		t.Fatalf("object depth %d: %v", MaxDepth, err)
	}
}

func TestCompareUTF16(t *testing.T) {
	// Listed in UTF-16 order.
	order := []string{"", "\x00", "a", "ab", "\u00e9", "\u07ff", "\u0800", "\ud7ff",
		"\U00010000", "\U0001f600", "\U0010ffff", "\ue000", "\ufb33", "\uffff"}
	for i, a := range order {
		for j, b := range order {
			want := 0
			if i < j {
				want = -1
			} else if i > j {
				want = 1
			}
			if got := compareUTF16([]byte(a), []byte(b)); got != want {
				t.Errorf("compareUTF16(%q, %q) = %d, want %d", a, b, got, want)
			}
		}
	}
}

func TestHash(t *testing.T) {
	if got, want := Hash([]byte("{}")), "44136fa355b3678a1146ad16f7e8649e94fb4fc21fe77e8310c060f61caaff8a"; got != want {
		t.Errorf("Hash({}) = %s, want %s", got, want)
	}
	a, _ := Canonicalize([]byte(` { "a" : 1.0 } `))
	b, _ := Canonicalize([]byte(`{"\u0061":1e0}`))
	if Hash(a) != Hash(b) || Hash(a) != "015abd7f5cc57a2dd94b7590f04ad8084273905ee33ec5cebeae62276a97f862" {
		t.Errorf("equal values hash differently: %s %s", Hash(a), Hash(b))
	}
}

// benchPayload is a realistic ledger payload of about 1 KiB: a settings
// change with a diff array, keys unsorted, indented.
const benchPayload = `{
  "operation": "settings.update",
  "target": {"service": "billing-api", "environment": "production", "region": "eu-west-1"},
  "requested_by": "alice@example.com",
  "reason": "Raise rate limits for the Q3 campaign & enable <beta> export",
  "diff": [
    {"path": "/limits/requests_per_minute", "op": "replace", "old": 1200, "new": 2400},
    {"path": "/limits/burst", "op": "replace", "old": 150, "new": 300},
    {"path": "/features/export_v2", "op": "add", "new": true},
    {"path": "/features/legacy_csv", "op": "remove", "old": false},
    {"path": "/timeouts/upstream_seconds", "op": "replace", "old": 2.5, "new": 3.75},
    {"path": "/notify", "op": "replace", "old": ["ops@example.com"], "new": ["ops@example.com", "billing-oncall@example.com"]},
    {"path": "/labels/owner", "op": "replace", "old": "team-payments", "new": "team-billing"},
    {"path": "/description", "op": "replace", "old": "Billing API – primary", "new": "Billing API \u2013 primary (EU)"}
  ],
  "snapshot_version": 42,
  "created_at": "2025-07-01T12:34:56.789Z",
  "idempotency_key": "7f3c2a9e-5b1d-4e8f-9a6c-0d2e4b8f1a3c",
  "dry_run": false,
  "metadata": {"ticket": "OPS-1234", "tags": ["rate-limit", "campaign", "q3"], "priority": null}
}`

func BenchmarkCanonicalize(b *testing.B) {
	data := []byte(benchPayload)
	b.SetBytes(int64(len(data)))
	b.ReportAllocs()
	for b.Loop() {
		if _, err := Canonicalize(data); err != nil {
			b.Fatal(err)
		}
	}
}

func BenchmarkCanonicalizeCanonical(b *testing.B) {
	data, err := Canonicalize([]byte(benchPayload))
	if err != nil {
		b.Fatal(err)
	}
	b.SetBytes(int64(len(data)))
	b.ReportAllocs()
	for b.Loop() {
		if _, err := Canonicalize(data); err != nil {
			b.Fatal(err)
		}
	}
}

// BenchmarkUnmarshalMarshal is the naive alternative, for comparison.
func BenchmarkUnmarshalMarshal(b *testing.B) {
	data := []byte(benchPayload)
	b.ReportAllocs()
	for b.Loop() {
		var v any
		if err := json.Unmarshal(data, &v); err != nil {
			b.Fatal(err)
		}
		if _, err := json.Marshal(v); err != nil {
			b.Fatal(err)
		}
	}
}
