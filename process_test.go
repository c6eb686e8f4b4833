package changeset_test

import (
	"bufio"
	"context"
	"encoding/json"
	"fmt"
	"math/rand/v2"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	changeset "github.com/mcp-changeset/changeset-go"
	"github.com/mcp-changeset/changeset-go/ledger"
	"github.com/modelcontextprotocol/go-sdk/mcp"
)

// The tests in this file start copies of the test binary as separate OS
// processes sharing one ledger file: goroutines would share one database
// handle and prove much less. TestMain turns a copy into a helper when
// CHANGESET_HELPER is set.

func TestMain(m *testing.M) {
	switch os.Getenv("CHANGESET_HELPER") {
	case "":
		os.Exit(runTests(m)) // suite_test.go
	case "race":
		os.Exit(helperRace())
	case "hang":
		os.Exit(helperHang())
	case "undorun":
		os.Exit(helperUndoRun())
	case "faultkill": // fault_test.go
		os.Exit(helperFaultKill())
	case "faultlock":
		os.Exit(helperFaultLock())
	case "lazykill": // durability_test.go
		os.Exit(helperLazyKill())
	default:
		fmt.Fprintln(os.Stderr, "unknown helper")
		os.Exit(3)
	}
}

// markerIn is the payload of the process operations: the file an apply
// appends to, so that the parent can count applies across processes.
type markerIn struct {
	Marker string `json:"marker"`
	Tag    string `json:"tag"`
}

func registerProcessOps(g *changeset.Guard) {
	preview := func(ctx context.Context, in markerIn) (*changeset.Proposal[markerIn], error) {
		return &changeset.Proposal[markerIn]{Payload: in, Summary: "append " + in.Tag}, nil
	}
	changeset.Register(g, &mcp.Tool{Name: "append"}, changeset.Operation[markerIn, markerIn, struct{}]{
		AllowEmptyDiff: true, // its diff is not what the test is about
		Preview:        preview,
		Apply: func(ctx context.Context, p markerIn) (struct{}, error) {
			return struct{}{}, appendLine(p.Marker, p.Tag)
		},
	})
	changeset.Register(g, &mcp.Tool{Name: "hang"}, changeset.Operation[markerIn, markerIn, struct{}]{
		AllowEmptyDiff: true, // its diff is not what the test is about
		Preview:        preview,
		Apply: func(ctx context.Context, p markerIn) (struct{}, error) {
			if err := appendLine(p.Marker, "started"); err != nil {
				return struct{}{}, err
			}
			time.Sleep(time.Hour) // the parent kills the process here
			return struct{}{}, nil
		},
	})
}

// fileIn is the payload of putfile: write Content to Path; every undo
// appends a line to Marker.
type fileIn struct {
	Path    string `json:"path"`
	Content string `json:"content"`
	Marker  string `json:"marker"`
}

type fileState struct {
	Exists  bool   `json:"exists"`
	Content string `json:"content"`
}

func readFileState(path string) fileState {
	b, err := os.ReadFile(path)
	if err != nil {
		return fileState{}
	}
	return fileState{Exists: true, Content: string(b)}
}

func registerFileOp(g *changeset.Guard) {
	changeset.Register(g, &mcp.Tool{Name: "putfile"}, changeset.Operation[fileIn, fileIn, fileState]{
		AllowEmptyDiff: true, // its diff is not what the test is about
		Preview: func(ctx context.Context, in fileIn) (*changeset.Proposal[fileIn], error) {
			return &changeset.Proposal[fileIn]{Payload: in, Resource: "file:" + in.Path}, nil
		},
		Apply: func(ctx context.Context, p fileIn) (fileState, error) {
			prev := readFileState(p.Path)
			return prev, os.WriteFile(p.Path, []byte(p.Content), 0o600)
		},
		Undo: func(ctx context.Context, p fileIn, prev fileState) error {
			if err := appendLine(p.Marker, "undo "+p.Path); err != nil {
				return err
			}
			if !prev.Exists {
				return os.Remove(p.Path)
			}
			return os.WriteFile(p.Path, []byte(prev.Content), 0o600)
		},
		Observe: func(ctx context.Context, p fileIn) (any, error) { return readFileState(p.Path), nil },
	})
}

func appendLine(path, line string) error {
	f, err := os.OpenFile(path, os.O_APPEND|os.O_CREATE|os.O_WRONLY, 0o600)
	if err != nil {
		return err
	}
	if _, err := f.WriteString(line + "\n"); err != nil {
		f.Close()
		return err
	}
	return f.Close()
}

