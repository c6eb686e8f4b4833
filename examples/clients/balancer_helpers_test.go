//go:build linux

package clients

// Helpers of balancer_test.go: HAProxy in front of the replicas, the
// TypeScript driver (typescript/balancer.mjs), the dashboard over plain
// HTTP, and who waits for a flock (/proc/locks).

import (
	"bufio"
	"encoding/json"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/http/cookiejar"
	"net/url"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/mcp-changeset/changeset-go/examples/internal/exampletest"
)

// envRequireHAProxy, set to 1 (as CI does), turns the skip without
// haproxy into a failure.
const envRequireHAProxy = "CHANGESET_REQUIRE_HAPROXY"

// requireHAProxy returns haproxy's path, or skips the test (fails it under
// CHANGESET_REQUIRE_HAPROXY=1) when it is missing.
func requireHAProxy(t *testing.T) string {
	t.Helper()
	for _, p := range []string{"/usr/sbin/haproxy"} {
		if _, err := os.Stat(p); err == nil {
			return p
		}
	}
	if p, err := exec.LookPath("haproxy"); err == nil {
		return p
	}
	if os.Getenv(envRequireHAProxy) == "1" {
		t.Fatalf("%s=1 but haproxy is missing (apt-get install haproxy)", envRequireHAProxy)
	}
	t.Skipf("SKIPPING the load-balancer test: haproxy is missing (apt-get install haproxy; set %s=1 to make this a failure)", envRequireHAProxy)
	return ""
}

// haproxyConfig is the balancer: round robin, no stickiness, HTTP mode,
// and a response header naming the replica that served each request.
// Health checks every 200 ms take a dead replica out; a request that cannot
// connect to one is retried on the other (redispatch). A request already
// sent is never retried: a tool call is not idempotent.
const haproxyConfig = `global
    log stderr format raw local0 info

defaults
    mode http
    log global
    option httplog
    option redispatch
    retries 2
    timeout connect 1s
    timeout client 20s
    timeout server 20s
    timeout http-request 5s

frontend mcp
    bind 127.0.0.1:%d
    default_backend replicas

backend replicas
    balance roundrobin
    http-response set-header X-Replica %%s
    option httpchk
    http-check send meth GET uri /mcp ver HTTP/1.1 hdr Host 127.0.0.1
    http-check expect rstatus ^(401|405)$
    default-server check inter 200ms fall 1 rise 1
%s`

// startHAProxy runs haproxy in the foreground (-db) in front of servers
// (name → host:port) and returns its MCP URL. It stops when the test ends.
func startHAProxy(t *testing.T, bin string, servers [][2]string) string {
	t.Helper()
	port := freePort(t)
	var lines strings.Builder
	for _, s := range servers {
		fmt.Fprintf(&lines, "    server %s %s\n", s[0], s[1])
	}
	cfg := filepath.Join(t.TempDir(), "haproxy.cfg")
	if err := os.WriteFile(cfg, []byte(fmt.Sprintf(haproxyConfig, port, lines.String())), 0o600); err != nil {
		t.Fatal(err)
	}
	cmd := exec.Command(bin, "-f", cfg, "-db")
	log := new(exampletest.Buffer)
	cmd.Stdout, cmd.Stderr = log, log
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		cmd.Process.Signal(syscall.SIGTERM)
		waitOrKill(cmd, 5*time.Second)
		if t.Failed() {
			t.Logf("haproxy log:\n%s", log)
		}
	})
	addr := fmt.Sprintf("127.0.0.1:%d", port)
	waitFor(t, "haproxy listening on "+addr, 10*time.Second, func() bool {
		c, err := net.Dial("tcp", addr)
		if err == nil {
			c.Close()
		}
		return err == nil
	})
	return "http://" + addr + "/mcp"
}

// freePort returns a loopback port that was free a moment ago.
func freePort(t *testing.T) int {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer ln.Close()
	return ln.Addr().(*net.TCPAddr).Port
}

// waitFor polls ok every 20 ms until it holds, failing the test after
// timeout.
func waitFor(t *testing.T, what string, timeout time.Duration, ok func() bool) {
	t.Helper()
	deadline := time.Now().Add(timeout)
	for !ok() {
		if time.Now().After(deadline) {
			t.Fatalf("timed out after %v waiting for %s", timeout, what)
		}
		time.Sleep(20 * time.Millisecond)
	}
}

