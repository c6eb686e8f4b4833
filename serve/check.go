package serve

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"strconv"

	"github.com/modelcontextprotocol/go-sdk/jsonrpc"
)

// maxEchoedIDBytes bounds the string id an error answer repeats: an answer
// must not be a way to make the server write back a megabyte.
const maxEchoedIDBytes = 256

// A rejection is what a line that is not served gets instead: a JSON-RPC
// error response.
type rejection struct {
	code    int64
	message string
	// id is the request's id as the client wrote it, when it could be
	// recovered safely; nil answers with "id": null.
	id json.RawMessage
}

// response encodes the rejection as one JSON-RPC error response, without
// the line terminator.
func (r *rejection) response() []byte {
	id := r.id
	if id == nil {
		id = json.RawMessage("null")
	}
	data, err := json.Marshal(struct {
		JSONRPC string          `json:"jsonrpc"`
		ID      json.RawMessage `json:"id"`
		Error   struct {
			Code    int64  `json:"code"`
			Message string `json:"message"`
		} `json:"error"`
	}{JSONRPC: "2.0", ID: id, Error: struct {
		Code    int64  `json:"code"`
		Message string `json:"message"`
	}{r.code, r.message}})
	if err != nil { // only an id that is not JSON could do this, and ids are checked
		return []byte(`{"jsonrpc":"2.0","id":null,"error":{"code":-32603,"message":"internal error"}}`)
	}
	return data
}

func parseError(format string, args ...any) *rejection {
	return &rejection{code: jsonrpc.CodeParseError, message: "parse error: " + fmt.Sprintf(format, args...)}
}

func invalidRequest(id json.RawMessage, format string, args ...any) *rejection {
	return &rejection{code: jsonrpc.CodeInvalidRequest, message: "invalid request: " + fmt.Sprintf(format, args...), id: id}
}

// decodeLine turns one line of input (its terminator and surrounding
// blanks removed; n is its number, for the answer) into a JSON-RPC
// message, or says why it cannot be one. The checks run cheapest and
// safest first: the nesting depth in one pass without recursion, then the
// JSON syntax with encoding/json's scanner (which keeps its own stack and
// does not recurse either), then the shape of the top-level object, and
// last the go-sdk's own decoder, so that a message handed to the session is
// one the SDK has already accepted.
func decodeLine(line []byte, n int, maxDepth int) (jsonrpc.Message, *rejection) {
	if nestsDeeper(line, maxDepth) {
		return nil, parseError("line %d nests arrays and objects more than %d deep, the most this server reads", n, maxDepth)
	}
	if !json.Valid(line) {
		var raw json.RawMessage
		err := json.Unmarshal(line, &raw)
		var se *json.SyntaxError
		if errors.As(err, &se) {
			return nil, parseError("line %d is not valid JSON (%v, at byte %d); each line must hold one JSON-RPC message", n, se, se.Offset)
		}
		return nil, parseError("line %d is not valid JSON; each line must hold one JSON-RPC message", n)
	}
	switch line[0] {
	case '{':
	case '[':
		return nil, invalidRequest(nil, "line %d is a JSON-RPC batch, which this server does not accept (MCP dropped batches in protocol version 2025-06-18); send one message per line", n)
	default:
		return nil, invalidRequest(nil, "line %d holds a JSON %s; a JSON-RPC message is a JSON object", n, kindOfValue(line[0]))
	}
	var m map[string]json.RawMessage
	if err := json.Unmarshal(line, &m); err != nil {
		return nil, invalidRequest(nil, "line %d cannot be read as a JSON object", n)
	}
	if r := checkShape(m, n); r != nil {
		return nil, r
	}
	msg, err := jsonrpc.DecodeMessage(line)
	if err != nil {
		// checkShape missed something the SDK refuses; its error text may
		// quote the input, so it is not repeated.
		return nil, invalidRequest(recoverID(m), "line %d is not a JSON-RPC 2.0 message this server can read", n)
	}
	return msg, nil
}

