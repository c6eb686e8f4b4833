package main

import (
	"bytes"
	"context"
	"crypto/rand"
	"encoding/hex"
	"fmt"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"time"

	"github.com/modelcontextprotocol/go-sdk/mcp"
)

// mcpExample is an example server that --mcp drives, and how.
type mcpExample struct {
	op string // "ordinary" or "tx", as in the Go API tables
	// commits is what a cycle (preview + apply + undo) commits, as the Go
	// API measurement counts them for the operation's kind.
	commits int
	// read is a read-only tool: its round trip is the SDK's own cost.
	read string
	// preview is the tool that previews a change.
	preview string
	// prepare readies a fresh server for cycles and returns the arguments
	// of the preview of cycle n.
	prepare func(ctx context.Context, s *mcpServer) (func(n int) map[string]any, error)
}

// mcpExamples are the examples --mcp can drive, by name under examples/.
var mcpExamples = map[string]mcpExample{
	// settings keeps its state in memory: only the ledger is on disk.
	"settings": {op: "ordinary", commits: 5, read: "get_settings", preview: "preview_set_setting",
		prepare: func(context.Context, *mcpServer) (func(int) map[string]any, error) {
			return func(n int) map[string]any { return map[string]any{"key": "theme", "value": "v" + strconv.Itoa(n)} }, nil
		}},
	// tickets keeps its tickets in the ledger's database: its operations
	// are transactional.
	"tickets": {op: "tx", commits: 3, read: "list_tickets", preview: "preview_update_ticket", prepare: prepareTicket},
}

// prepareTicket creates the one ticket whose title the cycles change (an
// undo puts the ticket back as it was, version included).
func prepareTicket(ctx context.Context, s *mcpServer) (func(int) map[string]any, error) {
	p, err := s.call(ctx, "", "preview_create_ticket", map[string]any{"title": "bench"})
	if err != nil {
		return nil, err
	}
	if _, err := s.call(ctx, "", "apply_change", applyArgs(p)); err != nil {
		return nil, err
	}
	l, err := s.call(ctx, "", "list_tickets", nil)
	if err != nil {
		return nil, err
	}
	tickets, _ := l["tickets"].([]any)
	if len(tickets) != 1 {
		return nil, fmt.Errorf("list_tickets: want the one ticket just created, got %d", len(tickets))
	}
	id := tickets[0].(map[string]any)["id"]
	return func(n int) map[string]any {
		return map[string]any{"id": id, "title": "t" + strconv.Itoa(n), "status": "open"}
	}, nil
}

func applyArgs(preview map[string]any) map[string]any {
	return map[string]any{"change_id": preview["change_id"], "confirmation_token": preview["confirmation_token"]}
}

// buildExamples compiles the examples named into dir and returns their
// binaries by name. It needs the go command and this module's source.
func buildExamples(ctx context.Context, dir string, names []string) (map[string]string, error) {
	args := []string{"build", "-o", dir + string(filepath.Separator)}
	bins := map[string]string{}
	for _, name := range names {
		args = append(args, "github.com/mcp-changeset/changeset-go/examples/"+name)
		bins[name] = filepath.Join(dir, name)
	}
	out, err := exec.CommandContext(ctx, "go", args...).CombinedOutput()
	if err != nil {
		return nil, fmt.Errorf("go build of the examples (run from within the module): %v\n%s", err, out)
	}
	return bins, nil
}

// newBearerToken writes a token file with one random token to dir and
// returns the token and the file.
func newBearerToken(dir string) (token, file string, err error) {
	b := make([]byte, 32)
	rand.Read(b)
	token, file = hex.EncodeToString(b), filepath.Join(dir, "tokens")
	return token, file, os.WriteFile(file, []byte(token+" bench\n"), 0o600)
}

// mcpServer is one example server process and the go-sdk client session
// driving it, or, for the profile, a server in this process (cmd nil).
type mcpServer struct {
	ex      mcpExample
	session *mcp.ClientSession
	cmd     *exec.Cmd
	log     *logTail
	exited  chan struct{} // http: closed when the process has exited
	args    func(n int) map[string]any
	n       int
	// lat is the µs of each timed call, by kind: preview, apply, undo,
	// read.
	lat map[string][]int64
}

// startServer starts the example bin on the ledger at ledgerPath over
// transport ("stdio" or "http"), connects a client and prepares it for
// cycles. HTTP callers present token, which tokenFile holds.
func startServer(ctx context.Context, ex mcpExample, bin, transport, ledgerPath, tokenFile, token string) (*mcpServer, error) {
	s := &mcpServer{ex: ex, log: &logTail{url: make(chan string, 1)}, lat: map[string][]int64{}}
	args := []string{"--ledger", ledgerPath, "--durability", durability.String()}
	if transport == "http" {
		args = append(args, "--http", "127.0.0.1:0", "--auth-token-file", tokenFile)
	}
	s.cmd = exec.Command(bin, args...)
	s.cmd.Env = append(os.Environ(), "MCP_CHANGESET_LEDGER=", "MCP_CHANGESET_WRITE_MODE=guarded")
	s.cmd.Stderr = s.log
	var t mcp.Transport = &mcp.CommandTransport{Command: s.cmd}
	if transport == "http" {
		if err := s.cmd.Start(); err != nil {
			return nil, err
		}
		s.exited = make(chan struct{})
		go func() { s.cmd.Wait(); close(s.exited) }()
		var url string
		select {
		case url = <-s.log.url:
		case <-s.exited:
			return nil, fmt.Errorf("the server exited before listening: %s", s.log)
		case <-time.After(30 * time.Second):
			s.close()
			return nil, fmt.Errorf("the server printed no URL within 30 s: %s", s.log)
		}
		t = &mcp.StreamableClientTransport{Endpoint: url, MaxRetries: -1,
			HTTPClient: &http.Client{Transport: bearer{token, http.DefaultTransport}}}
	}
	if err := s.connect(ctx, t); err != nil {
		s.close()
		return nil, err
	}
	return s, nil
}

