package serve

import (
	"bufio"
	"encoding/json"
	"io"
	"strings"
	"testing"

	"github.com/modelcontextprotocol/go-sdk/jsonrpc"
)

func nested(depth int) string {
	return strings.Repeat("[", depth) + strings.Repeat("]", depth)
}

func TestNestsDeeper_CountsLevelsOutsideStrings(t *testing.T) {
	for _, tc := range []struct {
		in   string
		max  int
		want bool
	}{
		{nested(3), 3, false},
		{nested(4), 3, true},
		{`{"a":{"b":[1]}}`, 3, false},
		{`{"a":{"b":[[1]]}}`, 3, true},
		{`[[1],[2],[3],[4]]`, 2, false}, // siblings do not add up
		{`["[[[[[[", "{{{{{{"]`, 1, false},
		{`["\"[[[[", "\\", [1]]`, 2, false}, // escaped quotes stay in the string; an escaped backslash ends it
		{`["\\"[[[[`, 2, true},              // "\\" is a whole string: the brackets after it count
		{strings.Repeat("[", 1<<20), 128, true},
		{"]]]]]" + nested(2), 2, false}, // a stray closer cannot buy depth
	} {
		if got := nestsDeeper([]byte(tc.in), tc.max); got != tc.want {
			t.Errorf("nestsDeeper(%.40q, %d) = %v, want %v", tc.in, tc.max, got, tc.want)
		}
	}
}

// rejected decodes line and fails unless it is refused with code, the
// answer's id (as JSON) is id, and its message holds want.
func rejected(t *testing.T, line string, code int64, id, want string) {
	t.Helper()
	msg, r := decodeLine([]byte(line), 7, 16)
	if r == nil {
		t.Errorf("%.60q was accepted as %T", line, msg)
		return
	}
	var answer struct {
		JSONRPC string          `json:"jsonrpc"`
		ID      json.RawMessage `json:"id"`
		Error   jsonrpc.Error   `json:"error"`
	}
	if err := json.Unmarshal(r.response(), &answer); err != nil {
		t.Fatalf("the answer %s is not JSON: %v", r.response(), err)
	}
	if answer.JSONRPC != "2.0" || answer.Error.Code != code || string(answer.ID) != id || !strings.Contains(answer.Error.Message, want) {
		t.Errorf("%.60q: answer %s; want code %d, id %s, a message with %q", line, r.response(), code, id, want)
	}
	if !strings.Contains(answer.Error.Message, "line 7") {
		t.Errorf("%.60q: the answer does not say which line: %q", line, answer.Error.Message)
	}
}

func TestDecodeLine_RefusesWhatTheSDKWouldFailOn(t *testing.T) {
	const parse, invalid = jsonrpc.CodeParseError, jsonrpc.CodeInvalidRequest
	for _, tc := range []struct {
		line string
		code int64
		id   string
		want string
	}{
		{`{"jsonrpc":"2.0","id":5,"method":`, parse, "null", "not valid JSON (unexpected end of JSON input"},
		{`{"jsonrpc":"2.0","id":5,"method":"ping"} {}`, parse, "null", "not valid JSON"},
		{`{"jsonrpc":"2.0","id":5,"method":"ping"}x`, parse, "null", "not valid JSON"},
		{"{\"jsonrpc\":\"2.0\",\"id\":5,\"method\":\"a\x00\"}", parse, "null", "not valid JSON"},
		{`{"jsonrpc":"2.0","id":5,"method":"ping","params":` + nested(16) + `}`, parse, "null", "more than 16 deep"},
		{nested(10000), parse, "null", "more than 16 deep"},
		{`[{"jsonrpc":"2.0","id":1,"method":"ping"}]`, invalid, "null", "batch"},
		{`[]`, invalid, "null", "batch"},
		{`"ping"`, invalid, "null", "holds a JSON string"},
		{`42`, invalid, "null", "holds a JSON number"},
		{`null`, invalid, "null", "holds a JSON null"},
		{`true`, invalid, "null", "holds a JSON boolean"},
		{`{}`, invalid, "null", `lacks "jsonrpc": "2.0"`},
		{`{"jsonrpc":"1.0","id":5,"method":"ping"}`, invalid, "5", `lacks "jsonrpc": "2.0"`},
		{`{"jsonrpc":"2.0","id":"a-1","method":7}`, invalid, "null", `"method" that is not a string`},
		{`{"jsonrpc":2,"id":"a-1","method":"ping"}`, invalid, `"a-1"`, `lacks "jsonrpc"`},
		{`{"JSONRPC":"2.0","id":5,"method":"ping"}`, invalid, "5", `lacks "jsonrpc"`}, // keys match exactly, as in the SDK
		{`{"jsonrpc":"2.0","id":{"a":1},"method":"ping"}`, invalid, "null", `"id" that is not a string, a number or null`},
		{`{"jsonrpc":"2.0","id":true,"method":"ping"}`, invalid, "null", `"id" that is not`},
		{`{"jsonrpc":"2.0","id":5}`, invalid, "null", "must be a response"},
		{`{"jsonrpc":"2.0","result":{}}`, invalid, "null", "must be a response"},
		{`{"jsonrpc":"2.0","id":null,"result":{}}`, invalid, "null", "must be a response"},
		{`{"jsonrpc":"2.0","id":5,"error":"boom"}`, invalid, "null", `"error" that is not an object`},
		{`{"jsonrpc":"2.0","id":5,"error":{"code":1.5,"message":"x"}}`, invalid, "null", `"error" that is not an object`},
		{`{"jsonrpc":"2.0","id":5,"error":{"message":"x"}}`, invalid, "null", `"error" that is not an object`},
		// Ids the answer must not repeat: fractions, huge numbers, long strings.
		{`{"jsonrpc":"1.0","id":1.5,"method":"ping"}`, invalid, "null", `lacks "jsonrpc"`},
		{`{"jsonrpc":"1.0","id":123456789012345678901234,"method":"ping"}`, invalid, "null", `lacks "jsonrpc"`},
		{`{"jsonrpc":"1.0","id":"` + strings.Repeat("x", maxEchoedIDBytes) + `","method":"ping"}`, invalid, "null", `lacks "jsonrpc"`},
	} {
		rejected(t, tc.line, tc.code, tc.id, tc.want)
	}
}

