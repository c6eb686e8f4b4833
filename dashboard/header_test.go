package dashboard_test

import (
	"bytes"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"net/url"
	"strings"
	"sync"
	"testing"

	changeset "github.com/mcp-changeset/changeset-go"
	"github.com/mcp-changeset/changeset-go/dashboard"
)

// userHeader is the trusted header of the tests.
const userHeader = "X-Forwarded-User"

// syncBuffer is a log destination the tests read.
type syncBuffer struct {
	mu sync.Mutex
	b  bytes.Buffer
}

func (s *syncBuffer) Write(p []byte) (int, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.Write(p)
}

func (s *syncBuffer) String() string {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.String()
}

// newHeaderFixture is a people fixture that also trusts userHeader, and
// logs to the returned buffer.
func newHeaderFixture(t *testing.T, edit ...func(*changeset.Options, *dashboard.Options)) (*fixture, *syncBuffer) {
	t.Helper()
	logs := &syncBuffer{}
	f := newPeopleFixture(t, append([]func(*changeset.Options, *dashboard.Options){func(_ *changeset.Options, d *dashboard.Options) {
		d.TrustedHeader = userHeader
		d.Logger = slog.New(slog.NewTextHandler(logs, nil))
	}}, edit...)...)
	return f, logs
}

// proxied sends a request as the proxy would: from peer (RemoteAddr), with
// the trusted header naming user ("" for none), through c (its cookie, if
// any, and its CSRF token, kept from the pages).
func proxied(c *client, method, path, peer, user string, form url.Values) response {
	c.f.t.Helper()
	var req *http.Request
	if method == http.MethodPost {
		if form == nil {
			form = url.Values{}
		}
		if _, ok := form["csrf"]; !ok {
			form.Set("csrf", c.csrf)
		}
		req = httptest.NewRequest(method, path, strings.NewReader(form.Encode()))
		req.Header.Set("Content-Type", "application/x-www-form-urlencoded")
	} else {
		req = httptest.NewRequest(method, path, nil)
	}
	req.RemoteAddr = peer
	req.Host = "127.0.0.1:8081" // what a proxy sends by default: the address it forwards to
	if user != "" {
		req.Header.Set(userHeader, user)
	}
	return c.do(req)
}

// The trusted header, from loopback, names the person without a login;
// their POSTs carry the CSRF token of their pages, and their undo is
// recorded as person:<name>.
func TestTrustedHeader_FromLoopbackNamesThePerson(t *testing.T) {
	for _, peer := range []string{"127.0.0.1:40000", "[::1]:40000", "[::ffff:127.0.0.1]:40000"} {
		t.Run(peer, func(t *testing.T) {
			f, _ := newHeaderFixture(t)
			s := f.build()
			carol := f.anonymous()
			home := proxied(carol, "GET", "/", peer, "carol", nil)
			if home.Code != http.StatusOK {
				t.Fatalf("GET / from the proxy = %d:\n%s", home.Code, home.Body)
			}
			mustContain(t, "carol's home", home.Body, "Signed in as <strong>carol</strong> <span class=\"muted\">(through your sign-in proxy)</span>",
				"recorded in the ledger as <code>person:carol</code>")
			if strings.Contains(home.Body, `action="/logout"`) {
				t.Error("a person the proxy names is offered a sign-out that the proxy would undo")
			}
			if home.Header.Get("Set-Cookie") != "" {
				t.Error("a request the proxy names got a cookie")
			}
			proxied(carol, "GET", "/changes/"+s.single, peer, "carol", nil)
			first := carol.csrf
			proxied(carol, "GET", "/changes/"+s.single, peer, "carol", nil)
			if first == "" || carol.csrf != first {
				t.Error("each request of the same person gets a new CSRF token; open pages would go stale")
			}
			if res := proxied(carol, "POST", "/changes/"+s.single+"/undo", peer, "carol", nil); res.Code != http.StatusSeeOther {
				t.Fatalf("carol's undo = %d:\n%s", res.Code, res.Body)
			}
			mustContain(t, "carol's change page", proxied(carol, "GET", "/changes/"+s.single, peer, "carol", nil).Body, "Change undone by person:carol.")
			if by := undoneBy(t, f, s.single, ""); len(by) != 1 || by[0] != "person:carol" {
				t.Errorf("the history names %q, want [person:carol]", by)
			}
			mustContain(t, "carol's changes", proxied(carol, "GET", "/changes", peer, "carol", nil).Body, `href="/changes?by=agent%3acarol">My agents' work</a>`)
		})
	}
}

