package changeset_test

import (
	"context"
	"database/sql"
	"encoding/json"
	"fmt"
	"math"
	"os"
	"path/filepath"
	"sync"
	"testing"

	changeset "github.com/mcp-changeset/changeset-go"
	"github.com/mcp-changeset/changeset-go/internal/commitcount"
	"github.com/modelcontextprotocol/go-sdk/mcp"
)

// The benchmarks drive a Guard through the Go API ("go") and through a
// go-sdk client over in-memory transports ("mcp"), on a SQLite ledger in
// CHANGESET_BENCH_DIR (a temporary directory when unset: point it at the
// disk you mean to measure). Besides ns/op, each reports commits/op: the
// write transactions committed per operation, each one a sync of the
// write-ahead log (see internal/commitcount). cmd/changeset-bench puts the
// same figures beside the disk's own commit rate.
//
//	go test -run '^$' -bench . -benchtime 2s

// The operations benchmarked: benchOrdinary sets a key of a map (an
// Operation with Observe and Undo), benchTx a row of a table in the
// ledger's database (an operation with ApplyTx).
const (
	benchOrdinary = "bench_set"
	benchTx       = "bench_set_tx"
)

type benchIn struct {
	Key   string `json:"key"`
	Value string `json:"value"`
}

type benchOut struct {
	Previous string `json:"previous"`
}

// benchEnv is a Guard with the benchmark's operations, and how to reach
// it: directly or through an MCP client.
type benchEnv struct {
	b     *testing.B
	guard *changeset.Guard
	cs    *mcp.ClientSession // nil: the Go API
	n     int                // keys handed out, so that no two changes touch one key
}

// newBenchEnv opens a fresh ledger with commit counting on.
func newBenchEnv(b *testing.B, viaMCP bool) *benchEnv {
	b.Helper()
	commitcount.Enable()
	b.Cleanup(commitcount.Disable)
	dir := os.Getenv("CHANGESET_BENCH_DIR")
	if dir == "" {
		dir = b.TempDir()
	}
	path := filepath.Join(dir, fmt.Sprintf("bench-%s.db", newBenchID()))
	b.Cleanup(func() {
		for _, suffix := range []string{"", "-wal", "-shm"} {
			os.Remove(path + suffix)
		}
	})
	server := mcp.NewServer(&mcp.Implementation{Name: "bench", Version: "1"}, nil)
	// The preview benchmark leaves every preview pending: no quota.
	g, err := changeset.New(server, changeset.Options{LedgerPath: path, WriteMode: changeset.WriteGuarded, MaxPendingPerScope: math.MaxInt32})
	if err != nil {
		b.Fatal(err)
	}
	b.Cleanup(func() { g.Close() })
	registerBenchOps(b, g)
	e := &benchEnv{b: b, guard: g}
	if viaMCP {
		st, ct := mcp.NewInMemoryTransports()
		ss, err := server.Connect(context.Background(), st, nil)
		if err != nil {
			b.Fatal(err)
		}
		e.cs, err = mcp.NewClient(&mcp.Implementation{Name: "bench-client", Version: "1"}, nil).Connect(context.Background(), ct, nil)
		if err != nil {
			b.Fatal(err)
		}
		b.Cleanup(func() { e.cs.Close(); ss.Wait() })
	}
	return e
}

var benchIDs struct {
	sync.Mutex
	n int
}

func newBenchID() string {
	benchIDs.Lock()
	defer benchIDs.Unlock()
	benchIDs.n++
	return fmt.Sprint(os.Getpid(), "-", benchIDs.n)
}