// driver is typescript/balancer.mjs: commands go to its stdin, answers
// come back one JSON line each.
type driver struct {
	t      *testing.T
	stdin  io.WriteCloser
	lines  chan string
	stderr *exampletest.Buffer
	next   int
	hello  struct {
		Server          string   `json:"server"`
		ProtocolVersion string   `json:"protocolVersion"`
		Tools           []string `json:"tools"`
		Error           string   `json:"error"`
	}
}

// outcome is one tool result as the driver reports it.
type outcome struct {
	Replica           string         `json:"replica"`
	IsError           bool           `json:"isError"`
	Error             string         `json:"error"`
	StructuredContent map[string]any `json:"structuredContent"`
	Thrown            string         `json:"thrown"`
}

// approval is the driver's answer to an "approve" command: the question
// (nil when the tool refused before asking) and the result of the answer.
type approval struct {
	Ask *struct {
		Replica string `json:"replica"`
		Message string `json:"message"`
	} `json:"ask"`
	Result outcome `json:"result"`
	Thrown string  `json:"thrown"`
}

// startDriver runs balancer.mjs against url, presenting token.
func startDriver(t *testing.T, node, dir, url, token string) *driver {
	t.Helper()
	cmd := exec.Command(node, "balancer.mjs", url)
	cmd.Dir = dir
	cmd.Env = append(os.Environ(), "MCP_BEARER_TOKEN="+token)
	d := &driver{t: t, lines: make(chan string, 16), stderr: new(exampletest.Buffer)}
	cmd.Stderr = d.stderr
	var err error
	if d.stdin, err = cmd.StdinPipe(); err != nil {
		t.Fatal(err)
	}
	stdout, err := cmd.StdoutPipe()
	if err != nil {
		t.Fatal(err)
	}
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	go func() {
		sc := bufio.NewScanner(stdout)
		sc.Buffer(nil, 1<<20)
		for sc.Scan() {
			d.lines <- sc.Text()
		}
		close(d.lines)
	}()
	t.Cleanup(func() {
		d.stdin.Close()
		waitOrKill(cmd, 5*time.Second)
		if t.Failed() {
			t.Logf("balancer.mjs stderr:\n%s", d.stderr)
		}
	})
	d.read(0, &d.hello)
	if d.hello.Error != "" {
		t.Fatalf("balancer.mjs could not connect through the balancer: %s", d.hello.Error)
	}
	return d
}

// send writes a command and returns its id; read collects the answer.
func (d *driver) send(cmd map[string]any) int {
	d.next++
	cmd["id"] = d.next
	b, _ := json.Marshal(cmd)
	if _, err := d.stdin.Write(append(b, '\n')); err != nil {
		d.t.Fatalf("balancer.mjs: %v; stderr:\n%s", err, d.stderr)
	}
	return d.next
}

func (d *driver) read(id int, into any) {
	d.t.Helper()
	select {
	case line, ok := <-d.lines:
		if !ok {
			d.t.Fatalf("balancer.mjs exited; stderr:\n%s", d.stderr)
		}
		var head struct {
			ID     int    `json:"id"`
			Thrown string `json:"thrown"`
		}
		if err := json.Unmarshal([]byte(line), &head); err != nil || head.ID != id {
			d.t.Fatalf("balancer.mjs answered %q to command %d (%v)", line, id, err)
		}
		if head.Thrown != "" {
			d.t.Fatalf("command %d threw in balancer.mjs: %s", id, head.Thrown)
		}
		if err := json.Unmarshal([]byte(line), into); err != nil {
			d.t.Fatal(err)
		}
	case <-time.After(30 * time.Second):
		d.t.Fatalf("balancer.mjs did not answer command %d within 30 s; stderr:\n%s", id, d.stderr)
	}
}

// call calls a tool the usual way (client.callTool) and fails the test on
// a tool error.
func (d *driver) call(tool string, args map[string]any) outcome {
	d.t.Helper()
	var o outcome
	d.read(d.send(map[string]any{"op": "call", "tool": tool, "args": args}), &o)
	if o.IsError || o.StructuredContent == nil {
		d.t.Fatalf("%s %v through the balancer: tool error %q", tool, args, o.Error)
	}
	return o
}

// approve calls a tool that asks the user, who accepts.
func (d *driver) approve(tool string, args map[string]any) approval {
	d.t.Helper()
	var a approval
	d.read(d.send(map[string]any{"op": "approve", "tool": tool, "args": args, "accept": true}), &a)
	if a.Ask == nil || a.Result.IsError || a.Result.Thrown != "" || a.Result.StructuredContent == nil {
		d.t.Fatalf("%s %v through the balancer: asked %v, result %+v", tool, args, a.Ask != nil, a.Result)
	}
	return a
}

