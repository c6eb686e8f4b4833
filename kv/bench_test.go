package kv_test

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"testing"

	changeset "github.com/mcp-changeset/changeset-go"
	"github.com/mcp-changeset/changeset-go/internal/commitcount"
	"github.com/mcp-changeset/changeset-go/internal/testkit"
	"github.com/mcp-changeset/changeset-go/kv"
	"github.com/modelcontextprotocol/go-sdk/mcp"
)

// The benchmarks compare one cycle (a preview and its apply) of the
// adapter's create_flag with the same operation written by hand with
// changeset.NewOperation, on the same kind of Store, in the same run.
// Besides ns/op each reports commits/op, the ledger's write transactions
// per cycle (see internal/commitcount), and cpu-ns/op, the process's CPU
// time per cycle, which the disk's syncs do not blur as they do ns/op. The
// ledger goes in CHANGESET_BENCH_DIR (a temporary directory when unset).
//
//	go test -run '^$' -bench Cycle -benchtime 2s ./kv

// manualChange is the payload the hand-written operation stores.
type manualChange struct {
	Key    string          `json:"key"`
	Before json.RawMessage `json:"before,omitempty"`
	After  json.RawMessage `json:"after,omitempty"`
}

// registerManual registers, as "create_flag", what a developer would write
// by hand for the adapter's create.
func registerManual(g *changeset.Guard, s kv.Store) {
	swap := func(ctx context.Context, key string, prev, next json.RawMessage) error {
		if err := s.Swap(ctx, key, prev, next); errors.Is(err, kv.ErrChanged) {
			return &changeset.StateChangedError{}
		} else {
			return err
		}
	}
	changeset.Register(g, &mcp.Tool{Name: "create_flag"}, changeset.Operation[createIn, manualChange, manualChange]{
		Preview: func(ctx context.Context, in createIn) (*changeset.Proposal[manualChange], error) {
			after, err := json.Marshal(flag{Enabled: in.Enabled, Rollout: in.Rollout})
			if err != nil {
				return nil, err
			}
			cur, err := s.Get(ctx, in.Name)
			if err != nil {
				return nil, err
			}
			if cur != nil {
				return nil, changeset.Refuse("flag %q already exists", in.Name)
			}
			diff, err := changeset.Diff(nil, json.RawMessage(after))
			if err != nil {
				return nil, err
			}
			return &changeset.Proposal[manualChange]{
				Payload: manualChange{Key: in.Name, After: after}, Diff: diff,
				Summary: "Create flag " + in.Name, Resource: "flag:" + in.Name,
				Snapshot: &changeset.Snapshot{Value: nil},
			}, nil
		},
		Apply: func(ctx context.Context, c manualChange) (manualChange, error) {
			return c, swap(ctx, c.Key, c.Before, c.After)
		},
		Undo: func(ctx context.Context, c manualChange, _ manualChange) error {
			return swap(ctx, c.Key, c.After, c.Before)
		},
		Observe: func(ctx context.Context, c manualChange) (any, error) {
			v, err := s.Get(ctx, c.Key)
			if v == nil {
				return nil, err
			}
			return v, err
		},
	})
}

// cycler is a Guard on a fresh ledger with create_flag registered by
// register, which creates key k<n> on its n-th cycle.
type cycler struct {
	tb testing.TB
	g  *changeset.Guard
	n  int
}

func newCycler(tb testing.TB, register func(*changeset.Guard, kv.Store)) *cycler {
	tb.Helper()
	g, err := changeset.New(mcp.NewServer(&mcp.Implementation{Name: "bench", Version: "1"}, nil),
		changeset.Options{LedgerPath: filepath.Join(benchDir(tb), "ledger.db"), WriteMode: changeset.WriteGuarded})
	if err != nil {
		tb.Fatal(err)
	}
	tb.Cleanup(func() { g.Close() })
	register(g, &kv.Map{})
	return &cycler{tb: tb, g: g}
}

// benchDir is a fresh directory in CHANGESET_BENCH_DIR, or a temporary one.
func benchDir(tb testing.TB) string {
	tb.Helper()
	root := os.Getenv("CHANGESET_BENCH_DIR")
	if root == "" {
		return tb.TempDir()
	}
	dir, err := os.MkdirTemp(root, "kv-bench-")
	if err != nil {
		tb.Fatal(err)
	}
	tb.Cleanup(func() { os.RemoveAll(dir) })
	return dir
}

func (c *cycler) cycle() {
	c.n++
	ctx := context.Background()
	p, err := c.g.Preview(ctx, "create_flag", createIn{Name: fmt.Sprint("k", c.n), Enabled: true, Rollout: c.n % 100})
	if err != nil {
		c.tb.Fatal(err)
	}
	if _, err := c.g.Apply(ctx, p.ChangeID, p.ConfirmationToken); err != nil {
		c.tb.Fatal(err)
	}
}

var cycleKinds = []struct {
	name     string
	register func(*changeset.Guard, kv.Store)
}{
	{"adapter", registerFlags},
	{"manual", registerManual},
}

func BenchmarkCycle(b *testing.B) {
	for _, k := range cycleKinds {
		b.Run(k.name, func(b *testing.B) {
			commitcount.Enable()
			c := newCycler(b, k.register)
			commitcount.Disable()
			c.cycle() // warm up: the ledger's first writes
			before, cpu := commitcount.Commits(), testkit.CPUTime()
			b.ReportAllocs()
			b.ResetTimer()
			for range b.N {
				c.cycle()
			}
			b.StopTimer()
			b.ReportMetric(float64(commitcount.Commits()-before)/float64(b.N), "commits/op")
			b.ReportMetric(float64(testkit.CPUTime()-cpu)/float64(b.N), "cpu-ns/op")
		})
	}
}

// The adapter costs the ledger no write that the hand-written operation
// does not: equal commits per cycle.
func TestAdapterAddsNoCommit(t *testing.T) {
	const cycles = 10
	per := map[string]int64{}
	for _, k := range cycleKinds {
		commitcount.Enable()
		c := newCycler(t, k.register)
		commitcount.Disable()
		c.cycle()
		before := commitcount.Commits()
		for range cycles {
			c.cycle()
		}
		per[k.name] = commitcount.Commits() - before
	}
	t.Logf("commits per %d cycles: %v", cycles, per)
	if per["adapter"] != per["manual"] || per["adapter"] == 0 {
		t.Fatalf("commits per %d cycles: %v; want equal and counted", cycles, per)
	}
}