func registerBenchOps(b *testing.B, g *changeset.Guard) {
	var mu sync.Mutex
	m := map[string]string{}
	get := func(k string) string { mu.Lock(); defer mu.Unlock(); return m[k] }
	set := func(k, v string) string { mu.Lock(); defer mu.Unlock(); old := m[k]; m[k] = v; return old }
	changeset.Register(g, &mcp.Tool{Name: benchOrdinary}, changeset.Operation[benchIn, benchIn, benchOut]{
		Preview: func(ctx context.Context, in benchIn) (*changeset.Proposal[benchIn], error) {
			return &changeset.Proposal[benchIn]{Payload: in, Summary: "set " + in.Key, Resource: "key:" + in.Key,
				Diff: changeset.DiffFields(map[string]any{in.Key: get(in.Key)}, map[string]any{in.Key: in.Value})}, nil
		},
		Apply:   func(ctx context.Context, p benchIn) (benchOut, error) { return benchOut{set(p.Key, p.Value)}, nil },
		Undo:    func(ctx context.Context, p benchIn, r benchOut) error { set(p.Key, r.Previous); return nil },
		Observe: func(ctx context.Context, p benchIn) (any, error) { return get(p.Key), nil },
	})
	if _, err := g.Ledger().DB().Exec(`CREATE TABLE IF NOT EXISTS bench_kv (key TEXT PRIMARY KEY, value TEXT NOT NULL)`); err != nil {
		b.Fatal(err)
	}
	read := func(ctx context.Context, tx *sql.Tx, key string) (string, error) {
		var v string
		err := tx.QueryRowContext(ctx, `SELECT value FROM bench_kv WHERE key = ?`, key).Scan(&v)
		if err == sql.ErrNoRows {
			return "", nil
		}
		return v, err
	}
	changeset.Register(g, &mcp.Tool{Name: benchTx}, changeset.Operation[benchIn, benchIn, benchOut]{
		AllowEmptyDiff: true, // the benchmark measures the path, not the diff
		Preview: func(ctx context.Context, in benchIn) (*changeset.Proposal[benchIn], error) {
			return &changeset.Proposal[benchIn]{Payload: in, Summary: "set " + in.Key, Resource: "row:" + in.Key}, nil
		},
		ApplyTx: func(ctx context.Context, tx *sql.Tx, p benchIn) (benchOut, error) {
			old, err := read(ctx, tx, p.Key)
			if err == nil {
				_, err = tx.ExecContext(ctx, `INSERT INTO bench_kv (key, value) VALUES (?, ?)
					ON CONFLICT (key) DO UPDATE SET value = excluded.value`, p.Key, p.Value)
			}
			return benchOut{old}, err
		},
		UndoTx: func(ctx context.Context, tx *sql.Tx, p benchIn, r benchOut) error {
			_, err := tx.ExecContext(ctx, `UPDATE bench_kv SET value = ? WHERE key = ?`, r.Previous, p.Key)
			return err
		},
		ObserveTx: func(ctx context.Context, tx *sql.Tx, p benchIn) (any, error) { return read(ctx, tx, p.Key) },
	})
}

// call runs a tool through the client and decodes its structured result.
func (e *benchEnv) call(name string, args map[string]any) map[string]any {
	res, err := e.cs.CallTool(context.Background(), &mcp.CallToolParams{Name: name, Arguments: args})
	if err != nil {
		e.b.Fatalf("%s: %v", name, err)
	}
	if res.IsError {
		e.b.Fatalf("%s: tool error: %v", name, res.Content[0].(*mcp.TextContent).Text)
	}
	raw, _ := json.Marshal(res.StructuredContent)
	var out map[string]any
	if err := json.Unmarshal(raw, &out); err != nil {
		e.b.Fatal(err)
	}
	return out
}

// preview previews a change of op on a key no other change touches.
func (e *benchEnv) preview(op, runID string) (id, token string) {
	e.n++
	in := benchIn{Key: fmt.Sprint("k", e.n), Value: "v"}
	if e.cs != nil {
		args := map[string]any{"key": in.Key, "value": in.Value}
		if runID != "" {
			args["run_id"] = runID
		}
		out := e.call("preview_"+op, args)
		return out["change_id"].(string), out["confirmation_token"].(string)
	}
	var input any = in
	if runID != "" {
		input = map[string]any{"key": in.Key, "value": in.Value, "run_id": runID}
	}
	p, err := e.guard.Preview(context.Background(), op, input)
	if err != nil {
		e.b.Fatal(err)
	}
	return p.ChangeID, p.ConfirmationToken
}

func (e *benchEnv) apply(id, token string) (undoToken string) {
	if e.cs != nil {
		return e.call("apply_change", map[string]any{"change_id": id, "confirmation_token": token})["undo_token"].(string)
	}
	a, err := e.guard.Apply(context.Background(), id, token)
	if err != nil {
		e.b.Fatal(err)
	}
	return a.UndoToken
}

func (e *benchEnv) undo(id, token string) {
	if e.cs != nil {
		e.call("undo_change", map[string]any{"change_id": id, "undo_token": token})
		return
	}
	if _, err := e.guard.Undo(context.Background(), id, token); err != nil {
		e.b.Fatal(err)
	}
}

func (e *benchEnv) status(id string) {
	if e.cs != nil {
		e.call("get_change_status", map[string]any{"change_id": id})
		return
	}
	if _, err := e.guard.Status(context.Background(), id); err != nil {
		e.b.Fatal(err)
	}
}

func (e *benchEnv) listRuns() {
	if e.cs != nil {
		e.call("list_runs", map[string]any{"limit": 20})
		return
	}
	if _, err := e.guard.Runs(context.Background(), "", 20); err != nil {
		e.b.Fatal(err)
	}
}

