package changeset_test

import (
	"context"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"syscall"
	"testing"

	changeset "github.com/mcp-changeset/changeset-go"
	"github.com/mcp-changeset/changeset-go/ledger"
)

// durabilityEnv names the ledger durability of the Guards and ledgers the
// tests open, in the test process and in the helper processes it starts:
// "full" (or unset) or "claims". eachDurability sets it for the process
// and fault tests; setting it for a whole run,
//
//	CHANGESET_TEST_DURABILITY=claims go test ./...
//
// runs every test of this package on ledgers whose lazy commits are not
// synced.
const durabilityEnv = "CHANGESET_TEST_DURABILITY"

// testDurability is the durability durabilityEnv names. A value that is
// neither name panics, so that a typo never passes silently as "full".
func testDurability() ledger.Durability {
	var d ledger.Durability
	if v := os.Getenv(durabilityEnv); v != "" {
		if err := d.Set(v); err != nil {
			panic(durabilityEnv + ": " + err.Error())
		}
	}
	return d
}

// eachDurability runs fn once per ledger durability, as subtests named
// after them, with durabilityEnv set: the promises of at-most-once hold
// whether or not the commits that claim nothing are synced. The subtests
// run in turn (t.Setenv).
func eachDurability(t *testing.T, fn func(t *testing.T)) {
	for _, d := range []ledger.Durability{ledger.DurabilityFull, ledger.DurabilityClaims} {
		t.Run(d.String(), func(t *testing.T) {
			t.Setenv(durabilityEnv, d.String())
			fn(t)
		})
	}
}

// helperLazyKill previews a change, applies it, previews a second one and
// kills itself with SIGKILL right after, printing the two IDs first. Under
// DurabilityClaims the apply's outcome and the second preview are lazy
// commits, made after the apply's claim, the last synced commit: nothing
// but the operating system's page cache holds them when the process dies.
func helperLazyKill() int {
	g, err := helperGuard()
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		return 1
	}
	ctx := context.Background()
	marker := os.Getenv("CHANGESET_CHANGES")
	p, err := g.Preview(ctx, "append", markerIn{Marker: marker, Tag: "applied"})
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		return 1
	}
	if _, err := g.Apply(ctx, p.ChangeID, p.ConfirmationToken); err != nil {
		fmt.Fprintln(os.Stderr, err)
		return 1
	}
	q, err := g.Preview(ctx, "append", markerIn{Marker: marker, Tag: "pending"})
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		return 1
	}
	fmt.Printf("%s %s\n", p.ChangeID, q.ChangeID)
	os.Stdout.Sync()
	syscall.Kill(os.Getpid(), syscall.SIGKILL) // no Close, no checkpoint
	select {}
}

// TestDurability_ProcessKilledAfterLazyCommitsLosesNothing: a process
// killed between a lazy commit (synchronous=NORMAL) and the next synced
// one loses nothing, since the commit's pages are in the write-ahead log,
// in the operating system's page cache, which outlives the process. (What
// a power loss would lose cannot be shown without cutting the power:
// docs/reliability.md says it.)
func TestDurability_ProcessKilledAfterLazyCommitsLosesNothing(t *testing.T) {
	if testing.Short() {
		t.Skip("starts processes")
	}
	eachDurability(t, func(t *testing.T) {
		dir := t.TempDir()
		path := filepath.Join(dir, "ledger.db")
		marker := filepath.Join(dir, "applies.txt")
		g, err := changeset.New(nil, changeset.Options{LedgerPath: path, Durability: testDurability()})
		if err != nil {
			t.Fatal(err)
		}
		g.Close() // the helper alone has the file open when it dies

		out, err := helperCmd(t, "lazykill", path, marker).Output()
		if killedBy(err) != syscall.SIGKILL {
			t.Fatalf("helper: %v, want killed by SIGKILL", err)
		}
		ids := strings.Fields(strings.TrimSpace(string(out)))
		if len(ids) != 2 {
			t.Fatalf("helper printed %q", out)
		}
		if fi, err := os.Stat(path + "-wal"); err != nil || fi.Size() == 0 {
			t.Fatalf("no write-ahead log left behind (%v): the commits were checkpointed, the test proves nothing", err)
		}

		l, err := ledger.Open(context.Background(), path, ledger.OpenOptions{ReadOnly: true})
		if err != nil {
			t.Fatal(err)
		}
		defer l.Close()
		for id, want := range map[string]ledger.Status{ids[0]: ledger.Applied, ids[1]: ledger.Pending} {
			c, err := l.Change(context.Background(), id)
			if err != nil || c.Status != want {
				t.Errorf("change %s after SIGKILL: %v (%v), want %s", id, statusOf(c), err, want)
			}
		}
		data, _ := os.ReadFile(marker)
		if n := strings.Count(string(data), "applied\n"); n != 1 {
			t.Errorf("the operation ran %d times, want 1", n)
		}
		verifyChain(t, l)
	})
}

// statusOf is c's status, or "none".
func statusOf(c *ledger.Change) ledger.Status {
	if c == nil {
		return "none"
	}
	return c.Status
}

// killedBy reports the signal that ended the process whose Wait or
// Output returned err, or 0 if none did.
func killedBy(err error) syscall.Signal {
	var exit *exec.ExitError
	if !errors.As(err, &exit) {
		return 0
	}
	if st, ok := exit.Sys().(syscall.WaitStatus); ok && st.Signaled() {
		return st.Signal()
	}
	return 0
}