// From a peer that is not loopback the header is ignored (and logged
// once): without a session the answer is 401, with one the session's
// person acts.
func TestTrustedHeader_FromElsewhereIsIgnoredAndLoggedOnce(t *testing.T) {
	f, logs := newHeaderFixture(t)
	s := f.build()
	before := f.snapshot()
	for _, peer := range []string{"192.0.2.1:1234", "10.0.0.7:5000", "[2001:db8::1]:443", "not-an-address"} {
		c := f.anonymous()
		if res := proxied(c, "GET", "/", peer, "carol", nil); res.Code != http.StatusUnauthorized {
			t.Errorf("GET / from %s naming carol = %d, want 401", peer, res.Code)
		}
		if res := proxied(c, "POST", "/changes/"+s.single+"/undo", peer, "carol", url.Values{"csrf": {"x"}}); res.Code != http.StatusUnauthorized {
			t.Errorf("POST from %s naming carol = %d, want 401", peer, res.Code)
		}
	}
	if f.snapshot() != before {
		t.Error("a header from elsewhere changed something")
	}
	if n := strings.Count(logs.String(), "ignoring the trusted header"); n != 1 {
		t.Errorf("the header from elsewhere was logged %d times, want once:\n%s", n, logs.String())
	}

	// ana, signed in with her token, is still ana when a request from
	// elsewhere names carol.
	ana := f.anonymous()
	res := proxied(ana, "GET", "/login?token="+url.QueryEscape(anaToken), "192.0.2.1:1234", "", nil)
	ana.cookie = sessionCookie(t, res)
	f.tokens = append(f.tokens, ana.cookie.Value)
	mustContain(t, "ana's home", proxied(ana, "GET", "/", "192.0.2.1:1234", "carol", nil).Body, "Signed in as <strong>ana</strong>")
	proxied(ana, "POST", "/changes/"+s.single+"/undo", "192.0.2.1:1234", "carol", nil)
	if rec, _ := f.guard.Record(t.Context(), s.single); rec.UndoneBy != "person:ana" {
		t.Errorf("undone_by = %q, want person:ana", rec.UndoneBy)
	}
}

// Through the proxy, the header decides who acts, whatever cookie the
// browser holds; a POST needs the CSRF token of that person's pages.
func TestTrustedHeader_WinsOverTheCookieAndNeedsItsOwnCSRF(t *testing.T) {
	f, _ := newHeaderFixture(t)
	s := f.build()
	const peer = "127.0.0.1:40000"
	ana := f.anonymous()
	ana.cookie = sessionCookie(t, proxied(ana, "GET", "/login?token="+url.QueryEscape(anaToken), peer, "", nil))
	f.tokens = append(f.tokens, ana.cookie.Value)
	mustContain(t, "ana's home", proxied(ana, "GET", "/", peer, "", nil).Body, "Signed in as <strong>ana</strong>")
	anaCSRF := ana.csrf
	if anaCSRF == "" {
		t.Fatal("ana's page carries no CSRF token")
	}

	before := f.snapshot()
	for _, csrf := range []string{"", "forged", anaCSRF} {
		res := proxied(ana, "POST", "/changes/"+s.single+"/undo", peer, "carol", url.Values{"csrf": {csrf}})
		if res.Code != http.StatusForbidden {
			t.Errorf("carol's POST with csrf %.8q = %d, want 403", csrf, res.Code)
		}
	}
	if res := proxied(ana, "POST", "/changes/"+s.single+"/undo", peer, "carol", url.Values{"csrf": nil}); res.Code != http.StatusForbidden {
		t.Errorf("carol's POST without csrf = %d, want 403", res.Code)
	}
	if f.snapshot() != before {
		t.Error("a POST without carol's CSRF token changed something")
	}

	mustContain(t, "the page through the proxy", proxied(ana, "GET", "/changes/"+s.single, peer, "carol", nil).Body, "Signed in as <strong>carol</strong>")
	if res := proxied(ana, "POST", "/changes/"+s.single+"/undo", peer, "carol", nil); res.Code != http.StatusSeeOther {
		t.Fatalf("carol's undo with her CSRF token = %d:\n%s", res.Code, res.Body)
	}
	if rec, _ := f.guard.Record(t.Context(), s.single); rec.UndoneBy != "person:carol" {
		t.Errorf("undone_by = %q, want person:carol", rec.UndoneBy)
	}
}

