// Package hostport answers the two questions the servers ask of a
// request's addresses (its RemoteAddr, its Host header, the address a
// listener bound): is it this machine, and is it one of the names an
// operator listed. The MCP endpoint's Host check (package serve) and the
// dashboard's trusted header ask them the same way.
package hostport

import (
	"net"
	"net/netip"
	"strings"
)

// Host is hostport without its port, and without the brackets of an IPv6
// address: "127.0.0.1:80" → "127.0.0.1", "[::1]:80" → "::1",
// "example.com" → "example.com".
func Host(hostport string) string {
	if h, _, err := net.SplitHostPort(hostport); err == nil {
		return h
	}
	return strings.TrimSuffix(strings.TrimPrefix(hostport, "["), "]")
}

// Loopback reports whether hostport names a loopback address (IPv4,
// IPv6, or IPv4 mapped into IPv6), or is the name localhost.
func Loopback(hostport string) bool {
	h := Host(hostport)
	if strings.EqualFold(h, "localhost") {
		return true
	}
	ip, err := netip.ParseAddr(h)
	return err == nil && ip.Unmap().IsLoopback()
}

// Listed reports whether hostport's host is one of hosts (each a name or
// address, with or without a port), ignoring case and a trailing dot.
func Listed(hostport string, hosts []string) bool {
	h := strings.TrimSuffix(Host(hostport), ".")
	for _, a := range hosts {
		if strings.EqualFold(h, strings.TrimSuffix(Host(a), ".")) {
			return true
		}
	}
	return false
}
