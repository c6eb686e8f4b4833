package main

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/mcp-changeset/changeset-go/examples/internal/exampletest"
	"github.com/mcp-changeset/changeset-go/internal/pgtest"
	"github.com/mcp-changeset/changeset-go/internal/testbin"
	"github.com/modelcontextprotocol/go-sdk/mcp"
)

// The tests in this file run the example as two server processes, replicas
// A and B, serving Streamable HTTP on loopback. They share one PostgreSQL
// ledger (a fresh database from pgtest) and one fake GitHub, as replicas
// behind a load balancer on several hosts would share a database and the
// real GitHub. Both accept the same bearer token, so a client of either
// acts as the same identity and sees the same changes.

// Bearer tokens of the replicas' token file.
const (
	aliceToken = "alice-0123456789abcdef0123456789abcdef"
	bobToken   = "bob-0123456789abcdef0123456789abcdef00"
)

// replicaSet is two replicas of the example and what they share.
type replicaSet struct {
	ledger string // the ledger URL both replicas and the CLI open
	gh     *fakeGitHub
	front  *frontDoor
	a, b   *exampletest.Process
	ca, cb *exampletest.Client // alice's sessions with A and with B
}

// startReplicas gives the test a PostgreSQL database (or skips it, loudly,
// when PostgreSQL is unavailable), a fake GitHub whose repository
// octo/hello has issues 1 to issues, each labelled bug, and replicas A and
// B of the example on it, with writes on. Alice is connected to both.
func startReplicas(t *testing.T, issues int) *replicaSet {
	t.Helper()
	dsn := pgtest.DSN(t) // first: skips before anything is started
	sep := "?"
	if strings.Contains(dsn, "?") {
		sep = "&"
	}
	rs := &replicaSet{ledger: dsn + sep + "changeset_schema=githublabels"}

	rs.gh = newFakeGitHub(t)
	open := map[int][]string{}
	for n := 1; n <= issues; n++ {
		open[n] = []string{"bug"}
	}
	rs.gh.addRepo("octo/hello", []string{"bug", "enhancement", "docs"}, open)
	rs.front = newFrontDoor(t, rs.gh)
	w := tripwire(t)

	tokens := filepath.Join(t.TempDir(), "tokens")
	if err := os.WriteFile(tokens, []byte(aliceToken+" alice\n"+bobToken+" bob\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	args := []string{"--ledger", rs.ledger, "--http", "127.0.0.1:0", "--auth-token-file", tokens,
		"--repo", "octo/hello", "--api-url", rs.front.srv.URL}
	env := []string{exampletest.Guarded, "GITHUB_TOKEN=" + fakeToken,
		"HTTPS_PROXY=" + w.srv.URL, "HTTP_PROXY=" + w.srv.URL, "https_proxy=" + w.srv.URL, "http_proxy=" + w.srv.URL,
		"NO_PROXY=127.0.0.1", "no_proxy=127.0.0.1"}
	// A first: it creates the ledger's schema; B finds it there.
	rs.a = exampletest.StartHTTP(t, "githublabels", args, env...)
	rs.b = exampletest.StartHTTP(t, "githublabels", args, env...)
	for name, p := range map[string]*exampletest.Process{"A": rs.a, "B": rs.b} {
		t.Cleanup(func() {
			for _, secret := range []string{fakeToken, aliceToken, bobToken} {
				if strings.Contains(p.Stderr.String(), secret) {
					t.Errorf("replica %s logged a token:\n%s", name, p.Stderr)
				}
			}
		})
	}
	rs.ca = rs.a.Connect(t, aliceToken)
	rs.cb = rs.b.Connect(t, aliceToken)
	return rs
}

// putsTo counts the PUTs of issue n's labels that reached the fake GitHub.
func (rs *replicaSet) putsTo(n int) int {
	path := fmt.Sprintf("PUT /repos/octo/hello/issues/%d/labels", n)
	count := 0
	for _, r := range rs.gh.requestLog() {
		if r == path {
			count++
		}
	}
	return count
}

// frontDoor stands in front of the fake GitHub and passes every request
// on, except that it can hold one PUT open: the replica that sent it waits
// for an answer for as long as the test likes.
type frontDoor struct {
	srv *httptest.Server

	mu       sync.Mutex
	holdPath string // "PUT /repos/…/labels" to hold; "" holds nothing
	onHold   func() // runs once the held request arrived (after arrived is closed), before it waits
	arrived  chan struct{}
	release  chan struct{}
	released sync.Once
}

func newFrontDoor(t *testing.T, gh *fakeGitHub) *frontDoor {
	d := &frontDoor{arrived: make(chan struct{}), release: make(chan struct{})}
	d.srv = httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		d.mu.Lock()
		hold := d.holdPath != "" && r.Method+" "+r.URL.Path == d.holdPath
		if hold {
			d.holdPath = "" // hold one request only
		}
		onHold := d.onHold
		d.mu.Unlock()
		if !hold {
			gh.srv.Config.Handler.ServeHTTP(w, r)
			return
		}
		io.Copy(io.Discard, r.Body)
		close(d.arrived) // before onHold, which may kill the caller: the test must see the arrival first
		if onHold != nil {
			onHold()
		}
		<-d.release
		// GitHub never got to it: the labels stay as they were.
		http.Error(w, `{"message":"held by the test, never applied"}`, http.StatusServiceUnavailable)
	}))
	// Cleanups run last first: the held handler is released before Close
	// waits for it.
	t.Cleanup(d.srv.Close)
	t.Cleanup(d.releaseHeld)
	return d
}

