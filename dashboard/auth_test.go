package dashboard_test

import (
	"net/http"
	"net/url"
	"regexp"
	"strings"
	"testing"
	"time"

	changeset "github.com/mcp-changeset/changeset-go"
	"github.com/mcp-changeset/changeset-go/dashboard"
)

// routes lists one request of every route, with IDs from the scenario.
func routes(s scenario) [][2]string {
	return [][2]string{
		{"GET", "/"},
		{"GET", "/runs/" + s.run},
		{"POST", "/runs/" + s.run + "/dry-run"},
		{"POST", "/runs/" + s.run + "/undo"},
		{"GET", "/changes"},
		{"GET", "/changes?status=applied"},
		{"GET", "/changes/" + s.single},
		{"POST", "/changes/" + s.single + "/undo"},
		{"POST", "/logout"},
	}
}

func TestLogin_SetsStrictHttpOnlyCookieAndRedirectsHome(t *testing.T) {
	f := newFixture(t)
	c := f.anonymous()
	res := c.get("/login?token=" + url.QueryEscape(loginToken))
	if res.Code != http.StatusSeeOther || res.Header.Get("Location") != "/" {
		t.Fatalf("login = %d to %q, want 303 to /", res.Code, res.Header.Get("Location"))
	}
	ck := sessionCookie(t, res)
	if !ck.HttpOnly || ck.SameSite != http.SameSiteStrictMode || ck.Path != "/" || ck.Secure {
		t.Errorf("cookie = %+v, want HttpOnly, SameSite=Strict, Path=/, not Secure over plain HTTP", ck)
	}
	if ck.Value == "" || strings.Contains(ck.Value, loginToken) {
		t.Errorf("session cookie %q must be a fresh random ID", ck.Value)
	}
	if tls := f.loginTLS(); !tls.Secure || !tls.HttpOnly || tls.SameSite != http.SameSiteStrictMode {
		t.Errorf("cookie over TLS = %+v, want Secure too", tls)
	}
	if res.Header.Get("Referrer-Policy") != "no-referrer" {
		t.Errorf("login response Referrer-Policy = %q", res.Header.Get("Referrer-Policy"))
	}
}

func TestLogin_WrongOrMissingTokenIs401WithHint(t *testing.T) {
	f := newFixture(t)
	for _, path := range []string{"/login", "/login?token=", "/login?token=wrong-token-0123456789", "/login?token=" + loginToken + "x"} {
		res := f.anonymous().get(path)
		if res.Code != http.StatusUnauthorized {
			t.Errorf("GET %s = %d, want 401", path, res.Code)
		}
		if res.Header.Get("Set-Cookie") != "" {
			t.Errorf("GET %s set a cookie", path)
		}
		mustContain(t, path, res.Body, "login link")
	}
}

func TestEveryRoute_WithoutSessionIs401(t *testing.T) {
	f := newFixture(t)
	s := f.build()
	before := f.snapshot()
	bogus := &http.Cookie{Name: "changeset_session", Value: "not-a-session"}
	for _, r := range routes(s) {
		for _, c := range []*client{f.anonymous(), {f: f, cookie: bogus}} {
			var res response
			if r[0] == "GET" {
				res = c.get(r[1])
			} else {
				res = c.post(r[1], url.Values{"csrf": {"x"}})
			}
			if res.Code != http.StatusUnauthorized {
				t.Errorf("%s %s without a session = %d, want 401", r[0], r[1], res.Code)
			}
			mustContain(t, r[1], res.Body, "Sign in to the dashboard", "/login?token=")
		}
	}
	if f.snapshot() != before {
		t.Error("a request without a session changed the ledger or the store")
	}
}