func helperGuard() (*changeset.Guard, error) {
	g, err := changeset.New(nil, changeset.Options{LedgerPath: os.Getenv("CHANGESET_LEDGER"), WriteMode: changeset.WriteGuarded, Durability: testDurability()})
	if err != nil {
		return nil, err
	}
	registerProcessOps(g)
	registerFileOp(g)
	return g, nil
}

// helperUndoRun calls undo_run(dry_run=false) through an MCP client on the
// run CHANGESET_RUN with the token CHANGESET_TOKEN, after waiting for the
// file CHANGESET_GO to appear (so that helpers start together), and prints
// "ok <report>" or "refused <message>".
func helperUndoRun() int {
	server := mcp.NewServer(&mcp.Implementation{Name: "helper", Version: "1"}, nil)
	g, err := changeset.New(server, changeset.Options{LedgerPath: os.Getenv("CHANGESET_LEDGER"), WriteMode: changeset.WriteGuarded, Durability: testDurability()})
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		return 1
	}
	defer g.Close()
	registerFileOp(g)
	ctx := context.Background()
	st, ct := mcp.NewInMemoryTransports()
	if _, err := server.Connect(ctx, st, nil); err != nil {
		return 1
	}
	cs, err := mcp.NewClient(&mcp.Implementation{Name: "c", Version: "1"}, nil).Connect(ctx, ct, nil)
	if err != nil {
		return 1
	}
	for {
		if _, err := os.Stat(os.Getenv("CHANGESET_GO")); err == nil {
			break
		}
		time.Sleep(time.Millisecond)
	}
	res, err := cs.CallTool(ctx, &mcp.CallToolParams{Name: "undo_run", Arguments: map[string]any{
		"run_id": os.Getenv("CHANGESET_RUN"), "dry_run": false, "confirmation_token": os.Getenv("CHANGESET_TOKEN")}})
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		return 1
	}
	if res.IsError {
		fmt.Printf("refused %s\n", res.Content[0].(*mcp.TextContent).Text)
		return 0
	}
	out, _ := json.Marshal(res.StructuredContent)
	fmt.Printf("ok %s\n", out)
	return 0
}

// helperRace applies every change named in CHANGESET_CHANGES (id=token,
// comma-separated) in a random order, as fast as it can, and prints one
// line per outcome: "ok ID" or "refused ID: message".
func helperRace() int {
	g, err := helperGuard()
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		return 1
	}
	defer g.Close()
	pairs := strings.Split(os.Getenv("CHANGESET_CHANGES"), ",")
	rand.Shuffle(len(pairs), func(i, j int) { pairs[i], pairs[j] = pairs[j], pairs[i] })
	for _, p := range pairs {
		id, token, _ := strings.Cut(p, "=")
		if _, err := g.Apply(context.Background(), id, token); err != nil {
			fmt.Printf("refused %s: %v\n", id, err)
		} else {
			fmt.Printf("ok %s\n", id)
		}
	}
	return 0
}

// helperHang applies CHANGESET_CHANGES's single change, whose apply never
// returns.
func helperHang() int {
	g, err := helperGuard()
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		return 1
	}
	id, token, _ := strings.Cut(os.Getenv("CHANGESET_CHANGES"), "=")
	_, err = g.Apply(context.Background(), id, token)
	fmt.Fprintln(os.Stderr, "apply returned:", err)
	return 1
}

func helperCmd(t *testing.T, mode, ledgerPath, changes string) *exec.Cmd {
	cmd := exec.Command(os.Args[0], "-test.run=^$")
	cmd.Env = append(os.Environ(), "CHANGESET_HELPER="+mode, "CHANGESET_LEDGER="+ledgerPath, "CHANGESET_CHANGES="+changes)
	cmd.Stderr = &testWriter{t: t}
	return cmd
}

type testWriter struct{ t *testing.T }

func (w *testWriter) Write(p []byte) (int, error) {
	w.t.Logf("helper: %s", strings.TrimSpace(string(p)))
	return len(p), nil
}