func (e *benchEnv) startRun() string {
	if e.cs != nil {
		return e.call("start_run", map[string]any{"label": "bench"})["run_id"].(string)
	}
	r, err := e.guard.StartRun(context.Background(), "bench")
	if err != nil {
		e.b.Fatal(err)
	}
	return r.RunID
}

// undoRun undoes a run as the protocol has it: a dry run, then the undo of
// the plan the dry run showed.
func (e *benchEnv) undoRun(runID string) {
	if e.cs != nil {
		dry := e.call("undo_run", map[string]any{"run_id": runID})
		e.call("undo_run", map[string]any{"run_id": runID, "dry_run": false, "confirmation_token": dry["confirmation_token"]})
		return
	}
	ctx := context.Background()
	if _, err := e.guard.UndoRun(ctx, runID, true, changeset.Person("bench")); err != nil {
		e.b.Fatal(err)
	}
	if _, err := e.guard.UndoRun(ctx, runID, false, changeset.Person("bench")); err != nil {
		e.b.Fatal(err)
	}
}

// timed runs fn b.N times with the timer and the commit count on, after
// setup (untimed) has run.
func timed(b *testing.B, setup func(n int), fn func(i int)) {
	if setup != nil {
		setup(b.N)
	}
	b.ResetTimer()
	c0 := commitcount.Commits()
	for i := range b.N {
		fn(i)
	}
	b.StopTimer()
	b.ReportMetric(float64(commitcount.Commits()-c0)/float64(b.N), "commits/op")
}

type pair struct{ id, token string }

func BenchmarkGuard(b *testing.B) {
	for _, via := range []string{"go", "mcp"} {
		b.Run(via, func(b *testing.B) {
			newEnv := func(b *testing.B) *benchEnv { return newBenchEnv(b, via == "mcp") }
			b.Run("preview", func(b *testing.B) {
				e := newEnv(b)
				timed(b, nil, func(int) { e.preview(benchOrdinary, "") })
			})
			b.Run("apply", func(b *testing.B) {
				e := newEnv(b)
				var ps []pair
				timed(b, func(n int) {
					for range n {
						id, tok := e.preview(benchOrdinary, "")
						ps = append(ps, pair{id, tok})
					}
				}, func(i int) { e.apply(ps[i].id, ps[i].token) })
			})
			b.Run("undo", func(b *testing.B) {
				e := newEnv(b)
				var ps []pair
				timed(b, func(n int) {
					for range n {
						id, tok := e.preview(benchOrdinary, "")
						ps = append(ps, pair{id, e.apply(id, tok)})
					}
				}, func(i int) { e.undo(ps[i].id, ps[i].token) })
			})
			for _, op := range []string{benchOrdinary, benchTx} {
				name := map[string]string{benchOrdinary: "cycle", benchTx: "cycle_tx"}[op]
				b.Run(name, func(b *testing.B) {
					e := newEnv(b)
					timed(b, nil, func(int) {
						id, tok := e.preview(op, "")
						e.undo(id, e.apply(id, tok))
					})
				})
			}
			b.Run("status", func(b *testing.B) {
				e := newEnv(b)
				id, _ := e.preview(benchOrdinary, "")
				timed(b, nil, func(int) { e.status(id) })
			})
			b.Run("list_runs", func(b *testing.B) {
				e := newEnv(b)
				for range 50 {
					e.startRun()
				}
				timed(b, nil, func(int) { e.listRuns() })
			})
		})
	}
}

// BenchmarkUndoRun undoes runs of 10, 100 and 1000 applied changes (dry
// run and undo, timed together; the run is built untimed). Ordinary
// changes are undone one by one, each in its own claim and record;
// consecutive transactional ones in one transaction.
func BenchmarkUndoRun(b *testing.B) {
	for _, via := range []string{"go", "mcp"} {
		for _, op := range []string{benchOrdinary, benchTx} {
			kind := map[string]string{benchOrdinary: "ordinary", benchTx: "tx"}[op]
			for _, size := range []int{10, 100, 1000} {
				b.Run(fmt.Sprintf("%s/%s/changes=%d", via, kind, size), func(b *testing.B) {
					e := newBenchEnv(b, via == "mcp")
					var runs []string
					timed(b, func(n int) {
						for range n {
							run := e.startRun()
							for range size {
								id, tok := e.preview(op, run)
								e.apply(id, tok)
							}
							runs = append(runs, run)
						}
					}, func(i int) { e.undoRun(runs[i]) })
					b.ReportMetric(float64(size*b.N)/b.Elapsed().Seconds(), "changes/s")
				})
			}
		}
	}
}