// hold makes the next "PUT path" wait until releaseHeld; onHold runs
// (in the server's goroutine) as soon as it arrives.
func (d *frontDoor) hold(path string, onHold func()) {
	d.mu.Lock()
	defer d.mu.Unlock()
	d.holdPath, d.onHold = "PUT "+path, onHold
}

func (d *frontDoor) releaseHeld() { d.released.Do(func() { close(d.release) }) }

// callResult is the outcome of one tool call made off the test's
// goroutine, where the test must not be failed.
type callResult struct {
	out     map[string]any
	errText string // the tool error's text
	err     error  // a protocol or transport error
}

// call calls a tool without touching the test: safe in any goroutine.
func call(ctx context.Context, c *exampletest.Client, name string, args map[string]any) callResult {
	res, err := c.Session.CallTool(ctx, &mcp.CallToolParams{Name: name, Arguments: args})
	if err != nil {
		return callResult{err: err}
	}
	if res.IsError {
		var texts []string
		for _, content := range res.Content {
			if tc, ok := content.(*mcp.TextContent); ok {
				texts = append(texts, tc.Text)
			}
		}
		return callResult{errText: strings.Join(texts, "\n")}
	}
	out := map[string]any{}
	b, err := json.Marshal(res.StructuredContent)
	if err == nil {
		err = json.Unmarshal(b, &out)
	}
	return callResult{out: out, err: err}
}

func applyArgs(p exampletest.Preview) map[string]any {
	return map[string]any{"change_id": p.ChangeID, "confirmation_token": p.ConfirmationToken}
}

// cli runs the operator's command with args and returns its stdout and
// exit status; its stderr goes to the test log.
func cli(t *testing.T, args ...string) (string, int) {
	t.Helper()
	bin := testbin.Build(t, "github.com/mcp-changeset/changeset-go/cmd/mcp-changeset")
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	cmd := exec.CommandContext(ctx, bin, args...)
	cmd.Env = append(os.Environ(), "MCP_CHANGESET_LEDGER=")
	var stdout, stderr strings.Builder
	cmd.Stdout, cmd.Stderr = &stdout, &stderr
	err := cmd.Run()
	var ee *exec.ExitError
	switch {
	case err == nil:
	case errors.As(err, &ee) && ee.Exited():
	default:
		t.Fatalf("mcp-changeset %s: %v\n%s", strings.Join(args, " "), err, stderr.String())
	}
	if stderr.Len() > 0 {
		t.Logf("mcp-changeset %s (stderr):\n%s", args[0], stderr.String())
	}
	return stdout.String(), cmd.ProcessState.ExitCode()
}

