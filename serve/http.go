package serve

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"net"
	"net/http"
	"net/netip"
	"sync"
	"time"

	"github.com/mcp-changeset/changeset-go/internal/hostport"
	"github.com/modelcontextprotocol/go-sdk/auth"
	"github.com/modelcontextprotocol/go-sdk/mcp"
)

// Path is where [RunHTTP] serves the Streamable HTTP endpoint.
const Path = "/mcp"

// DefaultSessionTimeout is how long a stateful HTTP session may sit idle
// before the server forgets it, unless HTTPOptions.SessionTimeout says
// otherwise.
const DefaultSessionTimeout = 30 * time.Minute

// Bounds on what one HTTP request may cost the server, unless
// [HTTPOptions] says otherwise. A client that sends its headers or its
// body a byte at a time would otherwise hold a connection, and a
// goroutine, for as long as it likes.
const (
	// DefaultHeaderTimeout is how long [RunHTTP] waits for a request's
	// headers, from the request's first byte (or, on a new connection,
	// from the connection).
	DefaultHeaderTimeout = 10 * time.Second
	// DefaultBodyTimeout is how long [HTTPHandler] waits for a request's
	// whole body, from the end of its headers: 4 MiB at about 140 KB/s.
	DefaultBodyTimeout = 30 * time.Second
	// DefaultMaxBodyBytes is the largest request body [HTTPHandler]
	// reads: a larger one is answered with 413 Request Entity Too Large.
	// It is the go-sdk's own default, and the bound on a stdio line.
	DefaultMaxBodyBytes = mcp.DefaultMaxRequestBodyBytes
)

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
	// HeaderTimeout bounds the time a client may take to send a
	// request's headers (default DefaultHeaderTimeout); a slower one is
	// disconnected. It is the http.Server's ReadHeaderTimeout, so only
	// RunHTTP applies it: set ReadHeaderTimeout on your own server when
	// you mount HTTPHandler yourself.
	HeaderTimeout time.Duration
	// BodyTimeout bounds the time a client may take to send a request's
	// body, from the end of its headers to the body's last byte (default
	// DefaultBodyTimeout); a slower request gets 400 and its connection
	// is closed. It is a read deadline on the connection, which net/http
	// lifts once the body is read, so it never cuts what comes after: a
	// tool call's answer streamed for minutes, or the event stream that a
	// GET opens (which has no body) and keeps open while idle. (An
	// http.Server's WriteTimeout would cut those, which is why RunHTTP
	// sets none.) The deadline needs a ResponseWriter that
	// http.ResponseController can reach: middleware in front of
	// HTTPHandler must implement Unwrap.
	BodyTimeout time.Duration
	// MaxBodyBytes bounds a request's body (default DefaultMaxBodyBytes);
	// a larger one is answered with 413.
	MaxBodyBytes int64
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
// Every request's body must arrive within opts.BodyTimeout, whether the
// request is served or refused (a body that follows a refused token is
// cut off too), and the server reads at most opts.MaxBodyBytes of it.
//
// It panics if opts.Verifier is nil: an MCP endpoint that makes changes
// must know who calls it (a verifier that trusts a proxy in front is the
// way to say that the proxy authenticates).
func HTTPHandler(server *mcp.Server, opts HTTPOptions) http.Handler {
	if opts.Verifier == nil {
		panic("serve.HTTPHandler: HTTPOptions.Verifier is nil; every HTTP caller must present a bearer token")
	}
	opts = opts.withDefaults()
	// The SDK's own DNS rebinding check knows no allowed names: hostCheck
	// does the same with AllowedHosts.
	sopts := &mcp.StreamableHTTPOptions{Stateless: opts.Stateless, DisableLocalhostProtection: true, MaxRequestBodyBytes: opts.MaxBodyBytes}
	if !opts.Stateless {
		sopts.SessionTimeout = opts.SessionTimeout
	}
	h := mcp.NewStreamableHTTPHandler(func(*http.Request) *mcp.Server { return server }, sopts)
	// The body deadline comes first: net/http reads what is left of a
	// refused request's body (up to 256 KB) before it sends the refusal,
	// and the deadline bounds that too.
	return bodyDeadline(opts.BodyTimeout, opts.Logger, hostCheck(opts.AllowedHosts, auth.RequireBearerToken(opts.Verifier, nil)(h)))
}

