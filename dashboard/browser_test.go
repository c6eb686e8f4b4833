package dashboard_test

import (
	"bytes"
	"context"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/chromedp/chromedp"
	"github.com/mcp-changeset/changeset-go/ledger"
)

// chromium returns the path of Debian's Chromium, or "" when it is not
// installed.
func chromium() string {
	for _, p := range []string{"/usr/bin/chromium", "/usr/bin/chromium-browser"} {
		if _, err := os.Stat(p); err == nil {
			return p
		}
	}
	return ""
}

// artifacts returns the directory for the test's screenshots: env
// CHANGESET_ARTIFACTS, or a temporary directory.
func artifacts(t *testing.T) string {
	dir := os.Getenv("CHANGESET_ARTIFACTS")
	if dir == "" {
		dir = t.TempDir()
	}
	if err := os.MkdirAll(dir, 0o755); err != nil {
		t.Fatal(err)
	}
	return dir
}

// recording keeps every response body the browser received, for the search
// for secrets.
type recording struct {
	h      http.Handler
	mu     sync.Mutex
	bodies []string
}

func (rec *recording) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	rw := &teeWriter{ResponseWriter: w}
	rec.h.ServeHTTP(rw, r)
	rec.mu.Lock()
	defer rec.mu.Unlock()
	rec.bodies = append(rec.bodies, "Location: "+w.Header().Get("Location")+"\n\n"+rw.buf.String())
}

type teeWriter struct {
	http.ResponseWriter
	buf bytes.Buffer
}

func (w *teeWriter) Write(b []byte) (int, error) {
	w.buf.Write(b)
	return w.ResponseWriter.Write(b)
}