func TestProcesses_RacingOneTokenApplyExactlyOnce(t *testing.T) {
	if testing.Short() {
		t.Skip("starts processes")
	}
	eachDurability(t, func(t *testing.T) {
		dir := t.TempDir()
		path := filepath.Join(dir, "ledger.db")
		marker := filepath.Join(dir, "applies.txt")
		g, err := changeset.New(nil, changeset.Options{LedgerPath: path, WriteMode: changeset.WriteGuarded, Durability: testDurability()})
		if err != nil {
			t.Fatal(err)
		}
		defer g.Close()
		registerProcessOps(g)

		const changes, processes = 40, 6
		var pairs []string
		for i := range changes {
			p, err := g.Preview(context.Background(), "append", markerIn{Marker: marker, Tag: fmt.Sprint(i)})
			if err != nil {
				t.Fatal(err)
			}
			pairs = append(pairs, p.ChangeID+"="+p.ConfirmationToken)
		}
		arg := strings.Join(pairs, ",")

		var mu sync.Mutex
		wins := map[string]int{}
		var wg sync.WaitGroup
		for range processes {
			wg.Add(1)
			go func() {
				defer wg.Done()
				out, err := helperCmd(t, "race", path, arg).Output()
				if err != nil {
					t.Errorf("helper: %v", err)
					return
				}
				mu.Lock()
				defer mu.Unlock()
				sc := bufio.NewScanner(strings.NewReader(string(out)))
				for sc.Scan() {
					line := sc.Text()
					if id, ok := strings.CutPrefix(line, "ok "); ok {
						wins[id]++
					} else if !strings.Contains(line, "cannot be applied (status: ") && !strings.Contains(line, "claimed by another request") {
						t.Errorf("unexpected refusal: %s", line)
					}
				}
			}()
		}
		wg.Wait()

		data, err := os.ReadFile(marker)
		if err != nil {
			t.Fatal(err)
		}
		applies := map[string]int{}
		for _, l := range strings.Fields(string(data)) {
			applies[l]++
		}
		for i := range changes {
			if n := applies[fmt.Sprint(i)]; n != 1 {
				t.Errorf("change %d applied %d times", i, n)
			}
		}
		for _, p := range pairs {
			id, _, _ := strings.Cut(p, "=")
			if wins[id] != 1 {
				t.Errorf("change %s: %d processes were told it applied", id, wins[id])
			}
			rec, err := g.Record(context.Background(), id)
			if err != nil || rec.Status != ledger.Applied {
				t.Errorf("change %s: %v %v", id, rec.Status, err)
			}
		}
		verifyChain(t, g.Ledger())
	})
}

// verifyChain fails t unless l's history is the hash chain the ledger
// wrote and every row agrees with it: what processes racing, or killed
// midway, must leave.
func verifyChain(t *testing.T, l *ledger.Ledger) {
	t.Helper()
	v, err := l.Verify(context.Background(), ledger.VerifyOptions{})
	if err != nil {
		t.Fatalf("verify: %v", err)
	}
	for _, p := range v.Problems {
		t.Errorf("verify: %s", p)
	}
}

func TestProcesses_KilledMidApplyStaysApplyingUntilReconciled(t *testing.T) {
	if testing.Short() {
		t.Skip("starts processes")
	}
	eachDurability(t, func(t *testing.T) {
		dir := t.TempDir()
		path := filepath.Join(dir, "ledger.db")
		marker := filepath.Join(dir, "started.txt")
		g, err := changeset.New(nil, changeset.Options{LedgerPath: path, WriteMode: changeset.WriteGuarded, Durability: testDurability()})
		if err != nil {
			t.Fatal(err)
		}
		defer g.Close()
		registerProcessOps(g)
		ctx := context.Background()
		p, err := g.Preview(ctx, "hang", markerIn{Marker: marker, Tag: "x"})
		if err != nil {
			t.Fatal(err)
		}

		cmd := helperCmd(t, "hang", path, p.ChangeID+"="+p.ConfirmationToken)
		if err := cmd.Start(); err != nil {
			t.Fatal(err)
		}
		deadline := time.Now().Add(30 * time.Second)
		for {
			if _, err := os.Stat(marker); err == nil {
				break
			}
			if time.Now().After(deadline) {
				cmd.Process.Kill()
				t.Fatal("the helper never started its apply")
			}
			time.Sleep(10 * time.Millisecond)
		}
		if err := cmd.Process.Signal(syscall.SIGKILL); err != nil {
			t.Fatal(err)
		}
		_ = cmd.Wait()

		rec, err := g.Record(ctx, p.ChangeID)
		if err != nil || rec.Status != ledger.Applying {
			t.Fatalf("after SIGKILL: %v %v, want applying", rec.Status, err)
		}
		// Nothing moves it back to pending: not a retry with the same token,
		// not expiry, not pruning.
		if _, err := g.Apply(ctx, p.ChangeID, p.ConfirmationToken); err == nil ||
			!strings.Contains(err.Error(), "cannot be applied (status: applying)") {
			t.Fatalf("retry: %v", err)
		}
		if ids, err := g.Ledger().ExpireStale(ctx); err != nil || len(ids) != 0 {
			t.Fatalf("ExpireStale touched %v (%v)", ids, err)
		}
		if res, err := g.Ledger().Prune(ctx, ledger.PruneOptions{IncludeApplied: true}); err != nil || len(res.Changes) != 0 {
			t.Fatalf("Prune deleted %v (%v)", res.Changes, err)
		}
		if _, err := g.Ledger().Reconcile(ctx, p.ChangeID, "", "ops"); err == nil {
			t.Fatal("reconcile without a note accepted")
		}
		c, err := g.Ledger().Reconcile(ctx, p.ChangeID, "checked the remote system: not written", "operator:ops")
		if err != nil || c.Status != ledger.ApplyFailed {
			t.Fatalf("Reconcile: %v %v", c, err)
		}
		if _, err := g.Ledger().Reconcile(ctx, p.ChangeID, "again", "operator:ops"); err == nil {
			t.Fatal("reconciled twice")
		}
		rec, _ = g.Record(ctx, p.ChangeID)
		if rec.Status != ledger.ApplyFailed || !strings.Contains(rec.Note, "not written") {
			t.Fatalf("after reconcile: %s %q", rec.Status, rec.Note)
		}
		verifyChain(t, g.Ledger())
	})
}