func TestDecodeLine_AcceptsWellFormedMessages(t *testing.T) {
	for _, tc := range []struct {
		line string
		want string // "call", "notification" or "response"
	}{
		{`{"jsonrpc":"2.0","id":1,"method":"ping"}`, "call"},
		{`{"jsonrpc":"2.0","id":"x","method":"tools/call","params":{"name":"a","arguments":{"b":[1,{"c":null}]}}}`, "call"},
		{`{"jsonrpc":"2.0","method":"notifications/initialized"}`, "notification"},
		{`{"jsonrpc":"2.0","id":null,"method":"notifications/initialized"}`, "notification"},
		{`{"jsonrpc":"2.0","id":3,"result":{}}`, "response"},
		{`{"jsonrpc":"2.0","id":3,"result":null}`, "response"},
		{`{"jsonrpc":"2.0","id":3,"error":{"code":-1,"message":"no"}}`, "response"},
		{`{"jsonrpc":"2.0","id":3,"result":{},"error":null}`, "response"},
		{`{"jsonrpc":"2.0","id":1,"method":"ping","params":` + nested(14) + `}`, "call"}, // 1 + 14 + 1 = 16 levels: the limit
	} {
		msg, r := decodeLine([]byte(tc.line), 1, 16)
		if r != nil {
			t.Errorf("%.60q refused: %s", tc.line, r.response())
			continue
		}
		got := "response"
		if req, ok := msg.(*jsonrpc.Request); ok {
			got = "notification"
			if req.IsCall() {
				got = "call"
			}
		}
		if got != tc.want {
			t.Errorf("%.60q decoded as a %s, want a %s", tc.line, got, tc.want)
		}
	}
}

func TestReadLine_BoundsALineWithoutHoldingIt(t *testing.T) {
	const max = 100
	long := strings.Repeat("y", 10*max)
	input := strings.Repeat("x", max) + "\n" + // exactly the limit
		strings.Repeat("x", max) + "\r\n" + // the limit, CRLF
		strings.Repeat("x", max+1) + "\n" + // one byte over
		long + "\n" +
		"after\n" +
		"last" // no newline at the end
	br := bufio.NewReaderSize(strings.NewReader(input), 16) // lines span many reads
	type line struct {
		text    string
		size    int64
		tooLong bool
	}
	want := []line{
		{strings.Repeat("x", max) + "\n", max + 1, false},
		{strings.Repeat("x", max) + "\r\n", max + 2, false},
		{"", max + 2, true},
		{"", int64(len(long)) + 1, true},
		{"after\n", 6, false},
		{"last", 4, false},
	}
	for i, w := range want {
		got, size, tooLong, err := readLine(br, nil, max)
		if string(got) != w.text || size != w.size || tooLong != w.tooLong {
			t.Errorf("line %d: %q, size %d, too long %v; want %q, %d, %v", i+1, got, size, tooLong, w.text, w.size, w.tooLong)
		}
		if tooLong && cap(got) != 0 {
			t.Errorf("line %d: a too-long line kept a buffer of %d bytes", i+1, cap(got))
		}
		if last := i == len(want)-1; (err == io.EOF) != last || (!last && err != nil) {
			t.Errorf("line %d: err = %v", i+1, err)
		}
	}
}
