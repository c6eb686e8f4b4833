package serve

import (
	"net/http"
	"net/url"
	"os"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/mcp-changeset/changeset-go/internal/testkit"
)

const (
	anaPersonToken = "ana-dashboard-token-0123456789abcdef"
	sharedLike     = "not-anyones-token-0123456789abcdef"
)

// waitDashboard waits for the "svc: dashboard: URL…" line and returns the
// whole line after "dashboard: ".
func waitDashboard(t *testing.T, stderr *testkit.Buffer) string {
	t.Helper()
	deadline := time.Now().Add(20 * time.Second)
	for time.Now().Before(deadline) {
		for _, line := range strings.Split(stderr.String(), "\n") {
			if rest, ok := strings.CutPrefix(line, "svc: dashboard: "); ok {
				return rest
			}
		}
		time.Sleep(20 * time.Millisecond)
	}
	t.Fatalf("the server printed no dashboard line; stderr:\n%s", stderr)
	return ""
}

// --dashboard-people signs each person in with their own token, and no
// shared login token: the printed link carries none.
func TestMain_DashboardPeopleSignsInPeopleWithTheirOwnTokens(t *testing.T) {
	people := filepath.Join(t.TempDir(), "people")
	if err := os.WriteFile(people, []byte("# the team\n"+anaPersonToken+" ana\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	cmd, _, stderr := mainCmd(t, "--http", "127.0.0.1:0", "--dashboard", "127.0.0.1:0", "--dashboard-people", people)
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	exited := make(chan error, 1)
	go func() { exited <- cmd.Wait() }()
	t.Cleanup(func() {
		cmd.Process.Kill()
		if t.Failed() {
			t.Logf("stderr:\n%s", stderr)
		}
	})
	line := waitDashboard(t, stderr)
	base, ok := strings.CutSuffix(line, "/login?token=… (each person with their own token from --dashboard-people)")
	if !ok || !strings.HasPrefix(base, "http://127.0.0.1:") {
		t.Fatalf("dashboard line %q, want the login link without a token and how to sign in", line)
	}
	noRedirect := &http.Client{CheckRedirect: func(*http.Request, []*http.Request) error { return http.ErrUseLastResponse }}
	login := func(token string) *http.Response {
		t.Helper()
		res, err := noRedirect.Get(base + "/login?token=" + url.QueryEscape(token))
		if err != nil {
			t.Fatal(err)
		}
		res.Body.Close()
		return res
	}
	if res := login(anaPersonToken); res.StatusCode != http.StatusSeeOther || len(res.Cookies()) != 1 {
		t.Errorf("ana's login = %d with %d cookies, want 303 and a session", res.StatusCode, len(res.Cookies()))
	}
	for _, token := range []string{sharedLike, "", "ana"} {
		if res := login(token); res.StatusCode != http.StatusUnauthorized || len(res.Cookies()) != 0 {
			t.Errorf("login with %.6q… = %d, want 401 and no cookie", token, res.StatusCode)
		}
	}
	cmd.Process.Signal(syscall.SIGTERM)
	select {
	case err := <-exited:
		if err != nil {
			t.Fatalf("after SIGTERM: %v", err)
		}
	case <-time.After(10 * time.Second):
		t.Fatal("no exit within 10 s of SIGTERM")
	}
	if strings.Contains(stderr.String(), anaPersonToken) {
		t.Error("a person's token reached standard error")
	}
	if !strings.Contains(stderr.String(), "dashboard people loaded") || !strings.Contains(stderr.String(), "person=ana") {
		t.Errorf("the log does not say the people were loaded and ana signed in:\n%s", stderr)
	}
}

// A bad people file stops the server at start with an error that names
// the file and the line, never the token; the flag needs --dashboard.
func TestMain_DashboardPeopleErrors(t *testing.T) {
	people := filepath.Join(t.TempDir(), "people")
	if err := os.WriteFile(people, []byte("topsecret-0123456789abcdef ana\ntopsecret-0123456789abcdef bob\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	tokens := filepath.Join(t.TempDir(), "tokens")
	if err := os.WriteFile(tokens, []byte("# agents\ntopsecret-0123456789abcdef ana\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	shared := filepath.Join(t.TempDir(), "people")
	if err := os.WriteFile(shared, []byte("other-token-0123456789abcdef bob\ntopsecret-0123456789abcdef ana\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	for _, tc := range []struct {
		args []string
		code int
		want string
	}{
		{[]string{"--http", "127.0.0.1:0", "--auth-token-file", tokens, "--dashboard", "127.0.0.1:0", "--dashboard-people", shared}, 1,
			"--dashboard-people: the token on line 2 of people file " + shared + " is also on line 2 of bearer token file " + tokens},
		{[]string{"--http", "127.0.0.1:0", "--dashboard", "127.0.0.1:0", "--dashboard-people", people}, 1,
			"--dashboard-people: people file " + people + ", line 2: the same token is on line 1"},
		{[]string{"--http", "127.0.0.1:0", "--dashboard", "127.0.0.1:0", "--dashboard-people", people + ".missing"}, 1,
			"--dashboard-people: people file: open " + people + ".missing"},
		{[]string{"--dashboard-people", people}, 2, "--dashboard-people only makes sense with --dashboard"},
		{[]string{"--help"}, 0, "--dashboard-people file"},
	} {
		cmd, stdout, stderr := mainCmd(t, tc.args...)
		_ = cmd.Run()
		out := stdout.String() + stderr.String()
		if cmd.ProcessState.ExitCode() != tc.code || !strings.Contains(out, tc.want) {
			t.Errorf("%v: exit %d, output %q; want exit %d and %q", tc.args, cmd.ProcessState.ExitCode(), out, tc.code, tc.want)
		}
		if strings.Contains(out, "topsecret") {
			t.Errorf("%v: the output shows a token:\n%s", tc.args, out)
		}
	}
}
