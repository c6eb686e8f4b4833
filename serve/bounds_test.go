package serve

import (
	"context"
	"fmt"
	"io"
	"net"
	"net/http"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/modelcontextprotocol/go-sdk/mcp"
)

const boundsToken = "alice-token-0123456789"

// boundsServer is RunHTTP on a loopback port, with a tool that takes as
// long as it is told to.
type boundsServer struct {
	addr   string
	server *mcp.Server
}

func startBoundsServer(t *testing.T, opts HTTPOptions) *boundsServer {
	t.Helper()
	tokens, err := BearerTokensFromFile(writeTokens(t, boundsToken+" alice\n"), discard)
	if err != nil {
		t.Fatal(err)
	}
	opts.Verifier = tokens.Verify
	ln, err := Listen("127.0.0.1:0", false)
	if err != nil {
		t.Fatal(err)
	}
	server := mcp.NewServer(&mcp.Implementation{Name: "bounds", Version: "1"}, nil)
	type waitIn struct {
		Millis int `json:"millis"`
	}
	mcp.AddTool(server, &mcp.Tool{Name: "wait"}, func(ctx context.Context, _ *mcp.CallToolRequest, in waitIn) (*mcp.CallToolResult, any, error) {
		select {
		case <-time.After(time.Duration(in.Millis) * time.Millisecond):
			return &mcp.CallToolResult{Content: []mcp.Content{&mcp.TextContent{Text: "waited"}}}, nil, nil
		case <-ctx.Done():
			return nil, nil, fmt.Errorf("cancelled while waiting: %w", context.Cause(ctx))
		}
	})
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- RunHTTP(ctx, ln, server, opts) }()
	t.Cleanup(func() {
		cancel()
		if err := <-done; err != nil {
			t.Errorf("RunHTTP after cancel = %v, want nil", err)
		}
	})
	return &boundsServer{addr: ln.Addr().String(), server: server}
}

// countingTransport presents the bearer token and counts the requests of
// each method.
type countingTransport struct {
	mu      sync.Mutex
	methods map[string]int
}

func (c *countingTransport) RoundTrip(r *http.Request) (*http.Response, error) {
	c.mu.Lock()
	if c.methods == nil {
		c.methods = map[string]int{}
	}
	c.methods[r.Method]++
	c.mu.Unlock()
	r = r.Clone(r.Context())
	r.Header.Set("Authorization", "Bearer "+boundsToken)
	return http.DefaultTransport.RoundTrip(r)
}

func (c *countingTransport) count(method string) int {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.methods[method]
}

// connect opens an MCP session over Streamable HTTP, with the standalone
// event stream (GET) the SDK's client opens by default.
func (s *boundsServer) connect(t *testing.T, opts *mcp.ClientOptions) (*mcp.ClientSession, *countingTransport) {
	t.Helper()
	rt := &countingTransport{}
	client := mcp.NewClient(&mcp.Implementation{Name: "bounds-client", Version: "1"}, opts)
	cs, err := client.Connect(context.Background(), &mcp.StreamableClientTransport{
		Endpoint:   "http://" + s.addr + Path,
		HTTPClient: &http.Client{Transport: rt},
		MaxRetries: -1, // a cut stream must show, not be reopened behind the test's back
	}, nil)
	if err != nil {
		t.Fatalf("connect: %v", err)
	}
	t.Cleanup(func() { cs.Close() })
	return cs, rt
}

// callWait calls the wait tool and fails the test unless it answers
// "waited".
func callWait(t *testing.T, cs *mcp.ClientSession, d time.Duration) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), d+10*time.Second)
	defer cancel()
	res, err := cs.CallTool(ctx, &mcp.CallToolParams{Name: "wait", Arguments: map[string]any{"millis": d.Milliseconds()}})
	if err != nil {
		t.Fatalf("wait %v: %v", d, err)
	}
	if text := res.Content[0].(*mcp.TextContent).Text; res.IsError || text != "waited" {
		t.Fatalf("wait %v: isError %v, %q", d, res.IsError, text)
	}
}

