package main

import (
	"fmt"
	"os/exec"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/mcp-changeset/changeset-go/examples/internal/exampletest"
)

func TestMain(m *testing.M) { exampletest.Main(m) }

const issue1 = "octo/hello#1"

// setup starts a fake GitHub with the repository octo/hello (labels bug,
// enhancement, docs and 150 more, so that reading them takes two pages;
// issue 1 labelled bug) and the example pointed at it, allowed to touch
// octo/hello only. Any connection to another address fails the test.
func setup(t *testing.T) (*exampletest.Client, *fakeGitHub, *wire) {
	t.Helper()
	gh := newFakeGitHub(t)
	labels := []string{"bug", "enhancement", "docs"}
	for i := range 150 {
		labels = append(labels, "area-"+strconv.Itoa(i))
	}
	gh.addRepo("octo/hello", labels, map[int][]string{1: {"bug"}, 2: {}})
	gh.addRepo("evil/repo", []string{"bug"}, map[int][]string{1: {}})
	w := tripwire(t)
	c := start(t, w, "--repo", "octo/hello", "--api-url", gh.srv.URL)
	return c, gh, w
}

// start runs the example with writes on, the fake token, and every proxy
// variable pointing at the tripwire.
func start(t *testing.T, w *wire, args ...string) *exampletest.Client {
	t.Helper()
	c := exampletest.Start(t, "githublabels", args, exampletest.Guarded, "GITHUB_TOKEN="+fakeToken,
		"HTTPS_PROXY="+w.srv.URL, "HTTP_PROXY="+w.srv.URL, "https_proxy="+w.srv.URL, "http_proxy="+w.srv.URL,
		"NO_PROXY=127.0.0.1", "no_proxy=127.0.0.1")
	t.Cleanup(func() {
		if strings.Contains(c.Stderr.String(), fakeToken) {
			t.Errorf("the token reached the log:\n%s", c.Stderr)
		}
	})
	return c
}

func args(repo string, issue int, labels ...string) map[string]any {
	return map[string]any{"repo": repo, "issue": issue, "labels": labels}
}

// refused checks a refusal's text, and that it does not hold the token.
func refused(t *testing.T, c *exampletest.Client, tool string, a map[string]any, want string) {
	t.Helper()
	if text := c.Refused(tool, a, want); strings.Contains(text, fakeToken) {
		t.Fatalf("the token is in an error: %s", text)
	}
}

func wantLabels(t *testing.T, gh *fakeGitHub, key string, want ...string) {
	t.Helper()
	if got := gh.issue(key); !slices.Equal(got, sorted(want)) {
		t.Fatalf("%s has labels %v, want %v", key, got, sorted(want))
	}
}

func TestLabels_AddRemoveAndUndo(t *testing.T) {
	c, gh, _ := setup(t)
	c.HasTools("preview_add_labels", "preview_remove_labels", "apply_change", "undo_change")

	// "Enhancement" is spelled as the repository spells it; area-140 is on
	// the second page of labels.
	add := c.Preview("add_labels", args("Octo/Hello", 1, "Enhancement", "area-140"))
	if add.Summary != `Add "enhancement", "area-140" on octo/hello#1` || len(add.Diff) != 1 || add.Diff[0].Field != "labels" ||
		fmt.Sprint(add.Diff[0].Before) != "[bug]" || fmt.Sprint(add.Diff[0].After) != "[area-140 bug enhancement]" {
		t.Fatalf("preview = %+v", add)
	}
	if len(gh.putLog()) != 0 {
		t.Fatal("the preview wrote")
	}
	var prev previous
	added := c.ApplyResult(add, &prev)
	if !slices.Equal(prev.Previous, []string{"bug"}) {
		t.Fatalf("result = %+v", prev)
	}
	wantLabels(t, gh, issue1, "area-140", "bug", "enhancement")

	removed := c.Apply(c.Preview("remove_labels", args("octo/hello", 1, "bug")))
	wantLabels(t, gh, issue1, "area-140", "enhancement")
	c.Undo(removed)
	wantLabels(t, gh, issue1, "area-140", "bug", "enhancement")
	c.Undo(added)
	wantLabels(t, gh, issue1, "bug")

	wantPuts := [][]string{{"area-140", "bug", "enhancement"}, {"area-140", "enhancement"}, {"area-140", "bug", "enhancement"}, {"bug"}}
	if !slices.EqualFunc(gh.putLog(), wantPuts, slices.Equal) {
		t.Fatalf("PUTs = %v, want %v", gh.putLog(), wantPuts)
	}
	for _, r := range gh.requestLog() {
		if !slices.Contains([]string{"GET /repos/octo/hello/issues/1", "GET /repos/octo/hello/labels", "PUT /repos/octo/hello/issues/1/labels"}, r) {
			t.Errorf("unexpected request %s", r)
		}
	}
}

