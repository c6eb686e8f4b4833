package dashboard

import (
	"context"
	"crypto/subtle"
	"net/http"
	"net/url"
	"strings"
	"sync"
	"time"
)

// cookieName is the name of the session cookie.
const cookieName = "changeset_session"

// maxFormBytes caps the body of a POST: the dashboard's forms carry two
// short fields.
const maxFormBytes = 16 << 10

// maxConfirmBytes caps the body of a run's undo confirmation, which hands
// back every change of the reviewed plan (about 32 bytes each): room for
// some 30,000 changes.
const maxConfirmBytes = 1 << 20

// session is one signed-in browser, or one person named by the trusted
// header. A browser's session ID lives only in the HttpOnly cookie; a
// header person's never leaves the server. Its CSRF token is put into
// every form the session is shown.
type session struct {
	id      string
	csrf    string
	created time.Time
	expires time.Time
	flash   string // a message for the next page, shown once
	// person is who signed in: the name of their token in the people
	// file, or the name the trusted header gave; "" for the shared login
	// token.
	person string
	// header marks the session of a person named by the trusted header:
	// no cookie can name it.
	header bool
}

// sessionStore keeps sessions in memory: a restart signs everyone out,
// which is the safe default for a tool that can undo changes.
type sessionStore struct {
	mu  sync.Mutex
	ttl time.Duration
	max int
	now func() time.Time
	m   map[string]*session
	// byHeader finds the session of each person the trusted header
	// names, so that all their requests share one CSRF token and one
	// flash, and a client polling without cookies makes no new sessions.
	byHeader map[string]string
}

func newSessionStore(ttl time.Duration, max int, now func() time.Time) *sessionStore {
	return &sessionStore{ttl: ttl, max: max, now: now, m: map[string]*session{}, byHeader: map[string]string{}}
}

// create starts a browser's session for person ("" for the shared login
// token), ending expired ones and, beyond the cap, the oldest.
func (s *sessionStore) create(person string) *session {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.createLocked(person, false)
}

// forHeader returns a copy of the live session of the person the trusted
// header names, starting one if there is none.
func (s *sessionStore) forHeader(person string) *session {
	s.mu.Lock()
	defer s.mu.Unlock()
	if x, ok := s.m[s.byHeader[person]]; ok && x.header && s.now().Before(x.expires) {
		c := *x
		return &c
	}
	x := s.createLocked(person, true)
	s.byHeader[person] = x.id
	c := *x
	return &c
}

func (s *sessionStore) createLocked(person string, header bool) *session {
	now := s.now()
	var oldest *session
	for id, x := range s.m {
		if !now.Before(x.expires) {
			delete(s.m, id)
			continue
		}
		if oldest == nil || x.created.Before(oldest.created) {
			oldest = x
		}
	}
	if len(s.m) >= s.max && oldest != nil {
		delete(s.m, oldest.id)
	}
	for p, id := range s.byHeader {
		if _, ok := s.m[id]; !ok {
			delete(s.byHeader, p)
		}
	}
	x := &session{id: randomString(32), csrf: randomString(32), created: now, expires: now.Add(s.ttl), person: person, header: header}
	s.m[x.id] = x
	return x
}

// get returns a copy of the live browser session with that ID (from a
// cookie), or nil.
func (s *sessionStore) get(id string) *session {
	s.mu.Lock()
	defer s.mu.Unlock()
	x, ok := s.m[id]
	if !ok || x.header {
		return nil
	}
	if !s.now().Before(x.expires) {
		delete(s.m, id)
		return nil
	}
	c := *x
	return &c
}

// setFlash stores a message for the session's next page.
func (s *sessionStore) setFlash(id, msg string) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if x, ok := s.m[id]; ok {
		x.flash = msg
	}
}

// takeFlash returns the session's message and clears it.
func (s *sessionStore) takeFlash(id string) string {
	s.mu.Lock()
	defer s.mu.Unlock()
	x, ok := s.m[id]
	if !ok {
		return ""
	}
	msg := x.flash
	x.flash = ""
	return msg
}

func (s *sessionStore) delete(id string) {
	s.mu.Lock()
	defer s.mu.Unlock()
	delete(s.m, id)
}

// login exchanges a login token for a session cookie and redirects to the
// runs, so that the token leaves the address bar: a person's own token
// from Options.People, or else the shared login token. The token is never
// logged or echoed.
func (d *Dashboard) login(w http.ResponseWriter, r *http.Request) {
	token := r.URL.Query().Get("token")
	person, ok := "", false
	switch {
	case token == "":
	case d.people != nil:
		person, ok = d.people.lookup(token)
	default:
		ok = subtle.ConstantTimeCompare([]byte(token), []byte(d.token)) == 1
	}
	if !ok {
		hint := d.signInHint()
		if token != "" && d.people != nil {
			hint = "That token is not in the dashboard's people file. " + hint
		} else if token != "" {
			hint = "That login link is not valid (the server may have restarted with a new one). " + hint
		}
		d.renderError(w, r, http.StatusUnauthorized, "Sign in to the dashboard", hint)
		return
	}
	s := d.sessions.create(person)
	if person != "" {
		d.opts.Logger.Info("dashboard: signed in", "person", person)
	}
	http.SetCookie(w, &http.Cookie{
		Name:     cookieName,
		Value:    s.id,
		Path:     "/",
		Expires:  s.expires,
		MaxAge:   int(d.opts.SessionTTL / time.Second),
		HttpOnly: true,
		Secure:   r.TLS != nil || d.opts.SecureCookie,
		SameSite: http.SameSiteStrictMode,
	})
	http.Redirect(w, r, "/", http.StatusSeeOther)
}

