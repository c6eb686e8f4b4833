package dashboard_test

import (
	"context"
	"io"
	"net/http"
	"net/http/cookiejar"
	"strings"
	"testing"
	"time"

	"github.com/mcp-changeset/changeset-go/dashboard"
)

func TestServe_RefusesAddressesThatAreNotLoopback(t *testing.T) {
	f := newFixture(t)
	for _, addr := range []string{":0", "0.0.0.0:0", "[::]:0", "192.0.2.10:8080", "example.com:80", "nonsense"} {
		if _, err := dashboard.Serve(t.Context(), addr, f.dash, nil); err == nil {
			t.Errorf("Serve(%q) listened; want a refusal", addr)
		} else if addr != "nonsense" && !strings.Contains(err.Error(), "not a loopback address") {
			t.Errorf("Serve(%q): %v", addr, err)
		}
	}
}

func TestServe_LoopbackReturnsWorkingLoginURLAndStopsWithContext(t *testing.T) {
	f := newFixture(t)
	s := f.build()
	for _, addr := range []string{"127.0.0.1:0", "localhost:0"} {
		ctx, cancel := context.WithCancel(t.Context())
		login, err := dashboard.Serve(ctx, addr, f.dash, nil)
		if err != nil {
			t.Fatalf("Serve(%q): %v", addr, err)
		}
		if !strings.HasPrefix(login, "http://127.0.0.1:") && !strings.HasPrefix(login, "http://[::1]:") {
			t.Errorf("login URL %q is not on loopback", login)
		}
		jar, _ := cookiejar.New(nil)
		client := &http.Client{Jar: jar, Timeout: 10 * time.Second}
		res, err := client.Get(login)
		if err != nil {
			t.Fatal(err)
		}
		body, _ := io.ReadAll(res.Body)
		res.Body.Close()
		if res.StatusCode != http.StatusOK || res.Request.URL.Path != "/" || !strings.Contains(string(body), s.run) {
			t.Errorf("following the login URL: %d at %s", res.StatusCode, res.Request.URL)
		}
		if strings.Contains(res.Request.URL.String(), "token") {
			t.Error("the login token stayed in the address bar")
		}
		cancel()
		deadline := time.Now().Add(5 * time.Second)
		for {
			if _, err := client.Get(login); err != nil {
				break
			}
			if time.Now().After(deadline) {
				t.Fatal("the server still answers after its context ended")
			}
			time.Sleep(20 * time.Millisecond)
		}
	}
}