func TestLabels_RepositoryOutsideTheAllowlistIsNeverContacted(t *testing.T) {
	c, gh, _ := setup(t)
	for _, repo := range []string{"evil/repo", "octo/hello/../../evil/repo", "octo", "", "octo/hello2"} {
		refused(t, c, "preview_add_labels", args(repo, 1, "bug"), "is not on this server's allowlist (allowed: octo/hello)")
		refused(t, c, "preview_remove_labels", args(repo, 1, "bug"), "is not on this server's allowlist")
	}
	if log := gh.requestLog(); len(log) != 0 {
		t.Fatalf("GitHub was asked: %v", log)
	}
}

func TestLabels_BadInputsAreRefused(t *testing.T) {
	c, gh, _ := setup(t)
	refused(t, c, "preview_add_labels", args("octo/hello", 1, "nope"), `label "nope" does not exist in octo/hello`)
	refused(t, c, "preview_add_labels", args("octo/hello", 1, "bug", "wontfix"), `label "wontfix" does not exist`)
	refused(t, c, "preview_add_labels", args("octo/hello", 1, "bug"), "already has these labels")
	refused(t, c, "preview_remove_labels", args("octo/hello", 1, "docs"), "has none of these labels")
	refused(t, c, "preview_add_labels", args("octo/hello", 99, "bug"), "issue octo/hello#99 not found on GitHub")
	refused(t, c, "preview_add_labels", args("octo/hello", 0, "bug"), "must be positive")
	refused(t, c, "preview_add_labels", args("octo/hello", 1), "between 1 and 20 labels")
	refused(t, c, "preview_add_labels", args("octo/hello", 1, strings.Repeat("x", 51)), "1 to 50 characters")
	if len(gh.putLog()) != 0 {
		t.Fatal("a refused preview wrote")
	}
	wantLabels(t, gh, issue1, "bug")
}

func TestLabels_GitHubErrorsAtPreview(t *testing.T) {
	c, gh, _ := setup(t)
	reset := strconv.FormatInt(time.Now().Add(90*time.Second).Unix(), 10)
	for _, tc := range []struct {
		key    string
		status int
		header map[string]string
		want   string
	}{
		{"GET /repos/octo/hello/issues/1", 500, nil, "GitHub failed with 500 Internal Server Error; nothing was changed"},
		{"GET /repos/octo/hello/labels", 502, nil, "GitHub failed with 502 Bad Gateway"},
		{"GET /repos/octo/hello/issues/1", 404, nil, "issue octo/hello#1 not found on GitHub"},
		{"GET /repos/octo/hello/labels", 404, nil, "repository octo/hello not found on GitHub"},
		{"GET /repos/octo/hello/issues/1", 429, map[string]string{"Retry-After": "30"}, "rate limited; retry after 30 seconds"},
		{"GET /repos/octo/hello/issues/1", 403, map[string]string{"X-RateLimit-Remaining": "0", "X-RateLimit-Reset": reset}, "rate limited; retry after"},
		{"GET /repos/octo/hello/issues/1", 403, nil, "GitHub denied access to issue octo/hello#1 (403)"},
		{"GET /repos/octo/hello/issues/1", 401, nil, "GitHub refused the server's credentials (401)"},
	} {
		gh.failWith(tc.key, tc.status, tc.header)
		refused(t, c, "preview_add_labels", args("octo/hello", 1, "docs"), tc.want)
		gh.failWith(tc.key, 0, nil)
	}
	if len(gh.putLog()) != 0 {
		t.Fatal("GitHub was written")
	}
	wantLabels(t, gh, issue1, "bug")
}