// signInHint says how to sign in, for the 401 pages.
func (d *Dashboard) signInHint() string {
	var hint string
	if d.people != nil {
		hint = "Open /login?token=YOUR_TOKEN on this dashboard, with the token the operator gave you (your line of the dashboard's people file)."
	} else {
		hint = "Open the login link that the server printed to its standard error when it started; it looks like http://127.0.0.1:PORT/login?token=…"
	}
	if d.header.name != "" {
		hint += " Behind your organisation's sign-in proxy, open the dashboard through the proxy."
	}
	return hint
}

// logout ends the session. A person named by the trusted header is still
// named by it on their next request: they sign out at their proxy.
func (d *Dashboard) logout(w http.ResponseWriter, r *http.Request) {
	d.sessions.delete(sessionOf(r).id)
	http.SetCookie(w, &http.Cookie{Name: cookieName, Value: "", Path: "/", MaxAge: -1, HttpOnly: true,
		Secure: r.TLS != nil || d.opts.SecureCookie, SameSite: http.SameSiteStrictMode})
	r = r.WithContext(context.WithValue(r.Context(), sessionCtxKey{}, (*session)(nil)))
	d.renderError(w, r, http.StatusOK, "Signed out", "Open the login link again to come back.")
}

// sessionCtxKey is the request context key of the caller's session.
type sessionCtxKey struct{}

// sessionOf returns the session requireSession found for r.
func sessionOf(r *http.Request) *session {
	s, _ := r.Context().Value(sessionCtxKey{}).(*session)
	return s
}

// requireSession lets a request through only with a live session, and a
// POST only with the session's CSRF token and from the dashboard's own
// origin. A request the trusted header names (from loopback) uses that
// person's session, whatever cookie it carries; any other uses its
// cookie's.
func (d *Dashboard) requireSession(h http.Handler) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		var s *session
		if name := d.header.person(r); name != "" {
			s = d.sessions.forHeader(name)
		} else if c, err := r.Cookie(cookieName); err == nil {
			s = d.sessions.get(c.Value)
		}
		if s == nil {
			d.renderError(w, r, http.StatusUnauthorized, "Sign in to the dashboard",
				"Your session has ended or you have not signed in. "+d.signInHint())
			return
		}
		if r.Method == http.MethodPost {
			limit := int64(maxFormBytes)
			if strings.HasPrefix(r.URL.Path, "/runs/") && strings.HasSuffix(r.URL.Path, "/undo") {
				limit = maxConfirmBytes
			}
			r.Body = http.MaxBytesReader(w, r.Body, limit)
			if !sameOrigin(r) {
				d.renderError(w, r, http.StatusForbidden, "Cross-origin request refused",
					"This form was sent from another site. Use the dashboard's own pages.")
				return
			}
			if subtle.ConstantTimeCompare([]byte(r.PostFormValue("csrf")), []byte(s.csrf)) != 1 {
				d.renderError(w, r, http.StatusForbidden, "Form expired",
					"This form is missing its security token or is from an earlier session. Nothing was changed. Reload the page and try again.")
				return
			}
		}
		r = r.WithContext(contextWithSession(r, s))
		h.ServeHTTP(w, r)
	})
}

// sameOrigin reports whether a POST comes from the dashboard's own pages.
// Browsers send Sec-Fetch-Site, which says so directly. Under our
// Referrer-Policy (no-referrer) they send "Origin: null" even for
// same-origin forms, so Origin and Referer are checked only without
// Sec-Fetch-Site, and only when present: requests with neither header
// (non-browser clients) pass, and the CSRF token still guards them.
func sameOrigin(r *http.Request) bool {
	if site := r.Header.Get("Sec-Fetch-Site"); site != "" {
		return site == "same-origin" || site == "none"
	}
	for _, h := range []string{"Origin", "Referer"} {
		src := r.Header.Get(h)
		if src == "" {
			continue
		}
		u, err := url.Parse(src)
		if err != nil || u.Host != r.Host || (u.Scheme != "http" && u.Scheme != "https") {
			return false // includes "Origin: null"
		}
	}
	return true
}

// securityHeaders sets the headers every response carries: no framing, no
// inline script, no referrer (the login URL holds the token), no caching.
func securityHeaders(h http.Handler) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		hd := w.Header()
		hd.Set("Content-Security-Policy", "default-src 'self'; script-src 'self'; style-src 'self'; img-src 'self'; "+
			"object-src 'none'; base-uri 'none'; form-action 'self'; frame-ancestors 'none'")
		hd.Set("X-Frame-Options", "DENY")
		hd.Set("Referrer-Policy", "no-referrer")
		hd.Set("X-Content-Type-Options", "nosniff")
		hd.Set("Cache-Control", "no-store")
		hd.Set("Cross-Origin-Opener-Policy", "same-origin")
		hd.Set("Cross-Origin-Resource-Policy", "same-origin")
		h.ServeHTTP(w, r)
	})
}