func TestProcesses_ConcurrentUndoRunUndoesOnce(t *testing.T) {
	if testing.Short() {
		t.Skip("starts processes")
	}
	eachDurability(t, func(t *testing.T) {
		dir := t.TempDir()
		path := filepath.Join(dir, "ledger.db")
		marker := filepath.Join(dir, "undos.txt")
		server := mcp.NewServer(&mcp.Implementation{Name: "p", Version: "1"}, nil)
		g, err := changeset.New(server, changeset.Options{LedgerPath: path, WriteMode: changeset.WriteGuarded, Durability: testDurability()})
		if err != nil {
			t.Fatal(err)
		}
		defer g.Close()
		registerFileOp(g)
		cs := connect(t, server)
		run := mustCall(t, cs, "start_run", map[string]any{"label": "files"})["run_id"].(string)
		const files = 5
		for i := range files {
			p := mustCall(t, cs, "preview_putfile", map[string]any{"run_id": run, "path": filepath.Join(dir, fmt.Sprintf("f%d", i)), "content": "x", "marker": marker})
			mustCall(t, cs, "apply_change", map[string]any{"change_id": p["change_id"], "confirmation_token": p["confirmation_token"]})
		}
		token := mustCall(t, cs, "undo_run", map[string]any{"run_id": run})["confirmation_token"].(string)

		goFile := filepath.Join(dir, "go")
		var outs [2][]byte
		var wg sync.WaitGroup
		for i := range outs {
			cmd := helperCmd(t, "undorun", path, "")
			cmd.Env = append(cmd.Env, "CHANGESET_RUN="+run, "CHANGESET_TOKEN="+token, "CHANGESET_GO="+goFile)
			wg.Add(1)
			go func() {
				defer wg.Done()
				out, err := cmd.Output()
				if err != nil {
					t.Errorf("helper: %v", err)
				}
				outs[i] = out
			}()
		}
		time.Sleep(300 * time.Millisecond) // let both helpers open the ledger
		os.WriteFile(goFile, nil, 0o600)
		wg.Wait()

		undid := 0
		for _, out := range outs {
			line := strings.TrimSpace(string(out))
			switch {
			case strings.HasPrefix(line, "ok ") && strings.Contains(line, `"undone":[{`):
				undid++
			case strings.HasPrefix(line, "refused ") && strings.Contains(line, "being undone"):
			case strings.HasPrefix(line, "ok "): // the stored report, if the other finished first
			default:
				t.Errorf("helper said %q", line)
			}
		}
		data, _ := os.ReadFile(marker)
		if n := strings.Count(string(data), "undo "); n != files {
			t.Fatalf("%d undo writes, want %d: the run was undone twice or not at all", n, files)
		}
		if undid < 1 {
			t.Fatal("no helper undid the run")
		}
		for i := range files {
			if _, err := os.Stat(filepath.Join(dir, fmt.Sprintf("f%d", i))); err == nil {
				t.Errorf("file %d still exists", i)
			}
		}
	})
}
