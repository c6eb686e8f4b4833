package dashboard

import (
	"context"
	"errors"
	"fmt"
	"net"
	"net/http"
	"time"
)

// ServeOptions change how Serve listens. A nil *ServeOptions selects the
// defaults.
type ServeOptions struct {
	// AllowRemote lets Serve listen on an address that is not loopback
	// (including ":8080", every interface). Without it such an address is
	// refused: the dashboard can undo changes, and its login link travels
	// in clear over plain HTTP. Put a TLS-terminating proxy and the
	// operator's own authentication (Options.Wrap) in front before
	// allowing it.
	AllowRemote bool
}

// Serve listens on addr and serves d in the background until ctx is done,
// then shuts the server down. It returns once the listener is bound, with
// the login URL to give the operator (print it to standard error, not to a
// shared log): "http://127.0.0.1:8080/login?token=…", or, when d has
// Options.People, "http://127.0.0.1:8080/login", to which each person adds
// their own "?token=…" (see Dashboard.LoginURL). Port 0 picks a free port;
// the URL names the one chosen.
//
// Serve refuses an address that is not loopback ("127.0.0.1:8080",
// "[::1]:8080" and "localhost:8080" are) unless opts.AllowRemote is set.
func Serve(ctx context.Context, addr string, d *Dashboard, opts *ServeOptions) (loginURL string, err error) {
	if opts == nil {
		opts = &ServeOptions{}
	}
	if !opts.AllowRemote {
		if err := checkLoopback(addr); err != nil {
			return "", err
		}
	}
	ln, err := net.Listen("tcp", addr)
	if err != nil {
		return "", fmt.Errorf("dashboard: %w", err)
	}
	tcp, _ := ln.Addr().(*net.TCPAddr)
	if !opts.AllowRemote && (tcp == nil || !tcp.IP.IsLoopback()) {
		ln.Close()
		return "", fmt.Errorf("dashboard: %s resolved to %v, which is not a loopback address", addr, ln.Addr())
	}
	return ServeListener(ctx, ln, d), nil
}

// ServeListener serves d on ln in the background until ctx is done, as
// Serve does, and returns the login URL. It is for a caller that must
// know the dashboard's address before it builds the Guard (the base of
// person approval's links, with port 0): listen first, then serve. The
// caller checks ln's address; ServeListener does not.
func ServeListener(ctx context.Context, ln net.Listener, d *Dashboard) (loginURL string) {
	srv := &http.Server{
		Handler:           d,
		ReadHeaderTimeout: 10 * time.Second,
		ReadTimeout:       30 * time.Second,
		WriteTimeout:      60 * time.Second,
		IdleTimeout:       2 * time.Minute,
		MaxHeaderBytes:    64 << 10,
	}
	go func() {
		if err := srv.Serve(ln); err != nil && !errors.Is(err, http.ErrServerClosed) {
			d.opts.Logger.Error("dashboard: serve", "addr", ln.Addr().String(), "err", err)
		}
	}()
	go func() {
		<-ctx.Done()
		shutdown, cancel := context.WithTimeout(context.WithoutCancel(ctx), 5*time.Second)
		defer cancel()
		srv.Shutdown(shutdown)
	}()
	return d.LoginURL("http://" + ln.Addr().String())
}

// checkLoopback refuses an address whose host is empty (every interface)
// or names something other than loopback.
func checkLoopback(addr string) error {
	host, _, err := net.SplitHostPort(addr)
	if err != nil {
		return fmt.Errorf("dashboard: address %q: %w", addr, err)
	}
	if host == "localhost" {
		return nil
	}
	if ip := net.ParseIP(host); ip != nil && ip.IsLoopback() {
		return nil
	}
	return fmt.Errorf("dashboard: refusing to listen on %q: not a loopback address (use 127.0.0.1:PORT, or set ServeOptions.AllowRemote behind TLS and your own authentication)", addr)
}
