package hostport

import "testing"

func TestLoopback(t *testing.T) {
	for in, want := range map[string]bool{
		"127.0.0.1:8080": true, "127.0.0.2": true, "[::1]:80": true, "::1": true,
		"[::ffff:127.0.0.1]:80": true, "localhost:80": true, "LOCALHOST": true,
		"10.0.0.1:80": false, "[2001:db8::1]:80": false, "example.com": false,
		"localhost.example.com": false, "": false,
	} {
		if got := Loopback(in); got != want {
			t.Errorf("Loopback(%q) = %v, want %v", in, got, want)
		}
	}
}

func TestListed(t *testing.T) {
	hosts := []string{"Example.COM.", "proxy.internal:8443", "::1"}
	for in, want := range map[string]bool{
		"example.com": true, "example.com.:443": true, "proxy.internal": true,
		"[::1]:9000": true, "evil.example.com": false, "example.co": false, "": false,
	} {
		if got := Listed(in, hosts); got != want {
			t.Errorf("Listed(%q) = %v, want %v", in, got, want)
		}
	}
}
