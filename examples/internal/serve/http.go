package serve

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"net"
	"net/http"
	"net/netip"
	"os"
	"os/signal"
	"syscall"
	"time"

	"github.com/mcp-changeset/changeset-go/serve"
	"github.com/modelcontextprotocol/go-sdk/auth"
	"github.com/modelcontextprotocol/go-sdk/mcp"
)

// Path is where the Streamable HTTP endpoint is served.
const Path = "/mcp"

// Run serves server over stdio, or over Streamable HTTP when f.HTTP is set,
// until the client disconnects (stdio) or the process receives SIGINT or
// SIGTERM. Over HTTP every request must carry a bearer token that tokens
// accepts; tokens must not be nil then.
func Run(server *mcp.Server, f Flags, tokens *Tokens, log *slog.Logger) error {
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stop()
	if f.HTTP == "" {
		// Not mcp.StdioTransport: one undecodable line would end it, and
		// the process with it (see package serve).
		stdio := serve.Stdio()
		stdio.Logger = log
		err := server.Run(ctx, stdio)
		if errors.Is(err, context.Canceled) {
			return nil
		}
		return err
	}
	if tokens == nil {
		return errors.New("serving HTTP needs bearer tokens")
	}
	if err := checkListenAddr(f.HTTP, f.AllowRemote); err != nil {
		return err
	}
	ln, err := net.Listen("tcp", f.HTTP)
	if err != nil {
		return err
	}
	// "localhost" might resolve to something else: check what was bound.
	if ap, err := netip.ParseAddrPort(ln.Addr().String()); !f.AllowRemote && (err != nil || !ap.Addr().Unmap().IsLoopback()) {
		ln.Close()
		return fmt.Errorf("--http %s bound %s, which is not a loopback address; %s", f.HTTP, ln.Addr(), remoteAdvice)
	}
	mux := http.NewServeMux()
	mux.Handle(Path, auth.RequireBearerToken(tokens.Verify, nil)(
		mcp.NewStreamableHTTPHandler(func(*http.Request) *mcp.Server { return server },
			&mcp.StreamableHTTPOptions{SessionTimeout: 30 * time.Minute})))
	srv := &http.Server{Handler: mux, ReadHeaderTimeout: 10 * time.Second}
	// A client's open event stream would hold Shutdown for its whole
	// timeout: ending the sessions ends their streams.
	srv.RegisterOnShutdown(func() {
		for ss := range server.Sessions() {
			ss.Close()
		}
	})

	url := "http://" + ln.Addr().String() + Path
	log.Info("serving Streamable HTTP", "url", url, "identities", tokens.Len())
	fmt.Fprintf(os.Stderr, "listening on %s\n", url)
	errc := make(chan error, 1)
	go func() { errc <- srv.Serve(ln) }()
	select {
	case err := <-errc:
		return err
	case <-ctx.Done():
		log.Info("shutting down")
		shutdown, cancel := context.WithTimeout(context.Background(), 5*time.Second)
		defer cancel()
		err := srv.Shutdown(shutdown)
		if errors.Is(err, context.DeadlineExceeded) {
			return srv.Close()
		}
		return err
	}
}

const remoteAdvice = "this server speaks plain HTTP, so bearer tokens and every change would cross the network " +
	"unencrypted, and anyone who can reach the port could try tokens. Bind 127.0.0.1 or [::1], " +
	"or put a TLS-terminating proxy in front and pass --allow-remote"

// checkListenAddr refuses an address that is not loopback unless the
// operator allowed it.
func checkListenAddr(addr string, allowRemote bool) error {
	host, _, err := net.SplitHostPort(addr)
	if err != nil {
		return fmt.Errorf("--http %q: %v", addr, err)
	}
	if allowRemote || host == "localhost" {
		return nil
	}
	if ip, err := netip.ParseAddr(host); err == nil && ip.Unmap().IsLoopback() {
		return nil
	}
	if host == "" {
		host = "every interface"
	}
	return fmt.Errorf("refusing --http %s (%s is not a loopback address): %s", addr, host, remoteAdvice)
}