func TestSession_ExpiresAfterTTL(t *testing.T) {
	f := newFixture(t)
	c := f.login()
	f.clock.Advance(dashboard.DefaultSessionTTL - time.Minute)
	if res := c.get("/"); res.Code != http.StatusOK {
		t.Fatalf("before expiry: %d", res.Code)
	}
	f.clock.Advance(2 * time.Minute)
	if res := c.get("/"); res.Code != http.StatusUnauthorized {
		t.Fatalf("after expiry: %d, want 401", res.Code)
	}
}

func TestLogout_EndsTheSession(t *testing.T) {
	f := newFixture(t)
	c := f.login()
	res := c.post("/logout", nil)
	if res.Code != http.StatusOK || !strings.Contains(res.Body, "Signed out") || strings.Contains(res.Body, `action="/logout"`) {
		t.Fatalf("logout = %d:\n%s", res.Code, res.Body)
	}
	if ck := sessionCookie(t, res); ck.MaxAge >= 0 || ck.Value != "" {
		t.Errorf("logout cookie = %+v, want it cleared", ck)
	}
	if res := c.get("/"); res.Code != http.StatusUnauthorized {
		t.Fatalf("after logout: %d, want 401", res.Code)
	}
}

func TestPost_WithoutOrWithWrongCSRFIs403AndChangesNothing(t *testing.T) {
	f := newFixture(t)
	s := f.build()
	c := f.login()
	other := f.login() // another session's token is wrong for this one
	before := f.snapshot()
	for _, r := range routes(s) {
		if r[0] != "POST" {
			continue
		}
		for name, form := range map[string]url.Values{
			"no csrf":            {"csrf": nil},
			"empty csrf":         {"csrf": {""}},
			"wrong csrf":         {"csrf": {"AAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAA"}},
			"other session csrf": {"csrf": {other.csrf}},
		} {
			res := c.post(r[1], form)
			if res.Code != http.StatusForbidden {
				t.Errorf("POST %s with %s = %d, want 403", r[1], name, res.Code)
			}
			mustContain(t, r[1], res.Body, "Nothing was changed")
		}
	}
	if f.snapshot() != before {
		t.Error("a POST refused for its CSRF token changed the ledger or the store")
	}
	if res := c.get("/"); res.Code != http.StatusOK {
		t.Errorf("the session stopped working after refused POSTs: %d", res.Code)
	}
}

func TestPost_CrossOriginIs403(t *testing.T) {
	f := newFixture(t)
	s := f.build()
	c := f.login()
	c.get("/runs/" + s.run)
	before := f.snapshot()
	path := "/changes/" + s.single + "/undo"
	for name, hdr := range map[string][]string{
		"Sec-Fetch-Site cross-site":  {"Sec-Fetch-Site", "cross-site"},
		"Sec-Fetch-Site same-site":   {"Sec-Fetch-Site", "same-site"},
		"foreign Origin":             {"Origin", "http://evil.example"},
		"Origin null, no fetch info": {"Origin", "null"},
		"foreign Referer":            {"Referer", "http://evil.example/page"},
	} {
		if res := c.post(path, nil, hdr...); res.Code != http.StatusForbidden {
			t.Errorf("POST with %s = %d, want 403", name, res.Code)
		}
	}
	if f.snapshot() != before {
		t.Fatal("a cross-origin POST changed something")
	}
	// A browser posting a form from our own page under Referrer-Policy
	// no-referrer sends Sec-Fetch-Site: same-origin and Origin: null.
	res := c.post(path, nil, "Sec-Fetch-Site", "same-origin", "Origin", "null")
	if res.Code != http.StatusSeeOther {
		t.Fatalf("same-origin POST = %d, want 303:\n%s", res.Code, res.Body)
	}
}

