package main

import (
	"bufio"
	"context"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"

	changeset "github.com/mcp-changeset/changeset-go"
	"github.com/mcp-changeset/changeset-go/ledger"
)

// Helper processes: the test binary runs helperMain instead of the tests
// when helperEnv is set.
const (
	helperEnv       = "MCP_CHANGESET_TEST_HELPER"
	helperLedgerEnv = "MCP_CHANGESET_TEST_LEDGER"
	helperChangeEnv = "MCP_CHANGESET_TEST_CHANGE" // ID=TOKEN
)

// helperHang applies one change of the hang operation, whose apply never
// returns: the parent kills the process mid-apply.
func helperHang(path, change string) int {
	g, err := changeset.New(nil, changeset.Options{LedgerPath: path, WriteMode: changeset.WriteGuarded})
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		return 1
	}
	registerOps(g, &store{m: map[string]string{}})
	id, token, _ := strings.Cut(change, "=")
	_, err = g.Apply(context.Background(), id, token)
	fmt.Fprintln(os.Stderr, "apply returned:", err)
	return 1
}

// helperMain runs the helper named mode and returns its exit status.
func helperMain(mode string) int {
	switch mode {
	case "writer":
		return helperWriter(os.Getenv(helperLedgerEnv), 2*time.Second)
	case "hang":
		return helperHang(os.Getenv(helperLedgerEnv), os.Getenv(helperChangeEnv))
	}
	fmt.Fprintln(os.Stderr, "unknown helper", mode)
	return 3
}

// helperWriter previews and applies changes through the library, as a live
// server would, for the given duration. It prints "ready" after its first
// apply, then "claim UNIXNANO" when each later apply returns, "error: …"
// for each failure, and a summary line "done CLAIMS claims, max wait
// DURATION". It exits 1 if any step failed.
func helperWriter(path string, d time.Duration) int {
	ctx := context.Background()
	g, err := changeset.New(nil, changeset.Options{LedgerPath: path, WriteMode: changeset.WriteGuarded})
	if err != nil {
		fmt.Println("error:", err)
		return 1
	}
	defer g.Close()
	registerOps(g, &store{m: map[string]string{}})
	failed, claims := 0, 0
	var maxWait time.Duration
	deadline := time.Now().Add(d)
	for i := 0; time.Now().Before(deadline); i++ {
		p, err := g.Preview(ctx, "set", setIn{Key: fmt.Sprint("k", i), Value: "v"})
		if err != nil {
			fmt.Println("error: preview:", err)
			failed++
			continue
		}
		start := time.Now()
		_, err = g.Apply(ctx, p.ChangeID, p.ConfirmationToken)
		if wait := time.Since(start); wait > maxWait {
			maxWait = wait
		}
		claims++
		switch {
		case err != nil:
			fmt.Println("error: apply:", err)
			failed++
		case i == 0:
			fmt.Println("ready")
		default:
			fmt.Println("claim", time.Now().UnixNano())
		}
	}
	fmt.Printf("done %d claims, max wait %v\n", claims, maxWait)
	if failed > 0 {
		return 1
	}
	return 0
}