func TestLabels_GitHubErrorsAtApplyChangeNothing(t *testing.T) {
	c, gh, _ := setup(t)
	const put = "PUT /repos/octo/hello/issues/1/labels"
	for _, tc := range []struct {
		key    string
		status int
		header map[string]string
		want   string
	}{
		{put, 500, nil, "GitHub failed with 500 Internal Server Error; the labels may or may not have changed"},
		{put, 429, map[string]string{"Retry-After": "60"}, "rate limited; retry after 60 seconds"},
		{put, 404, nil, "issue octo/hello#1 not found on GitHub"},
		{"GET /repos/octo/hello/issues/1", 500, nil, "failed with"}, // the state check before the write
	} {
		p := c.Preview("add_labels", args("octo/hello", 1, "docs"))
		gh.failWith(tc.key, tc.status, tc.header)
		c.ApplyRefused(p, tc.want)
		gh.failWith(tc.key, 0, nil)
		if got := c.Status(p.ChangeID); got != "apply_failed" {
			t.Fatalf("%s %d: status %s", tc.key, tc.status, got)
		}
		wantLabels(t, gh, issue1, "bug")
	}
	if len(gh.putLog()) != 0 {
		t.Fatalf("PUTs that succeeded: %v", gh.putLog())
	}
}

func TestLabels_ChangedOnGitHubAfterThePreviewIsRefused(t *testing.T) {
	c, gh, _ := setup(t)
	p := c.Preview("add_labels", args("octo/hello", 1, "docs"))
	gh.setIssue(issue1, "bug", "enhancement") // a person adds a label meanwhile
	c.ApplyRefused(p, "changed after the preview; nothing was written")
	wantLabels(t, gh, issue1, "bug", "enhancement")

	applied := c.Apply(c.Preview("add_labels", args("octo/hello", 1, "docs")))
	gh.setIssue(issue1, "docs") // and then removes two
	c.UndoRefused(applied, "would overwrite that later edit")
	wantLabels(t, gh, issue1, "docs")
	if len(gh.putLog()) != 1 {
		t.Fatalf("PUTs = %v", gh.putLog())
	}
}

// A person's edit that lands between the preview's own read and the
// Guard's Observe is bound into the state hash; Apply compares with the
// set the diff was computed from and refuses rather than drop that edit.
func TestLabels_ChangeDuringThePreviewIsNotOverwritten(t *testing.T) {
	c, gh, _ := setup(t)
	gh.mu.Lock()
	gh.afterGet = func(key string, n int) {
		if n == 1 { // the preview's read; the next GET is Observe's
			gh.issues[issue1] = []string{"bug", "enhancement"}
		}
	}
	gh.mu.Unlock()
	p := c.Preview("add_labels", args("octo/hello", 1, "docs"))
	if fmt.Sprint(p.Diff[0].Before) != "[bug]" {
		t.Fatalf("diff = %+v", p.Diff)
	}
	c.ApplyRefused(p, "the labels of issue octo/hello#1 changed since the preview; nothing was changed")
	wantLabels(t, gh, issue1, "bug", "enhancement")
	if len(gh.putLog()) != 0 {
		t.Fatalf("PUTs = %v", gh.putLog())
	}
}

// The tests' guard against stray connections works: the example's default
// API URL leads to the tripwire, and the token is not sent there.
func TestLabels_OtherAddressesHitTheTripwire(t *testing.T) {
	w := tripwire(t)
	w.expect = true
	c := start(t, w, "--repo", "octo/hello")
	refused(t, c, "preview_add_labels", args("octo/hello", 1, "bug"), "GitHub could not be reached (the connection failed); nothing was changed")
	if hits := w.hitList(); !slices.Equal(hits, []string{"CONNECT api.github.com:443"}) {
		t.Fatalf("tripwire hits = %v", hits)
	}
}

func TestLabels_FlagErrors(t *testing.T) {
	bin := exampletest.Build(t, "githublabels")
	out, err := exec.Command(bin, "--help").CombinedOutput()
	if err != nil || !strings.Contains(string(out), "--repo owner/name") || !strings.Contains(string(out), "--api-url url") {
		t.Fatalf("--help: %v\n%s", err, out)
	}
	for _, tc := range []struct {
		args []string
		want string
	}{
		{nil, "at least one --repo"},
		{[]string{"--repo", "not-a-repo"}, "is not owner/name"},
		{[]string{"--repo", "octo/hello", "--api-url", "http://api.example.com"}, "plain http is allowed only on loopback"},
		{[]string{"--repo", "octo/hello", "--api-url", "ftp://127.0.0.1"}, "the scheme must be https"},
	} {
		out, err := exec.Command(bin, tc.args...).CombinedOutput()
		if ee, ok := err.(*exec.ExitError); !ok || ee.ExitCode() != 2 || !strings.Contains(string(out), tc.want) {
			t.Errorf("%v: %v, %q; want exit status 2 and %q", tc.args, err, out, tc.want)
		}
	}
}