func TestBrowser_LoginReviewDryRunConfirmAndSeeTheReport(t *testing.T) {
	exe := chromium()
	if exe == "" {
		if os.Getenv("CHANGESET_REQUIRE_BROWSER") == "1" {
			t.Fatal("CHANGESET_REQUIRE_BROWSER=1 but Chromium is not installed at /usr/bin/chromium (apt-get install chromium)")
		}
		t.Skipf("SKIPPING browser test: Chromium is not installed at /usr/bin/chromium " +
			"(apt-get install chromium; set CHANGESET_REQUIRE_BROWSER=1 to make this a failure)")
	}
	f := newFixture(t)
	s := f.build()
	rec := &recording{h: f.dash}
	srv := httptest.NewServer(rec)
	defer srv.Close()
	defer func() { rec.mu.Lock(); f.bodies = append(f.bodies, rec.bodies...); rec.mu.Unlock() }()
	dir := artifacts(t)

	opts := append(chromedp.DefaultExecAllocatorOptions[:],
		chromedp.ExecPath(exe),
		chromedp.Headless,
		chromedp.NoSandbox,
		chromedp.DisableGPU,
		chromedp.NoFirstRun,
		chromedp.Flag("disable-quic", true),
		chromedp.Flag("disable-background-networking", true),
		chromedp.Flag("disable-component-update", true),
		chromedp.Flag("disable-sync", true),
		chromedp.UserDataDir(t.TempDir()),
		chromedp.WindowSize(1280, 900),
	)
	ctx, cancel := context.WithTimeout(t.Context(), 2*time.Minute)
	defer cancel()
	actx, cancelAlloc := chromedp.NewExecAllocator(ctx, opts...)
	defer cancelAlloc()
	bctx, cancelBrowser := chromedp.NewContext(actx, chromedp.WithErrorf(t.Logf))
	defer cancelBrowser()

	shot := func(name string, full bool) {
		t.Helper()
		take := chromedp.CaptureScreenshot()
		if full {
			take = chromedp.FullScreenshot(100)
		}
		png, err := chromedp.Run(bctx, take)
		if err != nil {
			t.Fatalf("screenshot %s: %v", name, err)
		}
		path := filepath.Join(dir, name)
		if err := os.WriteFile(path, png, 0o644); err != nil {
			t.Fatal(err)
		}
		t.Logf("screenshot: %s", path)
	}
	text := func(sel string) string {
		t.Helper()
		s, err := chromedp.Run(bctx, chromedp.Text(chromedp.CSS(sel)))
		if err != nil {
			t.Fatalf("text of %s: %v", sel, err)
		}
		return s
	}
	step := func(what string, actions ...chromedp.Action[chromedp.Void]) {
		t.Helper()
		if err := chromedp.Do(bctx, actions...); err != nil {
			t.Fatalf("%s: %v", what, err)
		}
	}

	// Without a session: a 401 page that says where the login link is.
	step("no session", chromedp.Navigate(srv.URL+"/"), chromedp.WaitVisible(chromedp.CSS(`.errorpage`)))
	if got := text(".errorpage"); !strings.Contains(got, "login link") {
		t.Errorf("401 page: %q", got)
	}
	shot("sign-in.png", false)

	// Log in: the token leaves the address bar, and scripts cannot read
	// the session cookie.
	step("log in", chromedp.Navigate(f.dash.LoginURL(srv.URL)),
		chromedp.WaitVisible(chromedp.CSS(`a[href="/runs/`+s.run+`"]`)))
	loc, _ := chromedp.Run(bctx, chromedp.Location())
	if loc != srv.URL+"/" {
		t.Errorf("after login the browser is at %q, want %s/", loc, srv.URL)
	}
	if cookies, _ := chromedp.Run(bctx, chromedp.Evaluate[string]("document.cookie")); cookies != "" {
		t.Errorf("document.cookie = %q: the session cookie must be HttpOnly", cookies)
	}
	shot("runs.png", true)

	// Open the run.
	step("open the run", chromedp.Click(chromedp.CSS(`a[href="/runs/`+s.run+`"]`)),
		chromedp.WaitVisible(chromedp.CSS(`form[action="/runs/`+s.run+`/dry-run"] button`)))
	if h := text("h1"); h != "Tidy up settings" {
		t.Errorf("run page heading = %q", h)
	}
	shot("run.png", true)

	// The dry run changes nothing.
	before := f.snapshot()
	step("dry run", chromedp.Click(chromedp.CSS(`form[action="/runs/`+s.run+`/dry-run"] button`)),
		chromedp.WaitVisible(chromedp.CSS(`form[action="/runs/`+s.run+`/undo"] button.danger`)))
	if got := text("main"); !strings.Contains(got, dryRunMessage) || !strings.Contains(got, "Skipped") {
		t.Errorf("dry-run page lacks the message or the skipped change:\n%s", got)
	}
	if f.snapshot() != before {
		t.Fatal("the dry run changed something")
	}
	shot("dry-run.png", true)

	// Confirm, and see the stored report.
	step("confirm", chromedp.Click(chromedp.CSS(`form[action="/runs/`+s.run+`/undo"] button.danger`)),
		chromedp.WaitVisible(chromedp.CSS(`#report`)))
	if got := text("main"); !strings.Contains(got, "Run partly undone by person:ana") || !strings.Contains(got, "Undo report") {
		t.Errorf("run page after the undo:\n%s", got)
	}
	shot("run-undone.png", true)
	run, err := f.guard.Ledger().Run(context.Background(), s.run)
	if err != nil || run.Status != ledger.RunPartiallyUndone || run.UndoneBy != "person:ana" {
		t.Fatalf("run after the browser's undo: %+v, %v", run, err)
	}
	if v, _ := f.store.get("theme"); v != "light" {
		t.Errorf("theme = %q after the undo, want light", v)
	}

	step("a change", chromedp.Navigate(srv.URL+"/changes/"+s.changes[4]), chromedp.WaitVisible(chromedp.CSS(`dl.facts`)))
	shot("change.png", true)

	// A phone's width: the same page, readable.
	step("phone", chromedp.EmulateViewport(390, 844, chromedp.EmulateMobile),
		chromedp.Navigate(srv.URL+"/runs/"+s.run), chromedp.WaitVisible(chromedp.CSS(`#report`)))
	width, _ := chromedp.Run(bctx, chromedp.Evaluate[int]("document.documentElement.scrollWidth"))
	if width > 390 {
		t.Errorf("at phone width the page scrolls sideways (%d px wide)", width)
	}
	shot("run-phone.png", false)
	step("phone, changes", chromedp.Navigate(srv.URL+"/changes"), chromedp.WaitVisible(chromedp.CSS(`table.list`)))
	shot("changes-phone.png", false)
}