// connect connects a client through t, prepares the server for cycles
// and warms it up.
func (s *mcpServer) connect(ctx context.Context, t mcp.Transport) error {
	cctx, cancel := context.WithTimeout(ctx, 30*time.Second)
	defer cancel()
	cs, err := mcp.NewClient(&mcp.Implementation{Name: "changeset-bench", Version: "1"}, nil).Connect(cctx, t, nil)
	if err != nil {
		return fmt.Errorf("connect: %w (server log: %s)", err, s.log)
	}
	s.session = cs
	if s.args, err = s.ex.prepare(ctx, s); err != nil {
		return err
	}
	for range 10 {
		if err := s.cycle(ctx); err != nil {
			return err
		}
		if _, err := s.call(ctx, "read", s.ex.read, nil); err != nil {
			return err
		}
	}
	clear(s.lat)
	return nil
}

// call calls tool and returns its structured result; a tool error is an
// error. kind, unless empty, files the call's latency under it.
func (s *mcpServer) call(ctx context.Context, kind, tool string, args map[string]any) (map[string]any, error) {
	start := time.Now()
	res, err := s.session.CallTool(ctx, &mcp.CallToolParams{Name: tool, Arguments: args})
	if kind != "" {
		s.lat[kind] = append(s.lat[kind], time.Since(start).Microseconds())
	}
	if err != nil {
		return nil, fmt.Errorf("%s: %w (server log: %s)", tool, err, s.log)
	}
	if res.IsError {
		var text []string
		for _, c := range res.Content {
			if tc, ok := c.(*mcp.TextContent); ok {
				text = append(text, tc.Text)
			}
		}
		return nil, fmt.Errorf("%s refused: %s", tool, strings.Join(text, " "))
	}
	out, _ := res.StructuredContent.(map[string]any)
	return out, nil
}

// cycle previews, applies and undoes one change.
func (s *mcpServer) cycle(ctx context.Context) error {
	s.n++
	p, err := s.call(ctx, "preview", s.ex.preview, s.args(s.n))
	if err != nil {
		return err
	}
	a, err := s.call(ctx, "apply", "apply_change", applyArgs(p))
	if err != nil {
		return err
	}
	_, err = s.call(ctx, "undo", "undo_change", map[string]any{"change_id": p["change_id"], "undo_token": a["undo_token"]})
	return err
}

// pid is the server's process ID, or 0 for a server in this process.
func (s *mcpServer) pid() int {
	if s.cmd == nil || s.cmd.Process == nil {
		return 0
	}
	return s.cmd.Process.Pid
}

// close ends the session and the process. Closing a stdio session ends
// its process; an HTTP server gets SIGTERM.
func (s *mcpServer) close() {
	if s.session != nil {
		s.session.Close()
	}
	if s.exited == nil {
		return
	}
	s.cmd.Process.Signal(syscall.SIGTERM)
	select {
	case <-s.exited:
	case <-time.After(10 * time.Second):
		s.cmd.Process.Kill()
		<-s.exited
	}
}

// bearer adds "Authorization: Bearer token" to every request.
type bearer struct {
	token string
	next  http.RoundTripper
}

func (b bearer) RoundTrip(req *http.Request) (*http.Response, error) {
	req = req.Clone(req.Context())
	req.Header.Set("Authorization", "Bearer "+b.token)
	return b.next.RoundTrip(req)
}

// logTail is a server's standard error: it keeps the last few KiB, for
// error messages, and passes on the URL an HTTP server prints.
type logTail struct {
	mu   sync.Mutex
	buf  []byte
	url  chan string
	sent bool
}

const urlLine = "listening on "

func (l *logTail) Write(p []byte) (int, error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	l.buf = append(l.buf, p...)
	if !l.sent {
		if i := bytes.Index(l.buf, []byte(urlLine)); i >= 0 {
			if j := bytes.IndexByte(l.buf[i:], '\n'); j >= 0 {
				l.url <- strings.TrimSpace(string(l.buf[i+len(urlLine) : i+j]))
				l.sent = true
			}
		}
	}
	if l.sent && len(l.buf) > 64<<10 {
		l.buf = append([]byte(nil), l.buf[len(l.buf)-4<<10:]...)
	}
	return len(p), nil
}

// String is the last lines written, at most about 1 KiB.
func (l *logTail) String() string {
	l.mu.Lock()
	defer l.mu.Unlock()
	b := l.buf[max(0, len(l.buf)-1024):]
	return strings.TrimSpace(string(b))
}
