package serve

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"net"
	"net/http"
	"net/netip"
	"strings"
	"sync"
	"time"

	"github.com/modelcontextprotocol/go-sdk/auth"
	"github.com/modelcontextprotocol/go-sdk/mcp"
)

// Path is where [RunHTTP] serves the Streamable HTTP endpoint.
const Path = "/mcp"

// DefaultSessionTimeout is how long a stateful HTTP session may sit idle
// before the server forgets it, unless HTTPOptions.SessionTimeout says
// otherwise.
const DefaultSessionTimeout = 30 * time.Minute

// HTTPOptions configure [HTTPHandler] and [RunHTTP].
type HTTPOptions struct {
	// Verifier checks every request's bearer token and says who presented
	// it; it is required. The TokenInfo it returns must have a UserID (the
	// identity that [ScopeFromRequest] and [PrincipalFromRequest] read) and
	// an Expiration. Use (*Tokens).Verify for a token file, or a function
	// of your own that asks your identity provider.
	Verifier auth.TokenVerifier
	// Stateless serves every request on its own, with no session to keep:
	// any replica behind a load balancer can take any request, without
	// sticky sessions. The server then cannot send requests to the client
	// (no elicitation on protocols before 2026-07-28, no sampling), and the
	// Guard keys session runs by the principal. See docs/deploy.md.
	Stateless bool
	// SessionTimeout is how long an idle stateful session is kept (default
	// DefaultSessionTimeout). Ignored when Stateless.
	SessionTimeout time.Duration
	// AllowedHosts are the names a request's Host header may carry, besides
	// localhost and loopback addresses, when the request arrives on a
	// loopback address. A request arriving on loopback that names any other
	// host is refused with 403: that is how a DNS rebinding attack looks
	// (a web page whose name now resolves to 127.0.0.1). A TLS proxy on the
	// same host that forwards the public name ("mcp.example.com") needs it
	// listed here. Requests arriving on other addresses are not checked.
	AllowedHosts []string
	// Logger receives a record when the server starts and stops serving.
	// Nil discards.
	Logger *slog.Logger
}

// HTTPHandler returns the Streamable HTTP handler for server, behind a
// bearer-token check: a request without a token the Verifier accepts gets
// 401 and never reaches the server. Mount it where clients will find it,
// usually at [Path]:
//
//	mux.Handle(serve.Path, serve.HTTPHandler(server, serve.HTTPOptions{Verifier: tokens.Verify}))
//
// It panics if opts.Verifier is nil: an MCP endpoint that makes changes
// must know who calls it (a verifier that trusts a proxy in front is the
// way to say that the proxy authenticates).
func HTTPHandler(server *mcp.Server, opts HTTPOptions) http.Handler {
	if opts.Verifier == nil {
		panic("serve.HTTPHandler: HTTPOptions.Verifier is nil; every HTTP caller must present a bearer token")
	}
	timeout := opts.SessionTimeout
	if timeout == 0 {
		timeout = DefaultSessionTimeout
	}
	// The SDK's own DNS rebinding check knows no allowed names: hostCheck
	// does the same with AllowedHosts.
	sopts := &mcp.StreamableHTTPOptions{Stateless: opts.Stateless, DisableLocalhostProtection: true}
	if !opts.Stateless {
		sopts.SessionTimeout = timeout
	}
	h := mcp.NewStreamableHTTPHandler(func(*http.Request) *mcp.Server { return server }, sopts)
	return hostCheck(opts.AllowedHosts, auth.RequireBearerToken(opts.Verifier, nil)(h))
}

// hostCheck refuses, with 403, a request that arrived on a loopback
// address but names a host in its Host header that is neither loopback nor
// allowed.
func hostCheck(allowed []string, next http.Handler) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		local, _ := r.Context().Value(http.LocalAddrContextKey).(net.Addr)
		if local != nil && isLoopback(local.String()) && !isLoopback(r.Host) && !hostListed(r.Host, allowed) {
			http.Error(w, "Forbidden: the Host header names neither this machine nor an allowed host (--allowed-hosts)", http.StatusForbidden)
			return
		}
		next.ServeHTTP(w, r)
	})
}

// hostOnly is hostport without its port.
func hostOnly(hostport string) string {
	if h, _, err := net.SplitHostPort(hostport); err == nil {
		return h
	}
	return strings.TrimSuffix(strings.TrimPrefix(hostport, "["), "]")
}

// isLoopback reports whether hostport names localhost or a loopback
// address.
func isLoopback(hostport string) bool {
	h := hostOnly(hostport)
	if strings.EqualFold(h, "localhost") {
		return true
	}
	ip, err := netip.ParseAddr(h)
	return err == nil && ip.Unmap().IsLoopback()
}

