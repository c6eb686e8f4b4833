package serve

import (
	"bufio"
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"os"
	"sync"
	"sync/atomic"

	"github.com/modelcontextprotocol/go-sdk/jsonrpc"
	"github.com/modelcontextprotocol/go-sdk/mcp"
)

// Limits a [LineTransport] applies unless told otherwise.
const (
	// DefaultMaxLineBytes is the longest line read, 4 MiB: far more than
	// any tool call needs, small enough that a client cannot make the
	// server hold much memory per line.
	DefaultMaxLineBytes = 4 << 20
	// DefaultMaxDepth is the deepest nesting of arrays and objects in a
	// line. A tool call's arguments sit three levels down (message, params,
	// arguments); 128 leaves room for any real payload.
	DefaultMaxDepth = 128
)

// A LineTransport is an [mcp.Transport] over a byte stream that carries
// one JSON-RPC message per line, as MCP's stdio transport does. Unlike
// mcp.IOTransport, a line it cannot serve ends nothing: the line is
// answered with a JSON-RPC error on Writer and the next line is read (see
// the package documentation for which lines and which answers).
//
// Use [Stdio] for a server's standard input and output. The zero limits
// select the defaults. A LineTransport carries one session: Connect may be
// called once.
type LineTransport struct {
	// Reader is where messages come from; Writer is where messages and the
	// answers to bad lines go. Closing the connection closes both.
	Reader io.ReadCloser
	Writer io.WriteCloser
	// MaxLineBytes bounds a line, without its terminator; a longer line is
	// skipped without being held in memory and answered with an error.
	// Zero means DefaultMaxLineBytes.
	MaxLineBytes int
	// MaxDepth bounds the nesting of arrays and objects in a line. Zero
	// means DefaultMaxDepth.
	MaxDepth int
	// Logger, if set, gets one warning per refused line: its number, size
	// and why, never its content (which may hold a token).
	Logger *slog.Logger

	connected atomic.Bool
}

// Stdio returns a transport over the process's standard input and output,
// for a server that a client starts as a subprocess. Standard output then
// belongs to the transport: log to standard error.
func Stdio() *LineTransport {
	return &LineTransport{Reader: os.Stdin, Writer: nopCloser{os.Stdout}}
}

// nopCloser keeps the connection from closing standard output, which the
// process may still write to as it exits.
type nopCloser struct{ io.Writer }

func (nopCloser) Close() error { return nil }

// Connect starts reading t.Reader and returns the connection. It
// implements [mcp.Transport].
func (t *LineTransport) Connect(ctx context.Context) (mcp.Connection, error) {
	if t.Reader == nil || t.Writer == nil {
		return nil, errors.New("serve: a LineTransport needs a Reader and a Writer")
	}
	if !t.connected.CompareAndSwap(false, true) {
		return nil, errors.New("serve: LineTransport.Connect was called twice; a stream carries one session, so make a new transport")
	}
	c := &lineConn{
		in:       t.Reader,
		out:      &lineWriter{w: t.Writer},
		maxLine:  orDefault(t.MaxLineBytes, DefaultMaxLineBytes),
		maxDepth: orDefault(t.MaxDepth, DefaultMaxDepth),
		log:      t.Logger,
		incoming: make(chan msgOrErr),
		closed:   make(chan struct{}),
	}
	if c.log == nil {
		c.log = slog.New(slog.DiscardHandler)
	}
	go c.readLoop()
	return c, nil
}

func orDefault(v, def int) int {
	if v <= 0 {
		return def
	}
	return v
}

type msgOrErr struct {
	msg jsonrpc.Message
	err error
}

// lineConn is the [mcp.Connection] a LineTransport makes. A goroutine
// reads and checks the lines (readLoop) and hands messages to Read over
// incoming, so that Close can unblock a Read that waits for input.
type lineConn struct {
	in                io.ReadCloser
	out               *lineWriter
	maxLine, maxDepth int
	log               *slog.Logger

	incoming  chan msgOrErr
	closeOnce sync.Once
	closed    chan struct{}
	closeErr  error
}

// Read returns the next message that passed the checks. It fails only
// when the input ended (io.EOF), a read failed, or the connection closed.
func (c *lineConn) Read(ctx context.Context) (jsonrpc.Message, error) {
	select {
	case <-ctx.Done():
		return nil, ctx.Err()
	case v := <-c.incoming:
		return v.msg, v.err
	case <-c.closed:
		return nil, io.EOF
	}
}