// TestPrune_ConcurrentWriterIsNeverBlockedAndKeepsInFlightRows prunes
// thousands of rows in small batches while another process previews and
// applies changes on the same ledger: no claim of that process fails (with
// a busy ledger or otherwise), and prune deletes no pending, applying or
// undoing row, however old, nor any of the writer's new rows.
func TestPrune_ConcurrentWriterIsNeverBlockedAndKeepsInFlightRows(t *testing.T) {
	if testing.Short() {
		t.Skip("starts processes")
	}
	t.Parallel()
	ctx := context.Background()
	path := filepath.Join(t.TempDir(), "ledger.db")
	l, err := ledger.Open(ctx, path, ledger.OpenOptions{Create: true})
	if err != nil {
		t.Fatal(err)
	}
	old := time.Now().Add(-40 * 24 * time.Hour)
	// Every hundred rows, three are pending, applying and undoing; the
	// rest are expired and go.
	const total, deletable = 5000, 5000 - 3*5000/100
	kept := map[string]ledger.Status{}
	err = l.WithTx(ctx, func(tx *ledger.Tx) error {
		for i := range total {
			c := &ledger.Change{
				ID: "chg_" + randomHex(10), Action: "set", Status: ledger.Expired,
				Payload: []byte(`{"key":"x","value":"y"}`), Diff: []byte(`[]`),
				CreatedAt: old, UpdatedAt: old, ExpiresAt: old.Add(15 * time.Minute),
			}
			switch i % 100 {
			case 1:
				c.Status, c.ConfirmHash = ledger.Pending, ledger.Digest(digest("confirm"))
			case 2:
				c.Status = ledger.Applying
			case 3:
				c.Status, c.AppliedAt = ledger.Undoing, old
			}
			if c.Status != ledger.Expired {
				kept[c.ID] = c.Status
			}
			if err := tx.InsertChange(c); err != nil {
				return err
			}
		}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	l.Close()

	writer := exec.Command(os.Args[0], "-test.run=^$")
	writer.Env = append(os.Environ(), helperEnv+"=writer", helperLedgerEnv+"="+path)
	out, err := writer.StdoutPipe()
	if err != nil {
		t.Fatal(err)
	}
	writer.Stderr = os.Stderr
	if err := writer.Start(); err != nil {
		t.Fatal(err)
	}
	lines := bufio.NewScanner(out)
	if !lines.Scan() || lines.Text() != "ready" {
		writer.Process.Kill()
		writer.Wait()
		t.Fatalf("the writer did not start: %q", lines.Text())
	}
	start := time.Now()
	r := runL(t, path, "prune", "--older-than-days", "30", "--yes")
	end := time.Now()
	var report []string
	during := 0 // claims that returned while prune ran
	for lines.Scan() {
		line := lines.Text()
		if at, ok := strings.CutPrefix(line, "claim "); ok {
			if ns, err := strconv.ParseInt(at, 10, 64); err == nil && ns > start.UnixNano() && ns < end.UnixNano() {
				during++
			}
			continue
		}
		report = append(report, line)
	}
	werr := writer.Wait()
	t.Logf("prune took %v, %d claims returned meanwhile; writer: %s", end.Sub(start), during, strings.Join(report, "; "))
	want(t, r, exitOK, "deleted")
	if werr != nil {
		t.Fatalf("the writer failed while prune ran (%v): %s", werr, strings.Join(report, "\n"))
	}

	l, err = ledger.Open(ctx, path, ledger.OpenOptions{ReadOnly: true})
	if err != nil {
		t.Fatal(err)
	}
	defer l.Close()
	all, err := l.Changes(ctx, ledger.ChangeFilter{})
	if err != nil {
		t.Fatal(err)
	}
	left := map[string]ledger.Status{}
	written := 0
	for _, c := range all {
		left[c.ID] = c.Status
		switch {
		case c.CreatedAt.After(old.Add(time.Hour)):
			written++
			if c.Status != ledger.Applied {
				t.Errorf("the writer's change %s is %s, want applied", c.ID, c.Status)
			}
		case c.Status == ledger.Expired:
			t.Errorf("old expired change %s survived the prune", c.ID)
		}
	}
	for id, st := range kept {
		if left[id] != st {
			t.Errorf("prune deleted or moved %s change %s", st, id)
		}
	}
	if written == 0 {
		t.Error("no change of the writer is in the ledger")
	}
	if len(report) == 0 || !strings.HasPrefix(report[len(report)-1], "done ") {
		t.Errorf("the writer reported %q", report)
	}
	if during == 0 {
		t.Error("no claim of the writer returned while prune ran: the test proved nothing")
	}
	if !strings.Contains(r.stdout, fmt.Sprintf("deleted %d changes", deletable)) {
		t.Errorf("prune reported %q", r.stdout)
	}
}
