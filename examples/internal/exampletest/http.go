package exampletest

import (
	"net/http"
	"os/exec"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/modelcontextprotocol/go-sdk/mcp"
)

// Process is an example server serving Streamable HTTP.
type Process struct {
	Cmd    *exec.Cmd
	Stderr *Buffer
	// URL is the MCP endpoint the server printed.
	URL     string
	done    chan struct{} // closed when the process exited
	waitErr error         // set before done is closed
}

// StartHTTP starts the example name with args, which must include --http
// (an address such as 127.0.0.1:0 picks a free port) and
// --auth-token-file, and waits for it to print its URL. The process gets
// SIGTERM when the test ends, if it still runs.
func StartHTTP(t testing.TB, name string, args []string, env ...string) *Process {
	t.Helper()
	cmd, stderr := Command(t, name, args, env...)
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	p := &Process{Cmd: cmd, Stderr: stderr, done: make(chan struct{})}
	go func() {
		p.waitErr = cmd.Wait()
		close(p.done)
	}()
	t.Cleanup(func() {
		select {
		case <-p.done:
			return
		default:
		}
		cmd.Process.Signal(syscall.SIGTERM)
		select {
		case <-p.done:
		case <-time.After(10 * time.Second):
			cmd.Process.Kill()
			<-p.done
		}
	})
	p.URL = strings.TrimSpace(stderr.WaitLine(t, "listening on ", 30*time.Second))
	return p
}

// Stop sends SIGTERM and returns the process's exit error (nil for a clean
// exit), failing the test if it does not exit within timeout.
func (p *Process) Stop(t testing.TB, timeout time.Duration) error {
	t.Helper()
	if err := p.Cmd.Process.Signal(syscall.SIGTERM); err != nil {
		t.Fatal(err)
	}
	select {
	case <-p.done:
		return p.waitErr
	case <-time.After(timeout):
		t.Fatalf("the server did not exit within %v of SIGTERM", timeout)
		return nil
	}
}

// Wait waits for the process to exit, for example after a signal sent
// through p.Cmd.Process from another goroutine, and returns its exit error
// (nil for a clean exit). It fails the test if the process does not exit
// within timeout.
func (p *Process) Wait(t testing.TB, timeout time.Duration) error {
	t.Helper()
	select {
	case <-p.done:
		return p.waitErr
	case <-time.After(timeout):
		t.Fatalf("the server did not exit within %v", timeout)
		return nil
	}
}

// Connect connects a client that presents token as its bearer token (none
// when token is empty).
func (p *Process) Connect(t testing.TB, token string) *Client {
	t.Helper()
	transport := &mcp.StreamableClientTransport{
		Endpoint:   p.URL,
		HTTPClient: BearerClient(token),
		MaxRetries: -1,
	}
	return connect(t, transport, p.Stderr)
}

// ConnectStateless connects a client to a server started with
// --stateless: it opens no standalone event stream, which such a server
// does not offer, so every call is one POST of its own.
func (p *Process) ConnectStateless(t testing.TB, token string) *Client {
	t.Helper()
	transport := &mcp.StreamableClientTransport{
		Endpoint:             p.URL,
		HTTPClient:           BearerClient(token),
		MaxRetries:           -1,
		DisableStandaloneSSE: true,
	}
	return connect(t, transport, p.Stderr)
}

// BearerClient returns an HTTP client that adds "Authorization: Bearer
// token" to every request (nothing when token is empty).
func BearerClient(token string) *http.Client {
	return &http.Client{Transport: bearer{token: token, next: http.DefaultTransport}}
}

type bearer struct {
	token string
	next  http.RoundTripper
}

func (b bearer) RoundTrip(req *http.Request) (*http.Response, error) {
	if b.token != "" {
		req = req.Clone(req.Context())
		req.Header.Set("Authorization", "Bearer "+b.token)
	}
	return b.next.RoundTrip(req)
}
