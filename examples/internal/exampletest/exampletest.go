// Package exampletest runs the example servers as real subprocesses and
// drives them with a go-sdk client, over stdio or Streamable HTTP, for the
// examples' tests.
package exampletest

import (
	"bufio"
	"context"
	"encoding/json"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/mcp-changeset/changeset-go/internal/pgtest"
	"github.com/mcp-changeset/changeset-go/internal/testbin"
	"github.com/mcp-changeset/changeset-go/internal/testkit"
	"github.com/modelcontextprotocol/go-sdk/mcp"
)

// Module is the import path prefix of the examples.
const Module = "github.com/mcp-changeset/changeset-go/examples/"

// Guarded is the environment entry that enables writes.
const Guarded = "MCP_CHANGESET_WRITE_MODE=guarded"

// Main runs the tests, then removes the binaries Build made and stops the
// PostgreSQL cluster that pgtest.DSN started, if any. Call it from
// TestMain.
func Main(m *testing.M) {
	code := m.Run()
	testbin.Cleanup()
	pgtest.Stop()
	os.Exit(code)
}

// Build compiles the example named name ("notes") once per test process
// and returns the binary's path.
func Build(t testing.TB, name string) string {
	t.Helper()
	return testbin.Build(t, Module+name)
}

// Command returns a command that runs the example name with args. Unless
// args hold --ledger, it gets a fresh ledger in a temporary directory. Its
// environment is the test's, with MCP_CHANGESET_LEDGER and
// MCP_CHANGESET_WRITE_MODE cleared, plus env. Its stderr goes to the
// returned buffer, which the test log shows if the test fails.
func Command(t testing.TB, name string, args []string, env ...string) (*exec.Cmd, *Buffer) {
	t.Helper()
	if !slices.Contains(args, "--ledger") {
		args = append([]string{"--ledger", filepath.Join(t.TempDir(), "ledger.db")}, args...)
	}
	cmd := exec.Command(Build(t, name), args...)
	cmd.Env = append(os.Environ(), "MCP_CHANGESET_LEDGER=", "MCP_CHANGESET_WRITE_MODE=")
	cmd.Env = append(cmd.Env, env...)
	stderr := new(Buffer)
	cmd.Stderr = stderr
	t.Cleanup(func() {
		if t.Failed() {
			t.Logf("stderr of %s:\n%s", name, stderr)
		}
	})
	return cmd, stderr
}

// Client is a client session with an example server.
type Client struct {
	t       testing.TB
	Session *mcp.ClientSession
	// Stderr is what the server wrote to stderr (stdio servers only).
	Stderr *Buffer
}

// Start starts the example name over stdio (see Command for args and env)
// and connects a client to it. The session is closed when the test ends.
func Start(t testing.TB, name string, args []string, env ...string) *Client {
	t.Helper()
	cmd, stderr := Command(t, name, args, env...)
	return connect(t, &mcp.CommandTransport{Command: cmd}, stderr)
}

func connect(t testing.TB, transport mcp.Transport, stderr *Buffer) *Client {
	t.Helper()
	client := mcp.NewClient(&mcp.Implementation{Name: "exampletest", Version: "1"}, nil)
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	cs, err := client.Connect(ctx, transport, nil)
	if err != nil {
		t.Fatalf("connect: %v", err)
	}
	t.Cleanup(func() { cs.Close() })
	return &Client{t: t, Session: cs, Stderr: stderr}
}

// Tools lists the names of the server's tools, sorted.
func (c *Client) Tools() []string {
	c.t.Helper()
	res, err := c.Session.ListTools(context.Background(), nil)
	if err != nil {
		c.t.Fatalf("list tools: %v", err)
	}
	var names []string
	for _, tool := range res.Tools {
		names = append(names, tool.Name)
	}
	slices.Sort(names)
	return names
}

// HasTools fails the test unless the server has every tool named.
func (c *Client) HasTools(names ...string) {
	c.t.Helper()
	have := c.Tools()
	for _, name := range names {
		if !slices.Contains(have, name) {
			c.t.Errorf("the server lacks the tool %s; it has %v", name, have)
		}
	}
}

// Call calls a tool. It returns the structured result, or the text of the
// tool error. A protocol error fails the test.
func (c *Client) Call(name string, args map[string]any) (out map[string]any, errText string) {
	c.t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	res, err := c.Session.CallTool(ctx, &mcp.CallToolParams{Name: name, Arguments: args})
	if err != nil {
		c.t.Fatalf("%s %s: %v", name, brief(args), err)
	}
	if res.IsError {
		var texts []string
		for _, content := range res.Content {
			if tc, ok := content.(*mcp.TextContent); ok {
				texts = append(texts, tc.Text)
			}
		}
		return nil, strings.Join(texts, "\n")
	}
	out = map[string]any{}
	Decode(c.t, res.StructuredContent, &out)
	return out, ""
}

// Must calls a tool and fails the test on a tool error.
func (c *Client) Must(name string, args map[string]any) map[string]any {
	c.t.Helper()
	out, errText := c.Call(name, args)
	if errText != "" {
		c.t.Fatalf("%s %s: %s", name, brief(args), errText)
	}
	return out
}

// Refused calls a tool that must fail with a tool error whose text holds
// want, and returns the text.
func (c *Client) Refused(name string, args map[string]any, want string) string {
	c.t.Helper()
	out, errText := c.Call(name, args)
	if errText == "" {
		c.t.Fatalf("%s %s succeeded, want a tool error with %q: %s", name, brief(args), want, brief(out))
	}
	if !strings.Contains(errText, want) {
		c.t.Fatalf("%s %s: error %q does not contain %q", name, brief(args), errText, want)
	}
	return errText
}

// brief renders v for a test message, cut to a readable length.
func brief(v any) string {
	b, err := json.Marshal(v)
	if err != nil {
		return fmt.Sprint(v)
	}
	if len(b) > 300 {
		return string(b[:150]) + "…" + string(b[len(b)-100:])
	}
	return string(b)
}

// Decode converts v (a decoded JSON value) into *into through JSON.
func Decode(t testing.TB, v, into any) {
	t.Helper()
	b, err := json.Marshal(v)
	if err != nil {
		t.Fatal(err)
	}
	if err := json.Unmarshal(b, into); err != nil {
		t.Fatalf("decode %s: %v", b, err)
	}
}

// Buffer is a bytes.Buffer safe for a process to write while a test
// reads, with WaitLine.
type Buffer struct{ testkit.Buffer }

// WaitLine waits until a line starting with prefix appears and returns the
// rest of the line.
func (b *Buffer) WaitLine(t testing.TB, prefix string, timeout time.Duration) string {
	t.Helper()
	deadline := time.Now().Add(timeout)
	for {
		sc := bufio.NewScanner(strings.NewReader(b.String()))
		for sc.Scan() {
			if rest, ok := strings.CutPrefix(sc.Text(), prefix); ok {
				return rest
			}
		}
		if time.Now().After(deadline) {
			t.Fatalf("no line starting with %q within %v; stderr:\n%s", prefix, timeout, b)
		}
		time.Sleep(20 * time.Millisecond)
	}
}
