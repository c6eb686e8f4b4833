package main

import (
	"bufio"
	"encoding/json"
	"fmt"
	"io"
	"strings"
	"testing"
	"time"

	"github.com/mcp-changeset/changeset-go/examples/internal/exampletest"
	"github.com/mcp-changeset/changeset-go/serve"
)

// lineClient drives an example over stdio by hand, one JSON-RPC line at a
// time, so that a test can put lines between the calls that no MCP client
// would send (a go-sdk client would itself end its session on the
// "id": null answers they get).
type lineClient struct {
	t     *testing.T
	stdin io.WriteCloser
	lines chan []byte
	held  map[string]lineAnswer
	nulls []lineAnswer // answers with "id": null read while waiting for another
	next  int
}

type lineAnswer struct {
	ID     json.RawMessage `json:"id"`
	Method string          `json:"method"`
	Result struct {
		IsError           bool           `json:"isError"`
		StructuredContent map[string]any `json:"structuredContent"`
		Content           []struct {
			Text string `json:"text"`
		} `json:"content"`
	} `json:"result"`
	Error *struct {
		Code    int64  `json:"code"`
		Message string `json:"message"`
	} `json:"error"`
	line []byte
}

func startLines(t *testing.T, name string, args []string, env ...string) (*lineClient, chan error) {
	t.Helper()
	cmd, _ := exampletest.Command(t, name, args, env...)
	stdin, err := cmd.StdinPipe()
	if err != nil {
		t.Fatal(err)
	}
	stdout, err := cmd.StdoutPipe()
	if err != nil {
		t.Fatal(err)
	}
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	exited := make(chan error, 1)
	c := &lineClient{t: t, stdin: stdin, lines: make(chan []byte, 256), held: map[string]lineAnswer{}, next: 10}
	go func() {
		br := bufio.NewReader(stdout)
		for {
			line, err := br.ReadBytes('\n')
			if len(line) > 0 {
				c.lines <- line
			}
			if err != nil {
				close(c.lines)
				exited <- cmd.Wait()
				return
			}
		}
	}()
	t.Cleanup(func() {
		stdin.Close()
		cmd.Process.Kill()
	})
	c.send(`{"jsonrpc":"2.0","id":1,"method":"initialize","params":{"protocolVersion":"2025-06-18","capabilities":{},"clientInfo":{"name":"lines","version":"1"}}}`)
	if a := c.answer("1"); a.Error != nil {
		t.Fatalf("initialize: %s", a.line)
	}
	c.send(`{"jsonrpc":"2.0","method":"notifications/initialized"}`)
	return c, exited
}

func (c *lineClient) send(lines ...string) {
	c.t.Helper()
	if _, err := io.WriteString(c.stdin, strings.Join(lines, "\n")+"\n"); err != nil {
		c.t.Fatalf("writing to the server: %v", err)
	}
}

// callLine returns a tools/call line and its id.
func (c *lineClient) callLine(tool string, args map[string]any) (line, id string) {
	c.next++
	params, err := json.Marshal(map[string]any{"name": tool, "arguments": args})
	if err != nil {
		c.t.Fatal(err)
	}
	id = fmt.Sprint(c.next)
	return fmt.Sprintf(`{"jsonrpc":"2.0","id":%s,"method":"tools/call","params":%s}`, id, params), id
}

// must calls a tool and returns its structured result, failing the test
// on any error.
func (c *lineClient) must(tool string, args map[string]any) map[string]any {
	c.t.Helper()
	line, id := c.callLine(tool, args)
	c.send(line)
	return c.result(id)
}

func (c *lineClient) result(id string) map[string]any {
	c.t.Helper()
	a := c.answer(id)
	if a.Error != nil || a.Result.IsError {
		c.t.Fatalf("call %s failed: %s", id, a.line)
	}
	return a.Result.StructuredContent
}

// answer waits for the message with the given id ("null" for the answers
// to bad lines, in order).
func (c *lineClient) answer(id string) lineAnswer {
	c.t.Helper()
	if id == "null" && len(c.nulls) > 0 {
		a := c.nulls[0]
		c.nulls = c.nulls[1:]
		return a
	}
	if a, ok := c.held[id]; ok {
		delete(c.held, id)
		return a
	}
	deadline := time.After(20 * time.Second)
	for {
		select {
		case line, ok := <-c.lines:
			if !ok {
				c.t.Fatalf("the server closed stdout while the test waited for id %s", id)
			}
			var a lineAnswer
			if err := json.Unmarshal(line, &a); err != nil {
				c.t.Fatalf("the server wrote a line that is not JSON (%v): %.200q", err, line)
			}
			a.line = line
			switch {
			case a.Method != "" && a.ID == nil: // a notification
			case string(a.ID) == id:
				return a
			case string(a.ID) == "null":
				c.nulls = append(c.nulls, a)
			default:
				c.held[string(a.ID)] = a
			}
		case <-deadline:
			c.t.Fatalf("no answer with id %s", id)
		}
	}
}

func (c *lineClient) refused(code int64, want string) {
	c.t.Helper()
	a := c.answer("null")
	if a.Error == nil || a.Error.Code != code || !strings.Contains(a.Error.Message, want) {
		c.t.Fatalf("want error %d with %q, got %s", code, want, a.line)
	}
}

// One bad line from any client used to stop an example. Now each gets an
// error answer; the next call on the same connection works; a change
// previewed before the bad lines applies after them, and an apply sent
// together with a bad line completes.
func TestStdio_BadLinesGetAnAnswerAndTheExampleServesOn(t *testing.T) {
	c, exited := startLines(t, "settings", nil, exampletest.Guarded)
	theme := func() any { return c.must("get_settings", nil)["settings"].(map[string]any)["theme"] }
	preview := c.must("preview_set_setting", map[string]any{"key": "theme", "value": "dark"})

	for _, bad := range []struct {
		line string
		code int64
		want string
	}{
		{strings.Repeat("[", 10000), -32700, "deep"},
		{`{"jsonrpc":"2.0","id":5,"method":`, -32700, "not valid JSON"},
		{`{"jsonrpc":"2.0","id":6,"method":"tools/call","params":{"name":"get_settings","arguments":{"pad":"` + strings.Repeat("x", serve.DefaultMaxLineBytes) + `"}}}`, -32600, "longer than"},
		{`[{"jsonrpc":"2.0","id":7,"method":"tools/list"}]`, -32600, "batch"},
		{`17`, -32600, "JSON object"},
		{`{"jsonrpc":"2.0","id":8}`, -32600, "must be a response"},
	} {
		c.send(bad.line)
		c.refused(bad.code, bad.want)
		if got := theme(); got != "light" {
			t.Fatalf("theme = %v", got)
		}
	}

	// The apply and a bad line in one write: the apply is in flight while
	// the bad line is read.
	apply, id := c.callLine("apply_change", map[string]any{"change_id": preview["change_id"], "confirmation_token": preview["confirmation_token"]})
	c.send(apply, `{"jsonrpc":"2.0","id":9,"method":`)
	if got := c.result(id); got["status"] != "applied" {
		t.Fatalf("apply_change = %v", got)
	}
	c.refused(-32700, "not valid JSON")
	if got := theme(); got != "dark" {
		t.Fatalf("after the apply, theme = %v", got)
	}

	c.stdin.Close()
	select {
	case err := <-exited:
		if err != nil {
			t.Fatalf("at the end of input the example exited with %v, want status 0", err)
		}
	case <-time.After(20 * time.Second):
		t.Fatal("the example did not exit at the end of its input")
	}
}