// withDefaults fills in the zero fields of o.
func (o HTTPOptions) withDefaults() HTTPOptions {
	if o.SessionTimeout <= 0 {
		o.SessionTimeout = DefaultSessionTimeout
	}
	if o.HeaderTimeout <= 0 {
		o.HeaderTimeout = DefaultHeaderTimeout
	}
	if o.BodyTimeout <= 0 {
		o.BodyTimeout = DefaultBodyTimeout
	}
	if o.MaxBodyBytes <= 0 {
		o.MaxBodyBytes = DefaultMaxBodyBytes
	}
	if o.Logger == nil {
		o.Logger = slog.New(slog.DiscardHandler)
	}
	return o
}

// bodyDeadline gives a request with a body until timeout from now to send
// all of it: a read deadline on the connection. net/http lifts it once
// the body has been read (it then keeps a read pending, with no deadline,
// to notice a client that goes away), so it never cuts the answer: a tool
// call's result streamed for minutes. A request without a body (the GET
// of an event stream) gets no deadline at all.
func bodyDeadline(timeout time.Duration, log *slog.Logger, next http.Handler) http.Handler {
	var warn sync.Once
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.Body != nil && r.Body != http.NoBody {
			if err := http.NewResponseController(w).SetReadDeadline(time.Now().Add(timeout)); err != nil {
				warn.Do(func() {
					log.Warn("serve: cannot bound the time a request may take to send its body: the ResponseWriter does not support read deadlines (middleware in front of serve.HTTPHandler must implement Unwrap)", "err", err)
				})
			}
		}
		next.ServeHTTP(w, r)
	})
}

// hostCheck refuses, with 403, a request that arrived on a loopback
// address but names a host in its Host header that is neither loopback nor
// allowed.
func hostCheck(allowed []string, next http.Handler) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		local, _ := r.Context().Value(http.LocalAddrContextKey).(net.Addr)
		if local != nil && hostport.Loopback(local.String()) && !hostport.Loopback(r.Host) && !hostport.Listed(r.Host, allowed) {
			http.Error(w, "Forbidden: the Host header names neither this machine nor an allowed host (--allowed-hosts)", http.StatusForbidden)
			return
		}
		next.ServeHTTP(w, r)
	})
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
// A request's headers must arrive within opts.HeaderTimeout and its body
// within opts.BodyTimeout; a slower client is disconnected, so that
// connections that trickle cannot pile up. A connection may sit idle
// between requests for two minutes. Nothing bounds how long an answer
// takes: a tool call may run, and an event stream stay open, for as long
// as they need.
//
//	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
//	defer stop()
//	ln, err := serve.Listen("127.0.0.1:8080", false)
//	…
//	err = serve.RunHTTP(ctx, ln, server, serve.HTTPOptions{Verifier: tokens.Verify})
func RunHTTP(ctx context.Context, ln net.Listener, server *mcp.Server, opts HTTPOptions) error {
	opts = opts.withDefaults()
	log := opts.Logger
	mux := http.NewServeMux()
	mux.Handle(Path, HTTPHandler(server, opts))
	// No WriteTimeout: an event stream stays open for as long as a call
	// runs, or as long as a session lasts. No ReadTimeout either:
	// HTTPHandler bounds each body from the end of its headers.
	srv := &http.Server{Handler: mux, ReadHeaderTimeout: opts.HeaderTimeout, IdleTimeout: 2 * time.Minute, MaxHeaderBytes: 64 << 10}
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