// A header that names nobody valid is ignored, and logged once.
func TestTrustedHeader_InvalidNamesAreIgnored(t *testing.T) {
	f, logs := newHeaderFixture(t)
	f.build()
	for _, name := range []string{"car\x01ol", "car\u202eol", strings.Repeat("c", 65), "car\xffol"} {
		if res := proxied(f.anonymous(), "GET", "/", "127.0.0.1:40000", name, nil); res.Code != http.StatusUnauthorized {
			t.Errorf("GET / naming %q = %d, want 401", name, res.Code)
		}
	}
	if n := strings.Count(logs.String(), "names no valid person"); n != 1 {
		t.Errorf("invalid names were logged %d times, want once:\n%s", n, logs.String())
	}
}

// WithPerson, from the operator's own middleware, wins over the header.
func TestTrustedHeader_WithPersonWins(t *testing.T) {
	f, _ := newHeaderFixture(t, func(_ *changeset.Options, d *dashboard.Options) {
		d.Wrap = func(h http.Handler) http.Handler {
			return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
				h.ServeHTTP(w, r.WithContext(dashboard.WithPerson(r.Context(), "dave")))
			})
		}
	})
	s := f.build()
	c := f.anonymous()
	mustContain(t, "the page", proxied(c, "GET", "/changes/"+s.single, "127.0.0.1:40000", "carol", nil).Body, "Signed in as <strong>dave</strong>")
	if res := proxied(c, "POST", "/changes/"+s.single+"/undo", "127.0.0.1:40000", "carol", nil); res.Code != http.StatusSeeOther {
		t.Fatalf("undo = %d", res.Code)
	}
	if rec, _ := f.guard.Record(t.Context(), s.single); rec.UndoneBy != "person:dave" {
		t.Errorf("undone_by = %q, want person:dave", rec.UndoneBy)
	}
}

// A request from loopback that names another host is how DNS rebinding
// looks: the header is ignored (and logged once) unless the host is one
// of ProxyHosts.
func TestTrustedHeader_ARequestForAnotherHostIsIgnored(t *testing.T) {
	f, logs := newHeaderFixture(t, func(_ *changeset.Options, d *dashboard.Options) {
		d.ProxyHosts = []string{"dashboard.example.com"}
	})
	s := f.build()
	send := func(method, path, host string, form url.Values) response {
		t.Helper()
		c := f.anonymous()
		var req *http.Request
		if method == http.MethodPost {
			req = httptest.NewRequest(method, path, strings.NewReader(form.Encode()))
			req.Header.Set("Content-Type", "application/x-www-form-urlencoded")
		} else {
			req = httptest.NewRequest(method, path, nil)
		}
		req.RemoteAddr, req.Host = "127.0.0.1:40000", host
		req.Header.Set(userHeader, "carol")
		return c.do(req)
	}
	before := f.snapshot()
	for _, host := range []string{"attacker.example:8081", "example.com", "dashboard.example.com.evil.test"} {
		if res := send("GET", "/changes/"+s.single, host, nil); res.Code != http.StatusUnauthorized {
			t.Errorf("GET for host %s = %d, want 401", host, res.Code)
		}
		if res := send("POST", "/changes/"+s.single+"/undo", host, url.Values{"csrf": {"x"}}); res.Code != http.StatusUnauthorized {
			t.Errorf("POST for host %s = %d, want 401", host, res.Code)
		}
	}
	if f.snapshot() != before {
		t.Error("a request for another host changed something")
	}
	if n := strings.Count(logs.String(), "neither this machine nor in Options.ProxyHosts"); n != 1 {
		t.Errorf("requests for other hosts were logged %d times, want once:\n%s", n, logs.String())
	}
	for _, host := range []string{"dashboard.example.com", "DASHBOARD.example.com.:443", "localhost:8081", "[::1]:8081"} {
		if res := send("GET", "/", host, nil); res.Code != http.StatusOK || !strings.Contains(res.Body, "Signed in as <strong>carol</strong>") {
			t.Errorf("GET for host %s = %d, want carol's page", host, res.Code)
		}
	}
}