// checkShape checks the members of a JSON-RPC 2.0 message that the go-sdk
// would otherwise fail the whole connection on, and says which one is
// wrong. Keys are matched exactly, as the SDK matches them.
func checkShape(m map[string]json.RawMessage, n int) *rejection {
	id := recoverID(m)
	var version string
	if err := json.Unmarshal(m["jsonrpc"], &version); err != nil || version != "2.0" {
		return invalidRequest(id, `line %d lacks "jsonrpc": "2.0"`, n)
	}
	if raw, ok := m["id"]; ok && !isJSON(raw, '"', 'n') && !isNumber(raw) {
		return invalidRequest(nil, `line %d has an "id" that is not a string, a number or null`, n)
	}
	if raw, ok := m["method"]; ok {
		if !isJSON(raw, '"') {
			return invalidRequest(nil, `line %d has a "method" that is not a string`, n)
		}
		return nil
	}
	// No method: a response to a request of the server's.
	raw, ok := m["id"]
	_, hasResult := m["result"]
	errRaw, hasError := m["error"]
	if hasError && isJSON(errRaw, 'n') {
		hasError = false
	}
	switch {
	case !ok || isJSON(raw, 'n') || !(hasResult || hasError):
		return invalidRequest(nil, `line %d has no "method", so it must be a response, with an "id" and a "result" or an "error"`, n)
	case hasError && !isErrorObject(errRaw):
		return invalidRequest(nil, `line %d has an "error" that is not an object with an integer "code" and a string "message"`, n)
	}
	return nil
}

// recoverID returns the id of a request as the client wrote it, when it
// is safe to repeat: the message has a "method" (a response's id is one
// the server chose, and repeating it would answer the server's own
// request on the client's side), and the id is a short string or an
// integer. Anything else answers with "id": null, as JSON-RPC 2.0 asks
// when the id cannot be determined.
func recoverID(m map[string]json.RawMessage) json.RawMessage {
	raw, ok := m["id"]
	if _, isRequest := m["method"]; !ok || !isRequest {
		return nil
	}
	switch {
	case isJSON(raw, '"') && len(raw) <= maxEchoedIDBytes:
		var s string
		if json.Unmarshal(raw, &s) != nil {
			return nil
		}
		return raw
	case isNumber(raw):
		if _, err := strconv.ParseInt(string(raw), 10, 64); err != nil {
			return nil // a fraction, an exponent or too large: the SDK would not echo it exactly either
		}
		return raw
	}
	return nil
}

// isJSON reports whether the valid JSON value raw starts with one of the
// given bytes: '"' for a string, 'n' for null, '{' for an object.
func isJSON(raw json.RawMessage, first ...byte) bool {
	raw = bytes.TrimLeft(raw, " \t\r\n")
	return len(raw) > 0 && bytes.IndexByte(first, raw[0]) >= 0
}

func isNumber(raw json.RawMessage) bool {
	raw = bytes.TrimLeft(raw, " \t\r\n")
	return len(raw) > 0 && (raw[0] == '-' || ('0' <= raw[0] && raw[0] <= '9'))
}

// isErrorObject reports whether raw is a JSON-RPC error object the SDK can
// decode: an integer code and a string message.
func isErrorObject(raw json.RawMessage) bool {
	if !isJSON(raw, '{') {
		return false
	}
	var e struct {
		Code    *json.Number `json:"code"`
		Message *string      `json:"message"`
	}
	if json.Unmarshal(raw, &e) != nil || e.Code == nil || e.Message == nil {
		return false
	}
	_, err := strconv.ParseInt(e.Code.String(), 10, 64)
	return err == nil
}

// kindOfValue names the JSON value that starts with b.
func kindOfValue(b byte) string {
	switch b {
	case '"':
		return "string"
	case 't', 'f':
		return "boolean"
	case 'n':
		return "null"
	}
	return "number"
}

// nestsDeeper reports whether data nests arrays and objects more than max
// levels deep. It is one pass over the bytes with a counter, no recursion
// and no stack, skipping brackets inside strings. On invalid JSON the count
// up to the first error is still exact, so it bounds how deep any decoder
// could be made to go before it notices.
func nestsDeeper(data []byte, max int) bool {
	depth := 0
	inString, escaped := false, false
	for _, b := range data {
		if inString {
			switch {
			case escaped:
				escaped = false
			case b == '\\':
				escaped = true
			case b == '"':
				inString = false
			}
			continue
		}
		switch b {
		case '"':
			inString = true
		case '[', '{':
			if depth++; depth > max {
				return true
			}
		case ']', '}':
			if depth > 0 {
				depth--
			}
		}
	}
	return false
}