// trickle connects to addr, writes head at once and then rest one byte
// every gap, and reports how long the server kept the connection open: it
// returns when the server closed it (having answered or not), or with an
// error when it was still open after limit.
func trickle(addr, head, rest string, gap, limit time.Duration) (time.Duration, error) {
	conn, err := net.Dial("tcp", addr)
	if err != nil {
		return 0, err
	}
	defer conn.Close()
	start := time.Now()
	closed := make(chan time.Duration, 1)
	go func() {
		io.Copy(io.Discard, conn) // until the server closes, or resets
		closed <- time.Since(start)
	}()
	if _, err := io.WriteString(conn, head); err != nil {
		return 0, err
	}
	tick := time.NewTicker(gap)
	defer tick.Stop()
	deadline := time.After(limit)
	for i := 0; ; i++ {
		select {
		case d := <-closed:
			return d, nil
		case <-deadline:
			return 0, fmt.Errorf("the server kept the connection open for %v, %d bytes in", limit, i)
		case <-tick.C:
			if i < len(rest) {
				conn.Write([]byte{rest[i]}) // an error shows as the reader's end
			}
		}
	}
}

// postHead is the head of an MCP POST whose body will be long.
func postHead(addr string, token bool, length int) string {
	var b strings.Builder
	fmt.Fprintf(&b, "POST %s HTTP/1.1\r\nHost: %s\r\nContent-Type: application/json\r\nAccept: application/json, text/event-stream\r\n", Path, addr)
	if token {
		fmt.Fprintf(&b, "Authorization: Bearer %s\r\n", boundsToken)
	}
	fmt.Fprintf(&b, "Content-Length: %d\r\n\r\n", length)
	return b.String()
}

// A request whose headers or body trickle in is cut off once its bound
// has passed, whether it carries a valid token or none: an authenticated
// client held 200 connections open for 40 s and more, sending a byte
// every 2 s.
func TestRunHTTP_CutsOffARequestThatTrickles(t *testing.T) {
	t.Parallel()
	const bound = 400 * time.Millisecond
	s := startBoundsServer(t, HTTPOptions{HeaderTimeout: bound, BodyTimeout: bound})
	body := `{"jsonrpc":"2.0","id":1,"method":"initialize","params":{}}` + strings.Repeat(" ", 4000)
	for _, tc := range []struct {
		name, head, rest string
	}{
		{"headers", "POST " + Path + " HTTP/1.1\r\nHost: " + s.addr + "\r\n", "X-Slow: " + strings.Repeat("a", 4000)},
		{"body with a token", postHead(s.addr, true, len(body)), body},
		{"body without a token", postHead(s.addr, false, len(body)), body},
	} {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			took, err := trickle(s.addr, tc.head, tc.rest, 20*time.Millisecond, 10*time.Second)
			if err != nil {
				t.Fatal(err)
			}
			if took < bound-50*time.Millisecond || took > bound+3*time.Second {
				t.Errorf("the server closed the connection after %v, want soon after the bound of %v", took, bound)
			}
		})
	}
}

// A body larger than MaxBodyBytes is refused with 413.
func TestRunHTTP_RefusesABodyOverMaxBodyBytes(t *testing.T) {
	t.Parallel()
	s := startBoundsServer(t, HTTPOptions{MaxBodyBytes: 1000})
	post := func(size int) int {
		t.Helper()
		body := `{"jsonrpc":"2.0","id":1,"method":"tools/list","params":{}}`
		body += strings.Repeat(" ", size-len(body))
		req, _ := http.NewRequest("POST", "http://"+s.addr+Path, strings.NewReader(body))
		req.Header.Set("Content-Type", "application/json")
		req.Header.Set("Accept", "application/json, text/event-stream")
		req.Header.Set("Authorization", "Bearer "+boundsToken)
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		resp.Body.Close()
		return resp.StatusCode
	}
	if got := post(1001); got != http.StatusRequestEntityTooLarge {
		t.Errorf("a body of 1001 bytes: status %d, want 413", got)
	}
	// Within the bound the request gets as far as the session check.
	if got := post(1000); got == http.StatusRequestEntityTooLarge {
		t.Errorf("a body of 1000 bytes: status %d", got)
	}
}

