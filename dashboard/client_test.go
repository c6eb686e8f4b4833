package dashboard_test

import (
	"crypto/tls"
	"fmt"
	"net/http"
	"net/http/httptest"
	"net/url"
	"regexp"
	"strings"
	"testing"
)

// client drives the dashboard's handler directly, like a browser with one
// session: it keeps the session cookie and the latest CSRF token.
type client struct {
	f      *fixture
	cookie *http.Cookie
	csrf   string
}

// response is a finished request.
type response struct {
	Code   int
	Header http.Header
	Body   string
}

var csrfField = regexp.MustCompile(`name="csrf" value="([^"]+)"`)

// do sends one request and records the response for the search for
// secrets.
func (c *client) do(req *http.Request) response {
	c.f.t.Helper()
	if c.cookie != nil {
		req.AddCookie(c.cookie)
	}
	rec := httptest.NewRecorder()
	c.f.dash.ServeHTTP(rec, req)
	res := response{Code: rec.Code, Header: rec.Header(), Body: rec.Body.String()}
	var hdr strings.Builder
	for k, v := range rec.Header() {
		if k != "Set-Cookie" {
			fmt.Fprintf(&hdr, "%s: %s\n", k, strings.Join(v, ", "))
		}
	}
	c.f.bodies = append(c.f.bodies, hdr.String()+"\n"+res.Body)
	if m := csrfField.FindStringSubmatch(res.Body); m != nil {
		c.csrf = m[1]
	}
	return res
}

func (c *client) get(path string) response {
	c.f.t.Helper()
	return c.do(httptest.NewRequest(http.MethodGet, path, nil))
}

// post sends a form with the session's CSRF token unless form sets its own
// "csrf" (or removes it with an empty value list).
func (c *client) post(path string, form url.Values, headers ...string) response {
	c.f.t.Helper()
	if form == nil {
		form = url.Values{}
	}
	if _, ok := form["csrf"]; !ok {
		form.Set("csrf", c.csrf)
	}
	req := httptest.NewRequest(http.MethodPost, path, strings.NewReader(form.Encode()))
	req.Header.Set("Content-Type", "application/x-www-form-urlencoded")
	for i := 0; i+1 < len(headers); i += 2 {
		req.Header.Set(headers[i], headers[i+1])
	}
	return c.do(req)
}

// anonymous returns a client without a session.
func (f *fixture) anonymous() *client { return &client{f: f} }

// login signs in with the login token and loads the runs page (for a CSRF
// token).
func (f *fixture) login() *client {
	f.t.Helper()
	c := &client{f: f}
	res := c.get("/login?token=" + url.QueryEscape(loginToken))
	if res.Code != http.StatusSeeOther || res.Header.Get("Location") != "/" {
		f.t.Fatalf("login: %d to %q, want 303 to /", res.Code, res.Header.Get("Location"))
	}
	c.cookie = sessionCookie(f.t, res)
	f.tokens = append(f.tokens, c.cookie.Value) // no page may show a session ID
	if home := c.get("/"); home.Code != http.StatusOK {
		f.t.Fatalf("GET / after login: %d", home.Code)
	}
	return c
}

// loginTLS is login over TLS, for the Secure attribute.
func (f *fixture) loginTLS() *http.Cookie {
	f.t.Helper()
	req := httptest.NewRequest(http.MethodGet, "/login?token="+url.QueryEscape(loginToken), nil)
	req.TLS = &tls.ConnectionState{}
	rec := httptest.NewRecorder()
	f.dash.ServeHTTP(rec, req)
	return sessionCookie(f.t, response{Code: rec.Code, Header: rec.Header()})
}

func sessionCookie(t *testing.T, res response) *http.Cookie {
	t.Helper()
	cookies := (&http.Response{Header: res.Header}).Cookies()
	if len(cookies) != 1 {
		t.Fatalf("login set %d cookies, want 1", len(cookies))
	}
	return cookies[0]
}

// mustContain fails unless body holds every one of want.
func mustContain(t *testing.T, what, body string, want ...string) {
	t.Helper()
	for _, w := range want {
		if !strings.Contains(body, w) {
			t.Errorf("%s does not contain %q", what, w)
		}
	}
}

// firstForm returns the action of the first form in a page's main content
// (after the header, whose one form signs out).
func firstForm(body string) string {
	if i := strings.Index(body, "<main"); i >= 0 {
		body = body[i:]
	}
	m := regexp.MustCompile(`<form [^>]*action="([^"]+)"`).FindStringSubmatch(body)
	if m == nil {
		return ""
	}
	return m[1]
}