func hostListed(hostport string, allowed []string) bool {
	h := strings.TrimSuffix(hostOnly(hostport), ".")
	for _, a := range allowed {
		if strings.EqualFold(h, strings.TrimSuffix(a, ".")) {
			return true
		}
	}
	return false
}

// Listen opens a TCP listener on addr ("127.0.0.1:8080"; port 0 picks a
// free port). Unless allowRemote is set it refuses an address that is not
// loopback, including ":8080" (every interface), and checks what was
// actually bound, since "localhost" may resolve to anything: an MCP server
// speaks plain HTTP, so its bearer tokens and every change would cross the
// network unencrypted. Put a TLS-terminating proxy in front before
// allowing remote addresses.
func Listen(addr string, allowRemote bool) (net.Listener, error) {
	if err := checkListenAddr(addr, allowRemote); err != nil {
		return nil, err
	}
	ln, err := net.Listen("tcp", addr)
	if err != nil {
		return nil, err
	}
	if ap, err := netip.ParseAddrPort(ln.Addr().String()); !allowRemote && (err != nil || !ap.Addr().Unmap().IsLoopback()) {
		ln.Close()
		return nil, fmt.Errorf("%s bound %s, which is not a loopback address; %s", addr, ln.Addr(), remoteAdvice)
	}
	return ln, nil
}

// RunHTTP serves server over Streamable HTTP at [Path] on ln (see
// [HTTPHandler]) until ctx is done, then shuts down gracefully: it stops
// accepting connections, ends the open sessions (whose event streams would
// otherwise hold the shutdown) and waits up to five seconds for the calls
// in flight. It returns nil after a shutdown that ctx asked for.
//
//	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
//	defer stop()
//	ln, err := serve.Listen("127.0.0.1:8080", false)
//	…
//	err = serve.RunHTTP(ctx, ln, server, serve.HTTPOptions{Verifier: tokens.Verify})
func RunHTTP(ctx context.Context, ln net.Listener, server *mcp.Server, opts HTTPOptions) error {
	log := opts.Logger
	if log == nil {
		log = slog.New(slog.DiscardHandler)
	}
	mux := http.NewServeMux()
	mux.Handle(Path, HTTPHandler(server, opts))
	// No WriteTimeout: an event stream stays open for as long as a call runs.
	srv := &http.Server{Handler: mux, ReadHeaderTimeout: 10 * time.Second, IdleTimeout: 2 * time.Minute, MaxHeaderBytes: 64 << 10}
	// Shutdown waits for active connections, and treats a connection that
	// has not yet sent a request as active for its first five seconds: a
	// client's spare keep-alive connection would hold the shutdown that
	// long. Such connections are closed with the listener, and the open
	// sessions are ended, whose event streams would hold it too.
	var fresh freshConns
	srv.ConnState = fresh.track
	srv.RegisterOnShutdown(func() {
		fresh.closeAll()
		for ss := range server.Sessions() {
			ss.Close()
		}
	})
	log.Info("serving Streamable HTTP", "url", "http://"+ln.Addr().String()+Path, "stateless", opts.Stateless)
	errc := make(chan error, 1)
	go func() { errc <- srv.Serve(ln) }()
	select {
	case err := <-errc:
		return err
	case <-ctx.Done():
		log.Info("shutting down")
		shutdown, cancel := context.WithTimeout(context.WithoutCancel(ctx), 5*time.Second)
		defer cancel()
		err := srv.Shutdown(shutdown)
		if errors.Is(err, context.DeadlineExceeded) {
			return srv.Close()
		}
		return err
	}
}

// freshConns are the connections that have not yet sent a request.
type freshConns struct {
	mu    sync.Mutex
	conns map[net.Conn]struct{}
}

func (f *freshConns) track(c net.Conn, state http.ConnState) {
	f.mu.Lock()
	defer f.mu.Unlock()
	if state != http.StateNew {
		delete(f.conns, c)
		return
	}
	if f.conns == nil {
		f.conns = map[net.Conn]struct{}{}
	}
	f.conns[c] = struct{}{}
}

func (f *freshConns) closeAll() {
	f.mu.Lock()
	defer f.mu.Unlock()
	for c := range f.conns {
		c.Close()
	}
}

const remoteAdvice = "this server speaks plain HTTP, so bearer tokens and every change would cross the network " +
	"unencrypted, and anyone who can reach the port could try tokens. Bind 127.0.0.1 or [::1], " +
	"or put a TLS-terminating proxy in front and allow remote addresses (--allow-remote)"

// checkListenAddr refuses an address that is not loopback unless the
// operator allowed it.
func checkListenAddr(addr string, allowRemote bool) error {
	host, _, err := net.SplitHostPort(addr)
	if err != nil {
		return fmt.Errorf("listen address %q: %v", addr, err)
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
	return fmt.Errorf("refusing to listen on %s (%s is not a loopback address): %s", addr, host, remoteAdvice)
}
