package serve

import (
	"bufio"
	"encoding/json"
	"fmt"
	"io"
	"sync"
	"testing"
	"time"
)

// rawClient speaks newline-delimited JSON-RPC to a server by hand, so that
// a test can send lines no MCP client would and see every line the server
// writes.
type rawClient struct {
	t     testing.TB
	w     io.Writer
	lines chan []byte
	// held are answers read while waiting for another one.
	held []rawAnswer
	// mu serialises writes: a test may send from several goroutines.
	mu sync.Mutex
}

// rawAnswer is one message from the server.
type rawAnswer struct {
	ID     json.RawMessage `json:"id"`
	Method string          `json:"method"`
	Result json.RawMessage `json:"result"`
	Error  *struct {
		Code    int64  `json:"code"`
		Message string `json:"message"`
	} `json:"error"`
	line []byte
}

func newRawClient(t testing.TB, w io.Writer, r io.Reader) *rawClient {
	c := &rawClient{t: t, w: w, lines: make(chan []byte, 1024)} // room for every answer a test provokes before it reads them
	go func() {
		defer close(c.lines)
		br := bufio.NewReader(r)
		for {
			line, err := br.ReadBytes('\n')
			if len(line) > 0 {
				c.lines <- line
			}
			if err != nil {
				return
			}
		}
	}()
	return c
}

// send writes s and a newline.
func (c *rawClient) send(s string) {
	c.t.Helper()
	c.mu.Lock()
	defer c.mu.Unlock()
	if _, err := io.WriteString(c.w, s+"\n"); err != nil {
		c.t.Fatalf("writing to the server: %v", err)
	}
}

// call sends a request with the given id.
func (c *rawClient) call(id int, method string, params any) {
	c.t.Helper()
	p, err := json.Marshal(params)
	if err != nil {
		c.t.Fatal(err)
	}
	c.send(fmt.Sprintf(`{"jsonrpc":"2.0","id":%d,"method":%q,"params":%s}`, id, method, p))
}

// answer waits for the answer with the given id (as JSON: "7", "null"),
// failing the test if none comes within timeout or a line is not JSON.
// Answers with "id": null come back in the order they were written.
func (c *rawClient) answer(id string, timeout time.Duration) rawAnswer {
	c.t.Helper()
	a, err := c.await(id, timeout)
	if err != nil {
		c.t.Fatal(err)
	}
	return a
}

// await is answer that returns an error instead of failing the test when
// no answer comes.
func (c *rawClient) await(id string, timeout time.Duration) (rawAnswer, error) {
	c.t.Helper()
	for i, a := range c.held {
		if string(a.ID) == id {
			c.held = append(c.held[:i], c.held[i+1:]...)
			return a, nil
		}
	}
	deadline := time.After(timeout)
	for {
		select {
		case line, ok := <-c.lines:
			if !ok {
				return rawAnswer{}, fmt.Errorf("the server closed its output while the test waited for the answer with id %s", id)
			}
			var a rawAnswer
			if err := json.Unmarshal(line, &a); err != nil {
				c.t.Fatalf("the server wrote a line that is not JSON (%v): %.200q", err, line)
			}
			a.line = line
			if a.Method != "" && a.ID == nil {
				continue // a notification
			}
			if a.ID == nil {
				c.t.Fatalf("an answer without an id: %s", line)
			}
			if string(a.ID) == id {
				return a, nil
			}
			c.held = append(c.held, a)
		case <-deadline:
			return rawAnswer{}, fmt.Errorf("no answer with id %s within %v (holding %d others)", id, timeout, len(c.held))
		}
	}
}

// initialize runs the MCP handshake.
func (c *rawClient) initialize() {
	c.t.Helper()
	c.call(1, "initialize", map[string]any{
		"protocolVersion": "2025-06-18",
		"capabilities":    map[string]any{},
		"clientInfo":      map[string]any{"name": "rawclient", "version": "1"},
	})
	if a := c.answer("1", 10*time.Second); a.Error != nil {
		c.t.Fatalf("initialize: %s", a.line)
	}
	c.send(`{"jsonrpc":"2.0","method":"notifications/initialized"}`)
}

// toolText calls a tool and returns the text of its result, failing the
// test on a protocol error or a tool error.
func (c *rawClient) toolText(id int, name string, args map[string]any) string {
	c.t.Helper()
	c.call(id, "tools/call", map[string]any{"name": name, "arguments": args})
	return c.resultText(fmt.Sprint(id), 10*time.Second)
}

// resultText waits for a tool result and returns its text.
func (c *rawClient) resultText(id string, timeout time.Duration) string {
	c.t.Helper()
	a := c.answer(id, timeout)
	var res struct {
		IsError bool `json:"isError"`
		Content []struct {
			Text string `json:"text"`
		} `json:"content"`
	}
	if a.Error != nil || json.Unmarshal(a.Result, &res) != nil || res.IsError || len(res.Content) == 0 {
		c.t.Fatalf("tool call %s failed: %s", id, a.line)
	}
	return res.Content[0].Text
}

// refused waits for the next answer with "id" id that is a JSON-RPC
// error with code.
func (c *rawClient) refused(id string, code int64) rawAnswer {
	c.t.Helper()
	a := c.answer(id, 10*time.Second)
	if a.Error == nil || a.Error.Code != code {
		c.t.Fatalf("want a JSON-RPC error %d with id %s, got %s", code, id, a.line)
	}
	return a
}