// A change previewed through one replica is applied through the other, and
// undone through the first: the ledger, not the process, holds the change
// and its tokens.
func TestReplicas_PreviewOnOneApplyOnTheOther(t *testing.T) {
	rs := startReplicas(t, 1)

	p := rs.ca.Preview("add_labels", args("octo/hello", 1, "docs"))
	if got := rs.cb.Status(p.ChangeID); got != "pending" {
		t.Fatalf("B sees the change A previewed as %q, want pending", got)
	}
	applied := rs.cb.Apply(p)
	if n := rs.putsTo(1); n != 1 {
		t.Fatalf("the fake GitHub got %d PUTs of issue 1, want 1: %v", n, rs.gh.requestLog())
	}
	wantLabels(t, rs.gh, issue1, "bug", "docs")
	if got := rs.ca.Status(p.ChangeID); got != "applied" {
		t.Fatalf("A reports the change B applied as %q, want applied", got)
	}
	rs.ca.ApplyRefused(p, fmt.Sprintf("change %s cannot be applied (status: applied)", p.ChangeID))

	// The scope is the identity, whichever replica serves it.
	bob := rs.b.Connect(t, bobToken)
	bob.Refused("get_change_status", map[string]any{"change_id": p.ChangeID}, "change "+p.ChangeID+" not found")

	rs.ca.Undo(applied) // the undo token B handed out works on A
	wantLabels(t, rs.gh, issue1, "bug")
	if got := rs.cb.Status(p.ChangeID); got != "undone" {
		t.Fatalf("B reports the change A undid as %q, want undone", got)
	}
	if n := rs.putsTo(1); n != 2 {
		t.Fatalf("the fake GitHub got %d PUTs of issue 1, want 2 (apply and undo)", n)
	}
}

// Both replicas get the same confirmation token at the same moment: one
// applies, the other is refused, and GitHub sees one PUT per change.
func TestReplicas_RacingTheSameTokenAppliesOnce(t *testing.T) {
	const changes = 20
	rs := startReplicas(t, changes)

	previews := make([]exampletest.Preview, changes)
	for i := range previews {
		c := rs.ca
		if i%2 == 1 {
			c = rs.cb
		}
		previews[i] = c.Preview("add_labels", args("octo/hello", i+1, "docs"))
	}

	losses := map[string]int{} // how the loser was refused, for the log
	winners := map[string]int{}
	for i, p := range previews {
		ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
		start := make(chan struct{})
		var results [2]callResult
		var wg sync.WaitGroup
		for r, c := range []*exampletest.Client{rs.ca, rs.cb} {
			wg.Add(1)
			go func() {
				defer wg.Done()
				<-start
				results[r] = call(ctx, c, "apply_change", applyArgs(p))
			}()
		}
		close(start)
		wg.Wait()
		cancel()

		won := 0
		for r, res := range results {
			replica := "AB"[r : r+1]
			switch {
			case res.err != nil:
				t.Fatalf("change %d: apply_change on %s: %v", i+1, replica, res.err)
			case res.errText == "":
				if res.out["status"] != "applied" || res.out["change_id"] != p.ChangeID {
					t.Fatalf("change %d: apply_change on %s = %v", i+1, replica, res.out)
				}
				won++
				winners[replica]++
			case strings.Contains(res.errText, "change "+p.ChangeID+" cannot be applied (status: "):
				_, status, _ := strings.Cut(res.errText, "(status: ")
				losses["cannot be applied (status: "+status]++
			case strings.Contains(res.errText, "change "+p.ChangeID+" was claimed by another request"):
				losses["claimed by another request"]++
			default:
				t.Fatalf("change %d: apply_change on %s was refused with %q, want a refusal for its status or a lost claim", i+1, replica, res.errText)
			}
		}
		if won != 1 {
			t.Fatalf("change %d: %d replicas applied it, want exactly 1: %+v", i+1, won, results)
		}
	}
	for i, p := range previews {
		if n := rs.putsTo(i + 1); n != 1 {
			t.Errorf("issue %d: the fake GitHub got %d PUTs, want 1", i+1, n)
		}
		wantLabels(t, rs.gh, fmt.Sprintf("octo/hello#%d", i+1), "bug", "docs")
		if got := rs.ca.Status(p.ChangeID); got != "applied" {
			t.Errorf("change %d is %q, want applied", i+1, got)
		}
	}
	t.Logf("winners by replica: %v; the losers were refused with: %v", winners, losses)
}