// dashboard drives the dashboard over plain HTTP, as a browser would,
// with a cookie jar.
type dashboard struct {
	t    *testing.T
	base string
	http *http.Client
}

var (
	csrfField   = regexp.MustCompile(`name="csrf" value="([^"]+)"`)
	planField   = regexp.MustCompile(`name="plan" value="([^"]+)"`)
	changeField = regexp.MustCompile(`name="change" value="([^"]+)"`)
)

// loginDashboard opens the login link the server printed.
func loginDashboard(t *testing.T, loginURL string) *dashboard {
	t.Helper()
	jar, _ := cookiejar.New(nil)
	u, err := url.Parse(loginURL)
	if err != nil {
		t.Fatal(err)
	}
	d := &dashboard{t: t, base: u.Scheme + "://" + u.Host, http: &http.Client{Jar: jar, Timeout: 10 * time.Second}}
	if code, body := d.do("GET", loginURL, nil); code != http.StatusOK || !strings.Contains(body, "Runs") {
		t.Fatalf("dashboard login: %d\n%s", code, body)
	}
	return d
}

func (d *dashboard) do(method, u string, form url.Values) (int, string) {
	d.t.Helper()
	if !strings.HasPrefix(u, "http") {
		u = d.base + u
	}
	var resp *http.Response
	var err error
	if method == "POST" {
		resp, err = d.http.PostForm(u, form)
	} else {
		resp, err = d.http.Get(u)
	}
	if err != nil {
		d.t.Fatal(err)
	}
	defer resp.Body.Close()
	b, _ := io.ReadAll(resp.Body)
	return resp.StatusCode, string(b)
}

// undoRun reviews the run's undo (the dry run) and confirms it, and
// returns the page it lands on.
func (d *dashboard) undoRun(runID string) string {
	d.t.Helper()
	code, page := d.do("GET", "/runs/"+runID, nil)
	m := csrfField.FindStringSubmatch(page)
	if code != http.StatusOK || m == nil || !strings.Contains(page, "/runs/"+runID+"/dry-run") {
		d.t.Fatalf("run page: %d, no dry-run form\n%s", code, page)
	}
	code, dry := d.do("POST", "/runs/"+runID+"/dry-run", url.Values{"csrf": {m[1]}})
	plan := planField.FindStringSubmatch(dry)
	if code != http.StatusOK || plan == nil || !strings.Contains(dry, "Nothing has been changed yet") {
		d.t.Fatalf("dry run: %d\n%s", code, dry)
	}
	form := url.Values{"csrf": {m[1]}, "plan": {plan[1]}}
	for _, c := range changeField.FindAllStringSubmatch(dry, -1) {
		form.Add("change", c[1])
	}
	if len(form["change"]) == 0 {
		d.t.Fatalf("the dry run plans no change\n%s", dry)
	}
	code, done := d.do("POST", "/runs/"+runID+"/undo", form)
	if code != http.StatusOK {
		d.t.Fatalf("confirm undo: %d\n%s", code, done)
	}
	return done
}

// flockWaiter returns the pid of a process blocked in flock on the file
// at path, from /proc/locks, or 0 if none waits.
func flockWaiter(t *testing.T, path string) int {
	t.Helper()
	var st syscall.Stat_t
	if err := syscall.Stat(path, &st); err != nil {
		t.Fatal(err)
	}
	b, err := os.ReadFile("/proc/locks")
	if err != nil {
		t.Fatal(err)
	}
	// "1: -> FLOCK  ADVISORY  WRITE 4242 08:01:1234567 0 EOF": a waiter
	// ("->") for the lock on device 08:01, inode 1234567.
	suffix := ":" + strconv.FormatUint(st.Ino, 10)
	for _, line := range strings.Split(string(b), "\n") {
		f := strings.Fields(line)
		if len(f) >= 7 && f[1] == "->" && f[2] == "FLOCK" && strings.HasSuffix(f[6], suffix) {
			pid, _ := strconv.Atoi(f[5])
			return pid
		}
	}
	return 0
}

// waitOrKill waits for cmd, asked to stop, to exit, and kills it when it
// has not within timeout.
func waitOrKill(cmd *exec.Cmd, timeout time.Duration) {
	done := make(chan struct{})
	go func() { cmd.Wait(); close(done) }()
	select {
	case <-done:
	case <-time.After(timeout):
		cmd.Process.Kill()
		<-done
	}
}