func TestEveryResponse_CarriesSecurityHeaders(t *testing.T) {
	f := newFixture(t)
	s := f.build()
	c := f.login()
	want := map[string]string{
		"X-Frame-Options":        "DENY",
		"Referrer-Policy":        "no-referrer",
		"X-Content-Type-Options": "nosniff",
		"Cache-Control":          "no-store",
	}
	paths := []string{"/", "/runs/" + s.run, "/changes", "/changes/" + s.single, "/assets/style.css", "/login", "/nope"}
	for _, p := range paths {
		for _, cl := range []*client{c, f.anonymous()} {
			res := cl.get(p)
			for k, v := range want {
				if got := res.Header.Get(k); got != v {
					t.Errorf("GET %s: %s = %q, want %q", p, k, got, v)
				}
			}
			csp := res.Header.Get("Content-Security-Policy")
			if !strings.Contains(csp, "default-src 'self'") || !strings.Contains(csp, "script-src 'self'") ||
				!strings.Contains(csp, "frame-ancestors 'none'") || strings.Contains(csp, "unsafe-inline") {
				t.Errorf("GET %s: CSP = %q", p, csp)
			}
		}
	}
	inline := regexp.MustCompile(`<script>|\sstyle=|\son[a-z]+=|(src|href|action)="(https?:)?//`)
	for _, p := range []string{"/", "/runs/" + s.run, "/changes/" + s.single, "/changes?q=%3Cstyle%3E&since=7d", "/changes?since=soon"} {
		if m := inline.FindString(c.get(p).Body); m != "" {
			t.Errorf("GET %s holds %q: inline script or style, or an external reference", p, m)
		}
	}
}

func TestWrap_RunsOutsideAndWithPersonNamesTheUndoer(t *testing.T) {
	var seen int
	f := newFixture(t, func(_ *changeset.Options, d *dashboard.Options) {
		d.Wrap = func(h http.Handler) http.Handler {
			return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
				seen++
				if r.URL.Query().Get("deny") != "" {
					http.Error(w, "operator says no", http.StatusUnauthorized)
					return
				}
				h.ServeHTTP(w, r.WithContext(dashboard.WithPerson(r.Context(), "bob")))
			})
		}
	})
	s := f.build()
	c := f.login()
	if res := c.get("/?deny=1"); res.Code != http.StatusUnauthorized || !strings.Contains(res.Body, "operator says no") {
		t.Errorf("Wrap did not run outside: %d %q", res.Code, res.Body)
	}
	if res := c.post("/changes/"+s.single+"/undo", nil); res.Code != http.StatusSeeOther {
		t.Fatalf("undo = %d", res.Code)
	}
	if rec, _ := f.guard.Record(t.Context(), s.single); rec.UndoneBy != "person:bob" {
		t.Errorf("undone_by = %q, want person:bob", rec.UndoneBy)
	}
	if seen == 0 {
		t.Error("Wrap never ran")
	}
}

func TestNew_ValidatesOptions(t *testing.T) {
	f := newFixture(t)
	for name, o := range map[string]dashboard.Options{
		"short login token":   {LoginToken: "short"},
		"login token spaces":  {LoginToken: "has spaces in it, sixteen+"},
		"person with newline": {Person: "ana\nbob"},
		"negative TTL":        {SessionTTL: -time.Second},
	} {
		if _, err := dashboard.New(f.guard, o); err == nil {
			t.Errorf("%s: New accepted it", name)
		}
	}
	if _, err := dashboard.New(nil, dashboard.Options{}); err == nil {
		t.Error("New accepted a nil Guard")
	}
	d, err := dashboard.New(f.guard, dashboard.Options{})
	if err != nil {
		t.Fatal(err)
	}
	if len(d.LoginToken()) < 40 {
		t.Errorf("generated login token %d characters, want 256 bits", len(d.LoginToken()))
	}
	if u := d.LoginURL("http://127.0.0.1:8080/"); u != "http://127.0.0.1:8080/login?token="+d.LoginToken() {
		t.Errorf("LoginURL = %q", u)
	}
	if d2, _ := dashboard.New(f.guard, dashboard.Options{}); d2.LoginToken() == d.LoginToken() {
		t.Error("two dashboards generated the same login token")
	}
}
