package dashboard_test

import (
	"context"
	"encoding/json"
	"fmt"
	"net/http/httptest"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/mcp-changeset/changeset-go/internal/testkit"

	"github.com/chromedp/chromedp"
)

// axeDir holds the pinned axe-core (package.json and package-lock.json);
// the tests install it with npm ci into its node_modules.
const axeDir = "testdata/axe"

// needBrowser returns Chromium's path, or skips the test loudly when
// Chromium, node or npm is missing (fails it with
// CHANGESET_REQUIRE_BROWSER=1).
func needBrowser(t *testing.T, withNode bool) string {
	t.Helper()
	missing := func(what string) {
		t.Helper()
		if os.Getenv("CHANGESET_REQUIRE_BROWSER") == "1" {
			t.Fatalf("CHANGESET_REQUIRE_BROWSER=1 but %s", what)
		}
		t.Skipf("SKIPPING browser test: %s (set CHANGESET_REQUIRE_BROWSER=1 to make this a failure)", what)
	}
	exe := chromium()
	if exe == "" {
		missing("Chromium is not installed at /usr/bin/chromium (apt-get install chromium)")
	}
	if withNode {
		for _, tool := range []string{"node", "npm"} {
			if _, err := exec.LookPath(tool); err != nil {
				missing(tool + " is not installed (apt-get install nodejs npm), and axe-core needs it")
			}
		}
	}
	return exe
}

// browser is a headless Chromium on a dashboard.
type browser struct {
	t   *testing.T
	ctx context.Context
	url string
	dir string // where screenshots go
}

// newBrowser serves f's dashboard and starts Chromium on it, signed in
// with the shared login link.
func newBrowser(t *testing.T, exe string, f *fixture) *browser {
	t.Helper()
	return newBrowserAt(t, exe, f, f.dash.LoginURL)
}

// newBrowserAt is newBrowser signing in at the link login gives for the
// server's base URL.
func newBrowserAt(t *testing.T, exe string, f *fixture, login func(base string) string) *browser {
	t.Helper()
	rec := &recording{h: f.dash}
	srv := httptest.NewServer(rec)
	t.Cleanup(func() {
		srv.Close()
		rec.mu.Lock()
		f.bodies = append(f.bodies, rec.bodies...)
		rec.mu.Unlock()
	})
	opts := append(chromedp.DefaultExecAllocatorOptions[:],
		chromedp.ExecPath(exe), chromedp.Headless, chromedp.NoSandbox, chromedp.DisableGPU, chromedp.NoFirstRun,
		chromedp.Flag("disable-quic", true), chromedp.Flag("disable-background-networking", true),
		chromedp.Flag("disable-component-update", true), chromedp.Flag("disable-sync", true),
		chromedp.UserDataDir(t.TempDir()), chromedp.WindowSize(1280, 900),
	)
	ctx, cancel := context.WithTimeout(t.Context(), 3*time.Minute)
	t.Cleanup(cancel)
	actx, cancelAlloc := chromedp.NewExecAllocator(ctx, opts...)
	t.Cleanup(cancelAlloc)
	bctx, cancelBrowser := chromedp.NewContext(actx, chromedp.WithErrorf(t.Logf))
	t.Cleanup(cancelBrowser)
	b := &browser{t: t, ctx: bctx, url: srv.URL, dir: artifacts(t)}
	b.step("log in", chromedp.Navigate(login(srv.URL)), chromedp.WaitVisible(chromedp.CSS(`table.list, .empty`)))
	return b
}

func (b *browser) step(what string, actions ...chromedp.Action[chromedp.Void]) {
	b.t.Helper()
	if err := chromedp.Do(b.ctx, actions...); err != nil {
		b.t.Fatalf("%s: %v", what, err)
	}
}

func (b *browser) text(sel string) string {
	b.t.Helper()
	s, err := chromedp.Run(b.ctx, chromedp.Text(chromedp.CSS(sel)))
	if err != nil {
		b.t.Fatalf("text of %s: %v", sel, err)
	}
	return s
}

func (b *browser) eval(js string) string {
	b.t.Helper()
	s, err := chromedp.Run(b.ctx, chromedp.Evaluate[string](js))
	if err != nil {
		b.t.Fatalf("evaluate %.60s: %v", js, err)
	}
	return s
}

