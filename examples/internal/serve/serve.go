// Package serve holds what every example server shares: the common flags,
// the default ledger location, and running an MCP server over stdio or
// Streamable HTTP until it is told to stop.
package serve

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"log/slog"
	"net"
	"net/http"
	"os"
	"os/signal"
	"path/filepath"
	"syscall"
	"time"

	"github.com/modelcontextprotocol/go-sdk/mcp"
)

// Flags are the flags every example takes.
type Flags struct {
	Ledger string // --ledger
	HTTP   string // --http
}

// Register adds the common flags to fs. name is the example's name, used
// for the default ledger file.
func (f *Flags) Register(fs *flag.FlagSet, name string) {
	fs.StringVar(&f.Ledger, "ledger", DefaultLedger(name),
		"ledger `path` (default: $MCP_CHANGESET_LEDGER, else a file under the user's state directory)")
	fs.StringVar(&f.HTTP, "http", "", "serve Streamable HTTP on `addr` (e.g. 127.0.0.1:8080) instead of stdio")
}

// DefaultLedger is $MCP_CHANGESET_LEDGER, or name.db under the user's state
// directory ($XDG_STATE_HOME, else ~/.local/state) in mcp-changeset/.
func DefaultLedger(name string) string {
	if p := os.Getenv("MCP_CHANGESET_LEDGER"); p != "" {
		return p
	}
	dir := os.Getenv("XDG_STATE_HOME")
	if dir == "" {
		home, err := os.UserHomeDir()
		if err != nil {
			return name + ".db"
		}
		dir = filepath.Join(home, ".local", "state")
	}
	return filepath.Join(dir, "mcp-changeset", name+".db")
}

// EnsureDir creates the directory of a ledger file, so that the default
// location works on a fresh machine.
func EnsureDir(ledgerPath string) error {
	return os.MkdirAll(filepath.Dir(ledgerPath), 0o700)
}

// Logger writes to stderr: stdout belongs to the MCP stdio transport.
func Logger() *slog.Logger {
	return slog.New(slog.NewTextHandler(os.Stderr, &slog.HandlerOptions{Level: slog.LevelInfo}))
}

// Run serves server over stdio, or over Streamable HTTP when f.HTTP is set,
// until the client disconnects or the process receives SIGINT or SIGTERM.
func Run(server *mcp.Server, f Flags, log *slog.Logger) error {
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stop()
	if f.HTTP == "" {
		err := server.Run(ctx, &mcp.StdioTransport{})
		if errors.Is(err, context.Canceled) {
			return nil
		}
		return err
	}
	ln, err := net.Listen("tcp", f.HTTP)
	if err != nil {
		return err
	}
	handler := mcp.NewStreamableHTTPHandler(func(*http.Request) *mcp.Server { return server }, nil)
	srv := &http.Server{Handler: handler, ReadHeaderTimeout: 10 * time.Second}
	log.Info("serving Streamable HTTP", "addr", "http://"+ln.Addr().String())
	fmt.Fprintf(os.Stderr, "listening on http://%s\n", ln.Addr())
	errc := make(chan error, 1)
	go func() { errc <- srv.Serve(ln) }()
	select {
	case err := <-errc:
		return err
	case <-ctx.Done():
		shutdown, cancel := context.WithTimeout(context.Background(), 5*time.Second)
		defer cancel()
		return srv.Shutdown(shutdown)
	}
}