// Replica B is killed while its apply waits for GitHub's answer to the
// PUT. The change stays applying: no replica may apply it again, and an
// operator who checked GitHub closes it with the CLI.
func TestReplicas_KilledMidApplyIsLeftForTheOperator(t *testing.T) {
	rs := startReplicas(t, 1)
	p := rs.ca.Preview("add_labels", args("octo/hello", 1, "docs"))

	// Killed from the fake's handler, as soon as the PUT arrives: B cannot
	// get an answer, or give up on one, before it dies.
	rs.front.hold("/repos/octo/hello/issues/1/labels", func() { rs.b.Cmd.Process.Signal(syscall.SIGKILL) })
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	applyDone := make(chan callResult, 1)
	go func() { applyDone <- call(ctx, rs.cb, "apply_change", applyArgs(p)) }()

	select {
	case <-rs.front.arrived:
	case res := <-applyDone:
		t.Fatalf("apply_change on B ended before its PUT reached GitHub: %+v", res)
	case <-time.After(2 * time.Minute):
		t.Fatal("B's PUT never reached the fake GitHub")
	}
	err := rs.b.Wait(t, time.Minute)
	var ee *exec.ExitError
	if !errors.As(err, &ee) || ee.Sys().(syscall.WaitStatus).Signal() != syscall.SIGKILL {
		t.Fatalf("replica B exited with %v, want killed by SIGKILL", err)
	}
	select {
	case res := <-applyDone:
		if res.err == nil {
			t.Fatalf("apply_change on the killed replica returned %+v, want a transport error", res)
		}
	case <-time.After(time.Minute):
		t.Fatal("apply_change on the killed replica did not return")
	}

	out, code := cli(t, "list", "--status", "applying", "--ledger", rs.ledger, "--json")
	var listed struct {
		Changes []struct {
			ChangeID string `json:"change_id"`
			Status   string `json:"status"`
		} `json:"changes"`
	}
	if err := json.Unmarshal([]byte(out), &listed); code != 0 || err != nil {
		t.Fatalf("list: exit status %d, %v:\n%s", code, err, out)
	}
	if len(listed.Changes) != 1 || listed.Changes[0].ChangeID != p.ChangeID || listed.Changes[0].Status != "applying" {
		t.Fatalf("list --status applying = %+v, want only %s", listed.Changes, p.ChangeID)
	}

	rs.ca.ApplyRefused(p, fmt.Sprintf("change %s cannot be applied (status: applying)", p.ChangeID))
	if got := rs.ca.Status(p.ChangeID); got != "applying" {
		t.Fatalf("A reports %q, want applying", got)
	}
	// What the operator checks before reconciling: GitHub has no write.
	wantLabels(t, rs.gh, issue1, "bug")
	if n := rs.putsTo(1); n != 0 {
		t.Fatalf("the fake GitHub applied %d PUTs of issue 1, want none", n)
	}

	const note = "checked GitHub: not applied"
	out, code = cli(t, "reconcile", p.ChangeID, "--note", note, "--yes", "--ledger", rs.ledger)
	if code != 0 || !strings.Contains(out, "reconciled change "+p.ChangeID+": applying → apply_failed") {
		t.Fatalf("reconcile: exit status %d:\n%s", code, out)
	}
	out, code = cli(t, "show", p.ChangeID, "--ledger", rs.ledger, "--json")
	var shown struct {
		Change struct {
			ChangeID string `json:"change_id"`
			Status   string `json:"status"`
			Note     string `json:"note"`
		} `json:"change"`
	}
	if err := json.Unmarshal([]byte(out), &shown); code != 0 || err != nil {
		t.Fatalf("show: exit status %d, %v:\n%s", code, err, out)
	}
	// The ledger keeps the note with the operator's name after it.
	if shown.Change.ChangeID != p.ChangeID || shown.Change.Status != "apply_failed" ||
		!strings.HasPrefix(shown.Change.Note, note+" (operator:") {
		t.Fatalf("show = %+v, want apply_failed with the note %q (and who wrote it)", shown.Change, note)
	}
	if got := rs.ca.Status(p.ChangeID); got != "apply_failed" {
		t.Fatalf("A reports %q after the reconcile, want apply_failed", got)
	}
	rs.ca.ApplyRefused(p, fmt.Sprintf("change %s cannot be applied (status: apply_failed)", p.ChangeID))

	// Released only now: GitHub never applied the held PUT.
	rs.front.releaseHeld()
	wantLabels(t, rs.gh, issue1, "bug")
}