// The body deadline ends with the body: a tool call whose answer takes
// several times the bound is answered, and the event stream a session
// opens with GET stays open, idle, for several times the bound and then
// delivers a notification.
func TestRunHTTP_SessionOutlivesTheBodyTimeout(t *testing.T) {
	t.Parallel()
	const bound = 200 * time.Millisecond
	s := startBoundsServer(t, HTTPOptions{BodyTimeout: bound})
	changed := make(chan struct{}, 10)
	cs, rt := s.connect(t, &mcp.ClientOptions{ToolListChangedHandler: func(context.Context, *mcp.ToolListChangedRequest) {
		changed <- struct{}{}
	}})
	for start := time.Now(); rt.count("GET") == 0; time.Sleep(10 * time.Millisecond) {
		if time.Since(start) > 10*time.Second {
			t.Fatal("the client opened no event stream")
		}
	}

	callWait(t, cs, 5*bound)
	time.Sleep(5 * bound)
	s.server.AddTool(&mcp.Tool{Name: "late", InputSchema: map[string]any{"type": "object"}}, func(context.Context, *mcp.CallToolRequest) (*mcp.CallToolResult, error) {
		return &mcp.CallToolResult{}, nil
	})
	select {
	case <-changed:
	case <-time.After(10 * time.Second):
		t.Fatal("the tools/list_changed notification never arrived on the event stream")
	}
	if got := rt.count("GET"); got != 1 {
		t.Errorf("the client opened %d event streams, want 1 (the first was cut)", got)
	}
	callWait(t, cs, 0)
}

// 200 connections trickling their bodies keep the server from nothing: a
// client with a session is answered meanwhile, while every one of them is
// still connected, and each is cut off at its bound.
func TestRunHTTP_TricklingConnectionsDoNotStarveAClient(t *testing.T) {
	t.Parallel()
	const bound, tricklers = 4 * time.Second, 200
	s := startBoundsServer(t, HTTPOptions{BodyTimeout: bound})
	cs, _ := s.connect(t, nil)

	body := `{"jsonrpc":"2.0","id":1,"method":"tools/list","params":{}}` + strings.Repeat(" ", 4000)
	var wg sync.WaitGroup
	var cut atomic.Int64
	errs := make(chan error, tricklers)
	for range tricklers {
		wg.Go(func() {
			took, err := trickle(s.addr, postHead(s.addr, true, len(body)), body, 100*time.Millisecond, bound+10*time.Second)
			switch {
			case err != nil:
				errs <- err
			case took < bound-50*time.Millisecond:
				errs <- fmt.Errorf("cut off after %v, before the bound of %v", took, bound)
			default:
				cut.Add(1)
			}
		})
	}
	time.Sleep(bound / 8) // every trickler connected and sending
	start := time.Now()
	for range 5 {
		callWait(t, cs, 0)
	}
	if took, n := time.Since(start), cut.Load(); n > 0 || took > bound/2 {
		t.Errorf("5 calls beside %d trickling connections took %v, and %d of those connections were cut off meanwhile; want the calls answered well within the bound of %v", tricklers, took, n, bound)
	}
	wg.Wait()
	close(errs)
	shown := 0
	for err := range errs {
		if shown++; shown <= 5 {
			t.Error(err)
		}
	}
	if cut.Load() != tricklers {
		t.Errorf("%d of %d trickling connections were cut off at the bound", cut.Load(), tricklers)
	}
}
