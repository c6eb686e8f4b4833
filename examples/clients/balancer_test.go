//go:build linux

package clients

// The load-balancer test: two replicas of the notes example, serving one
// directory (--root) in stateless Streamable HTTP, their ledger one
// PostgreSQL database, user approval on, behind HAProxy (round robin, no
// stickiness), driven through the balancer by the official TypeScript SDK
// client (typescript/balancer.mjs). Nothing ties a client to a replica:
// the approval question travels sealed with the call (the key shared
// through the ledger), the data lives on the shared directory (a flock both
// processes take), the state of every change in the ledger.

import (
	"context"
	"database/sql"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/mcp-changeset/changeset-go/internal/testkit"

	_ "github.com/jackc/pgx/v5/stdlib" // the test reads the ledger's tables
	"github.com/mcp-changeset/changeset-go/examples/internal/exampletest"
	"github.com/mcp-changeset/changeset-go/internal/pgtest"
	"github.com/mcp-changeset/changeset-go/internal/testbin"
)

const balancerToken = "balancer-alice-0123456789abcdef0123"

// replica is one notes server behind the balancer.
type replica struct {
	name string // the server's name in haproxy.cfg, echoed in X-Replica
	proc *exampletest.Process
}

func TestBalancer_ReplicasBehindHAProxy(t *testing.T) {
	haproxy := requireHAProxy(t)
	node := requireNode(t)
	dir, err := filepath.Abs(tsDir)
	if err != nil {
		t.Fatal(err)
	}
	testkit.NpmCI(t, dir)
	dsn := pgtest.DSN(t)
	cli := testbin.Build(t, "github.com/mcp-changeset/changeset-go/cmd/mcp-changeset")
	start := time.Now()

	tokens := filepath.Join(t.TempDir(), "tokens")
	if err := os.WriteFile(tokens, []byte(balancerToken+" alice\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	root := t.TempDir()
	args := []string{"--root", root, "--http", "127.0.0.1:0", "--stateless", "--auth-token-file", tokens,
		"--ledger", dsn, "--user-approval"}
	// One replica starts first, so that the other finds the approval key
	// it stored; replica a serves the dashboard too.
	a := &replica{"a", exampletest.StartHTTP(t, "notes", append(slices.Clone(args), "--dashboard", "127.0.0.1:0"), exampletest.Guarded)}
	b := &replica{"b", exampletest.StartHTTP(t, "notes", args, exampletest.Guarded)}
	byName := map[string]*replica{"a": a, "b": b}
	login := strings.TrimSpace(a.proc.Stderr.WaitLine(t, "notes: dashboard: ", 10*time.Second))
	lb := startHAProxy(t, haproxy, [][2]string{{"a", hostPort(t, a.proc.URL)}, {"b", hostPort(t, b.proc.URL)}})

	db, err := sql.Open("pgx", dsn)
	if err != nil {
		t.Fatal(err)
	}
	defer db.Close()
	var keys int
	if err := db.QueryRow(`SELECT count(*) FROM meta WHERE key = 'changeset.approval_key.v1'`).Scan(&keys); err != nil || keys != 1 {
		t.Fatalf("approval keys in the ledger: %d (%v), want the one both replicas use", keys, err)
	}

	d := startDriver(t, node, dir, lb, balancerToken)
	if d.hello.Server != "notes" || !slices.Contains(d.hello.Tools, "apply_change") {
		t.Fatalf("through the balancer: server %q, tools %v", d.hello.Server, d.hello.Tools)
	}
	t.Logf("the TypeScript SDK negotiated protocol %s; approvals are sent as 2026-07-28 (see balancer.mjs)", d.hello.ProtocolVersion)

	// 1. A preview on one replica, the question asked by one and answered
	// on the other: the sealed state one replica made, the other opened.
	p := d.call("preview_write_note", map[string]any{"name": "one.txt", "content": "one\n"})
	id := p.StructuredContent["change_id"].(string)
	if p.StructuredContent["confirmation_token"] != nil {
		t.Fatalf("with user approval a preview returns no token: %v", p.StructuredContent)
	}
	// The SDK's own callTool speaks 2025-11-25, so the server cannot ask
	// the user: a tool error, nothing spent.
	var legacy outcome
	d.read(d.send(map[string]any{"op": "call", "tool": "apply_change", "args": map[string]any{"change_id": id}}), &legacy)
	if !legacy.IsError || !strings.Contains(legacy.Error, "nothing was spent") {
		t.Fatalf("apply_change over protocol %s: %+v, want a tool error that spends nothing", d.hello.ProtocolVersion, legacy)
	}
	t.Logf("apply_change over %s: %s", d.hello.ProtocolVersion, legacy.Error)
	// Round robin alternates: reads until the last one landed on the other
	// replica put the question on the preview's replica and the answer on
	// the other.
	for i, last := 0, legacy.Replica; last == p.Replica && i < 4; i++ {
		last = d.call("get_change_status", map[string]any{"change_id": id}).Replica
	}
	ap := d.approve("apply_change", map[string]any{"change_id": id})
	if ap.Result.StructuredContent["status"] != "applied" || !strings.Contains(ap.Ask.Message, "one.txt") {
		t.Fatalf("apply: %+v; the user was asked %q", ap.Result, ap.Ask.Message)
	}
	if ap.Ask.Replica == ap.Result.Replica || p.Replica == ap.Result.Replica || byName[p.Replica] == nil || byName[ap.Result.Replica] == nil {
		t.Fatalf("previewed on %q, asked on %q, applied on %q: want the apply on another replica than the preview and the question",
			p.Replica, ap.Ask.Replica, ap.Result.Replica)
	}
	t.Logf("change %s: previewed on %s, asked on %s, applied on %s", id, p.Replica, ap.Ask.Replica, ap.Result.Replica)
	if got := readFile(t, root, "one.txt"); got != "one\n" {
		t.Fatalf("one.txt = %q after the apply", got)
	}
	// The user declines an undo: nothing is spent, the change stays applied.
	var declined approval
	d.read(d.send(map[string]any{"op": "approve", "tool": "undo_change", "args": map[string]any{"change_id": id}, "accept": false}), &declined)
	if declined.Ask == nil || !declined.Result.IsError || !strings.Contains(declined.Result.Error, "declined") {
		t.Fatalf("a declined undo: %+v", declined)
	}
	if s := d.call("get_change_status", map[string]any{"change_id": id}); s.StructuredContent["status"] != "applied" {
		t.Fatalf("after the user declined the undo: %v", s.StructuredContent)
	}

	// 2. A run made through both replicas, undone from the dashboard of one.
	run := d.call("start_run", map[string]any{"label": "balanced run"})
	runID := run.StructuredContent["run_id"].(string)
	appliedOn := map[string]bool{}
	for _, name := range []string{"two.txt", "three.txt"} {
		p := d.call("preview_write_note", map[string]any{"name": name, "content": name + "\n", "run_id": runID})
		ap := d.approve("apply_change", map[string]any{"change_id": p.StructuredContent["change_id"]})
		if ap.Result.StructuredContent["status"] != "applied" {
			t.Fatalf("apply %s: %+v", name, ap.Result)
		}
		appliedOn[ap.Result.Replica] = true
	}
	if !appliedOn["a"] || !appliedOn["b"] {
		t.Fatalf("the run's changes were applied on %v, want both replicas", appliedOn)
	}
	page := loginDashboard(t, login).undoRun(runID)
	if !strings.Contains(page, "Run undone by") {
		t.Fatalf("the dashboard's confirm page:\n%s", page)
	}
	if r := d.call("get_run", map[string]any{"run_id": runID}); r.StructuredContent["status"] != "undone" {
		t.Fatalf("get_run after the dashboard's undo: %v", r.StructuredContent)
	}
	for _, name := range []string{"two.txt", "three.txt"} {
		if _, err := os.Stat(filepath.Join(root, name)); !os.IsNotExist(err) {
			t.Fatalf("%s after the run's undo: %v", name, err)
		}
	}

	// 3. A replica SIGKILLed mid-apply. The test holds the notes' lock, so
	// the apply claims the change and then blocks in the file write.
	p = d.call("preview_write_note", map[string]any{"name": "killed.txt", "content": "never\n"})
	stuck := p.StructuredContent["change_id"].(string)
	lockPath := filepath.Join(root, ".notes.lock")
	lock, err := os.OpenFile(lockPath, os.O_RDWR|os.O_CREATE, 0o600)
	if err != nil {
		t.Fatal(err)
	}
	defer lock.Close()
	if err := syscall.Flock(int(lock.Fd()), syscall.LOCK_EX); err != nil {
		t.Fatal(err)
	}
	pending := d.send(map[string]any{"op": "approve", "tool": "apply_change", "args": map[string]any{"change_id": stuck}, "accept": true})
	waitFor(t, "the change to be claimed (applying)", 15*time.Second, func() bool { return status(t, db, stuck) == "applying" })
	var victim *replica
	waitFor(t, "a replica blocked on the notes' lock", 10*time.Second, func() bool {
		pid := flockWaiter(t, lockPath)
		for _, r := range []*replica{a, b} {
			if r.proc.Cmd.Process.Pid == pid {
				victim = r
			}
		}
		return victim != nil
	})
	survivor := a
	if victim == a {
		survivor = b
	}
	if err := victim.proc.Cmd.Process.Kill(); err != nil {
		t.Fatal(err)
	}
	victim.proc.Wait(t, 10*time.Second)
	syscall.Flock(int(lock.Fd()), syscall.LOCK_UN)
	var killed approval
	d.read(pending, &killed)
	if killed.Ask == nil || killed.Result.Thrown == "" && !killed.Result.IsError {
		t.Fatalf("the apply whose replica was killed: %+v", killed)
	}
	t.Logf("replica %s killed mid-apply (asked on %s); the client saw: %s%s", victim.name, killed.Ask.Replica, killed.Result.Thrown, killed.Result.Error)
	if killed.Result.Replica == survivor.name {
		t.Fatalf("the killed apply was answered by the survivor %s: %+v", survivor.name, killed)
	}
	if got := status(t, db, stuck); got != "applying" {
		t.Fatalf("after the kill the change is %s, want applying", got)
	}
	if _, err := os.Stat(filepath.Join(root, "killed.txt")); !os.IsNotExist(err) {
		t.Fatalf("killed.txt after the kill: %v", err)
	}

	// The survivor serves on through the balancer, which routes around
	// the dead backend, while the operator reconciles.
	for i, name := range []string{"after1.txt", "after2.txt"} {
		p := d.call("preview_write_note", map[string]any{"name": name, "content": "ok\n"})
		ap := d.approve("apply_change", map[string]any{"change_id": p.StructuredContent["change_id"]})
		if ap.Result.StructuredContent["status"] != "applied" || p.Replica != survivor.name || ap.Ask.Replica != survivor.name || ap.Result.Replica != survivor.name {
			t.Fatalf("after the kill, change %d: preview on %q, asked on %q, applied on %q (%+v); want all on %s",
				i, p.Replica, ap.Ask.Replica, ap.Result.Replica, ap.Result, survivor.name)
		}
	}
	if s := d.call("get_change_status", map[string]any{"change_id": stuck}); s.StructuredContent["status"] != "applying" {
		t.Fatalf("get_change_status of the stuck change: %v", s.StructuredContent)
	}
	out, err := exec.Command(cli, "reconcile", "--ledger", dsn, "--note", "killed before writing; killed.txt absent", "--yes", stuck).CombinedOutput()
	if err != nil || !strings.Contains(string(out), "applying → apply_failed") {
		t.Fatalf("mcp-changeset reconcile: %v\n%s", err, out)
	}
	if strings.Contains(string(out), dsn) {
		t.Fatal("reconcile printed the ledger's URL")
	}
	if s := d.call("get_change_status", map[string]any{"change_id": stuck}); s.StructuredContent["status"] != "apply_failed" {
		t.Fatalf("get_change_status after reconcile: %v", s.StructuredContent)
	}
	if got := readFile(t, root, "after2.txt"); got != "ok\n" {
		t.Fatalf("after2.txt = %q", got)
	}
	t.Logf("scenario took %v (victim %s)", time.Since(start).Round(time.Millisecond), victim.name)
}

// hostPort is the host:port of an http:// URL.
func hostPort(t *testing.T, u string) string {
	t.Helper()
	rest, ok := strings.CutPrefix(u, "http://")
	hp, _, _ := strings.Cut(rest, "/")
	if _, port, found := strings.Cut(hp, ":"); !ok || !found || port == "" {
		t.Fatalf("cannot read host:port from %q", u)
	} else if _, err := strconv.Atoi(port); err != nil {
		t.Fatal(err)
	}
	return hp
}

// status reads a change's status straight from the ledger.
func status(t *testing.T, db *sql.DB, id string) string {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	var s string
	if err := db.QueryRowContext(ctx, `SELECT status FROM changes WHERE id = $1`, id).Scan(&s); err != nil {
		t.Fatalf("status of %s: %v", id, err)
	}
	return s
}

func readFile(t *testing.T, dir, name string) string {
	t.Helper()
	b, err := os.ReadFile(filepath.Join(dir, name))
	if err != nil {
		t.Fatal(err)
	}
	return string(b)
}
