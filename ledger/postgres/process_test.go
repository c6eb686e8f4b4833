package postgres_test

import (
	"bufio"
	"context"
	"fmt"
	"math/rand/v2"
	"os"
	"os/exec"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/mcp-changeset/changeset-go/internal/pgtest"
	"github.com/mcp-changeset/changeset-go/ledger"
	"github.com/mcp-changeset/changeset-go/ledger/driver"
	"github.com/mcp-changeset/changeset-go/ledger/postgres"
)

// The test in this file starts copies of the test binary as separate OS
// processes that race to claim the same changes in one PostgreSQL ledger,
// as server replicas on several hosts would. TestMain turns a copy into a
// claimer when CHANGESET_PG_HELPER is set.

func TestMain(m *testing.M) {
	switch os.Getenv("CHANGESET_PG_HELPER") {
	case "":
		code := m.Run()
		pgtest.Stop()
		os.Exit(code)
	case "claim":
		os.Exit(helperClaim())
	default:
		fmt.Fprintln(os.Stderr, "unknown helper")
		os.Exit(3)
	}
}

// helperClaim claims every change in CHANGESET_PG_IDS (comma-separated), in
// an order of its own, once the file CHANGESET_PG_GO exists, and prints
// one line per change: "won ID", "lost ID <status>" or "error ID: …".
func helperClaim() int {
	ctx := context.Background()
	name := os.Getenv("CHANGESET_PG_NAME")
	b, err := postgres.Open(ctx, os.Getenv("CHANGESET_PG_DSN"), ledger.OpenOptions{})
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		return 1
	}
	defer b.Close()
	l := driver.NewLedger(b)
	ids := strings.Split(os.Getenv("CHANGESET_PG_IDS"), ",")
	rand.Shuffle(len(ids), func(i, j int) { ids[i], ids[j] = ids[j], ids[i] })
	fmt.Println("ready")
	for deadline := time.Now().Add(time.Minute); ; time.Sleep(time.Millisecond) {
		if _, err := os.Stat(os.Getenv("CHANGESET_PG_GO")); err == nil {
			break
		}
		if time.Now().After(deadline) {
			fmt.Fprintln(os.Stderr, "never told to go")
			return 1
		}
	}
	for _, id := range ids {
		var lost ledger.Status
		err := l.WithTx(ctx, func(tx *ledger.Tx) error {
			lost = ""
			c, err := tx.Change(id)
			if err != nil {
				return err
			}
			if c.Status != ledger.Pending {
				lost = c.Status
				return nil
			}
			c.Status, c.AppliedBy, c.UpdatedAt = ledger.Applying, name, time.Now()
			return tx.UpdateChange(c, ledger.Pending)
		})
		switch {
		case err != nil:
			fmt.Printf("error %s: %v\n", id, err)
		case lost != "":
			fmt.Printf("lost %s %s\n", id, lost)
		default:
			fmt.Printf("won %s\n", id)
		}
	}
	return 0
}

func TestProcesses_RacingClaimsHaveOneWinnerPerChange(t *testing.T) {
	if testing.Short() {
		t.Skip("starts processes")
	}
	t.Parallel()
	const rows, processes = 200, 4
	ctx := context.Background()
	dsn := withParam(t, pgtest.DSN(t), "changeset_schema", "replicas")
	b := open(t, dsn, ledger.OpenOptions{Create: true})
	var ids []string
	err := driver.NewLedger(b).WithTx(ctx, func(tx *ledger.Tx) error {
		for i := range rows {
			id := fmt.Sprintf("chg_%020x", i)
			ids = append(ids, id)
			c := &ledger.Change{ID: id, Action: "a", Status: ledger.Pending, CreatedAt: t0, UpdatedAt: t0}
			if err := tx.InsertChange(c); err != nil {
				return err
			}
		}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}

	goFile := t.TempDir() + "/go"
	var mu sync.Mutex
	winners := map[string][]string{}
	var ready, done sync.WaitGroup
	for p := range processes {
		name := fmt.Sprintf("process-%d", p)
		cmd := exec.Command(os.Args[0], "-test.run=^$")
		cmd.Env = append(os.Environ(), "CHANGESET_PG_HELPER=claim", "CHANGESET_PG_NAME="+name,
			"CHANGESET_PG_DSN="+dsn, "CHANGESET_PG_IDS="+strings.Join(ids, ","), "CHANGESET_PG_GO="+goFile)
		cmd.Stderr = &testWriter{t: t}
		out, err := cmd.StdoutPipe()
		if err != nil {
			t.Fatal(err)
		}
		if err := cmd.Start(); err != nil {
			t.Fatal(err)
		}
		ready.Add(1)
		done.Go(func() {
			var once sync.Once // a helper that dies before "ready" must not hang the test
			defer once.Do(ready.Done)
			sc := bufio.NewScanner(out)
			for sc.Scan() {
				line := sc.Text()
				switch verb, rest, _ := strings.Cut(line, " "); verb {
				case "ready":
					once.Do(ready.Done)
				case "won":
					mu.Lock()
					winners[rest] = append(winners[rest], name)
					mu.Unlock()
				case "lost":
					if !strings.HasSuffix(rest, " applying") {
						t.Errorf("%s: %s (a lost claim must find the row applying)", name, line)
					}
				default:
					t.Errorf("%s: %s", name, line)
				}
			}
			if err := cmd.Wait(); err != nil {
				t.Errorf("%s: %v", name, err)
			}
		})
	}
	ready.Wait() // every process connected and waiting: start them at once
	if err := os.WriteFile(goFile, nil, 0o600); err != nil {
		t.Fatal(err)
	}
	done.Wait()

	for _, id := range ids {
		w := winners[id]
		if len(w) != 1 {
			t.Errorf("%s was won by %d processes %v, want exactly one", id, len(w), w)
			continue
		}
		c, err := b.GetChange(ctx, b.DB(), id)
		if err != nil || c.Status != ledger.Applying || c.AppliedBy != w[0] {
			t.Errorf("%s: %v by %q (%v), want applying by %s", id, c.Status, c.AppliedBy, err, w[0])
		}
	}
	counts := map[string]int{}
	for _, w := range winners {
		counts[w[0]]++
	}
	t.Logf("claims won per process: %v", counts)
	// Four processes appended to one chain at once: it holds, numbered
	// without a gap in the order they committed.
	v, err := driver.NewLedger(b).Verify(ctx, ledger.VerifyOptions{})
	if err != nil || !v.OK() || v.Entries != 2*rows || v.Head.Seq != 2*rows {
		t.Errorf("Verify after the race = %+v, %v; want %d entries chained", v, err, 2*rows)
	}
}

// testWriter sends a helper's standard error to the test log.
type testWriter struct{ t *testing.T }

func (w *testWriter) Write(p []byte) (int, error) {
	w.t.Logf("helper: %s", strings.TrimSpace(string(p)))
	return len(p), nil
}