// Write sends msg as one line. It is safe for concurrent use, also with
// the answers readLoop writes.
func (c *lineConn) Write(ctx context.Context, msg jsonrpc.Message) error {
	if err := ctx.Err(); err != nil {
		return err
	}
	data, err := jsonrpc.EncodeMessage(msg)
	if err != nil {
		return fmt.Errorf("serve: encoding a JSON-RPC message: %w", err)
	}
	return c.out.writeLine(data)
}

// Close closes the reader and the writer. Closing the reader is what ends
// a readLoop blocked in Read, where the platform allows it (a terminal or
// pipe on standard input may keep it blocked until the process exits, as
// with mcp.StdioTransport).
func (c *lineConn) Close() error {
	c.closeOnce.Do(func() {
		close(c.closed)
		c.closeErr = errors.Join(c.in.Close(), c.out.close())
	})
	return c.closeErr
}

// SessionID implements [mcp.Connection]: a stream has no session id.
func (c *lineConn) SessionID() string { return "" }

// readLoop reads lines until the input ends, delivering each message that
// passes decodeLine and answering each line that does not.
func (c *lineConn) readLoop() {
	br := bufio.NewReaderSize(c.in, 64<<10)
	for n := 1; ; n++ {
		// Each line gets a buffer of its own: the decoded message may
		// share its bytes (a request's params) while it is being served.
		line, size, tooLong, err := readLine(br, nil, c.maxLine)
		line = bytes.Trim(line, " \t\r\n")
		switch {
		case tooLong:
			c.refuse(n, size, invalidRequest(nil, "line %d is longer than %d bytes, the most this server reads; it was skipped", n, c.maxLine))
		case len(line) > 0:
			msg, r := decodeLine(line, n, c.maxDepth)
			if r != nil {
				c.refuse(n, size, r)
			} else if !c.deliver(msgOrErr{msg: msg}) {
				return
			}
		}
		if err != nil {
			c.deliver(msgOrErr{err: err})
			return
		}
	}
}

// deliver hands v to Read, or reports false once the connection closed.
func (c *lineConn) deliver(v msgOrErr) bool {
	select {
	case c.incoming <- v:
		return true
	case <-c.closed:
		return false
	}
}

// refuse answers a line that is not served.
func (c *lineConn) refuse(n int, size int64, r *rejection) {
	c.log.Warn("refused a line of input with a JSON-RPC error; still serving", "line", n, "bytes", size, "code", r.code, "reason", r.message)
	select {
	case <-c.closed:
		return
	default:
	}
	if err := c.out.writeLine(r.response()); err != nil {
		c.log.Warn("could not answer a bad line", "line", n, "err", err)
	}
}

// readLine reads one line into buf and returns it with its terminator.
// size counts every byte of the line. A line longer than max (not counting
// "\n" or "\r\n") is read to its end but not kept: tooLong is set and line
// is empty. At the end of input, err is io.EOF and line holds what came
// after the last newline, if anything.
func readLine(br *bufio.Reader, buf []byte, max int) (line []byte, size int64, tooLong bool, err error) {
	for {
		chunk, err := br.ReadSlice('\n')
		size += int64(len(chunk))
		if !tooLong {
			if len(buf)+len(chunk) > max+2 {
				tooLong, buf = true, nil
			} else {
				buf = append(buf, chunk...)
			}
		}
		if errors.Is(err, bufio.ErrBufferFull) {
			continue
		}
		if !tooLong && len(bytes.TrimRight(buf, "\r\n")) > max {
			tooLong, buf = true, nil
		}
		return buf, size, tooLong, err
	}
}

// lineWriter writes whole lines to w, one at a time, so that an answer to
// a bad line never lands inside one of the server's messages.
type lineWriter struct {
	mu sync.Mutex
	w  io.WriteCloser
}

// writeLine writes data and a newline in one Write.
func (w *lineWriter) writeLine(data []byte) error {
	line := make([]byte, 0, len(data)+1)
	line = append(append(line, data...), '\n')
	w.mu.Lock()
	defer w.mu.Unlock()
	_, err := w.w.Write(line)
	return err
}

func (w *lineWriter) close() error {
	w.mu.Lock()
	defer w.mu.Unlock()
	return w.w.Close()
}