func (b *browser) shot(name string) {
	b.t.Helper()
	png, err := chromedp.Run(b.ctx, chromedp.FullScreenshot(100))
	if err != nil {
		b.t.Fatalf("screenshot %s: %v", name, err)
	}
	path := filepath.Join(b.dir, name)
	if err := os.WriteFile(path, png, 0o644); err != nil {
		b.t.Fatal(err)
	}
	b.t.Logf("screenshot: %s", path)
}

// until is an action that waits, across page loads, until the script js
// is true on the page (at most 10 s).
func (b *browser) until(js string) chromedp.Action[chromedp.Void] {
	return chromedp.Func(func(ctx context.Context, t *chromedp.Target) error {
		deadline := time.Now().Add(10 * time.Second)
		for time.Now().Before(deadline) {
			if ok, err := chromedp.Evaluate[bool](js)(ctx, t); err == nil && ok {
				if ready, err := chromedp.Evaluate[string](`document.readyState`)(ctx, t); err == nil && ready == "complete" {
					return nil
				}
			}
			time.Sleep(50 * time.Millisecond)
		}
		return fmt.Errorf("%s never became true", js)
	})
}

// tabTo presses Tab until the focused element matches sel, at most 80
// times, and fails the test when it never does.
func (b *browser) tabTo(sel string) {
	b.t.Helper()
	q, _ := json.Marshal(sel)
	for range 80 {
		b.step("Tab", chromedp.KeyEvent("\t"))
		ok, err := chromedp.Run(b.ctx, chromedp.Evaluate[bool](`document.activeElement !== null && document.activeElement.matches(`+string(q)+`)`))
		if err != nil {
			b.t.Fatal(err)
		}
		if ok {
			outline := b.eval(`getComputedStyle(document.activeElement).outlineStyle`)
			if outline == "none" {
				b.t.Errorf("%s has focus but no visible focus outline", sel)
			}
			return
		}
	}
	b.t.Fatalf("80 presses of Tab never reached %s (focus is on %s)", sel, b.eval(`document.activeElement ? document.activeElement.outerHTML.slice(0, 200) : "nothing"`))
}

// violation is one axe-core rule a page breaks.
type violation struct {
	ID, Impact, Help string
	Nodes            []string
}

// axe runs axe-core on the page and fails the test on any serious or
// critical violation; lesser ones are logged.
func (b *browser) axe(page, source string) {
	b.t.Helper()
	if ok, _ := chromedp.Run(b.ctx, chromedp.Evaluate[bool](`typeof axe !== "undefined"`)); !ok {
		if _, err := chromedp.Run(b.ctx, chromedp.Evaluate[chromedp.Void](source)); err != nil {
			b.t.Fatalf("inject axe-core on %s: %v", page, err)
		}
	}
	raw, err := chromedp.Run(b.ctx, chromedp.Evaluate[string](`axe.run(document, {resultTypes: ["violations"]}).then(r => JSON.stringify(
		r.violations.map(v => ({id: v.id, impact: v.impact, help: v.help, nodes: v.nodes.slice(0, 5).map(n => n.target.join(" ") + " " + n.html.slice(0, 160))}))))`,
		chromedp.EvalAwaitPromise))
	if err != nil {
		b.t.Fatalf("axe.run on %s: %v", page, err)
	}
	var vs []violation
	if err := json.Unmarshal([]byte(raw), &vs); err != nil {
		b.t.Fatalf("axe result on %s: %v", page, err)
	}
	if err := os.WriteFile(filepath.Join(b.dir, "axe-"+page+".json"), []byte(raw), 0o644); err != nil {
		b.t.Fatal(err)
	}
	for _, v := range vs {
		msg := fmt.Sprintf("axe on %s: %s (%s): %s\n  %s", page, v.ID, v.Impact, v.Help, strings.Join(v.Nodes, "\n  "))
		if v.Impact == "serious" || v.Impact == "critical" {
			b.t.Error(msg)
		} else {
			b.t.Log(msg)
		}
	}
	b.t.Logf("axe on %s: %d violations, none serious or critical unless reported above", page, len(vs))
}

// axeSource installs the pinned axe-core and returns its script.
func axeSource(t *testing.T) string {
	t.Helper()
	testkit.NpmCI(t, axeDir)
	src, err := os.ReadFile(filepath.Join(axeDir, "node_modules", "axe-core", "axe.min.js"))
	if err != nil {
		t.Fatal(err)
	}
	return string(src)
}
