package main

import (
	"bufio"
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"text/tabwriter"
	"time"

	changeset "github.com/mcp-changeset/changeset-go"
	"github.com/mcp-changeset/changeset-go/ledger"
	"github.com/modelcontextprotocol/go-sdk/mcp"
)

// durability is --durability: the ledger durability of every ledger the
// benchmark opens, in this process and in the processes it starts.
var durability ledger.Durability

// The durability comparison (--durability-clients): N clients, goroutines
// of one process sharing one Guard, run full cycles of an ordinary
// operation on a ledger opened with each durability, the two measured in
// the same slices; then each runs again, a fixed number of cycles, in a
// process of its own under strace, which counts its fsync and fdatasync
// calls.

// durabilityCommand is the hidden subcommand that runs a fixed number of
// cycles for the fsync count.
const durabilityCommand = "__durability"

// opDurable is the comparison's operation: an ordinary operation on an
// in-memory map, safe for any number of goroutines.
const opDurable = "bench_durable"

// durabilityResult is N clients running full cycles on a ledger of one
// durability.
type durabilityResult struct {
	Durability   string        `json:"durability"`
	Clients      int           `json:"clients"`
	Cycles       int           `json:"cycles"`
	Elapsed      time.Duration `json:"elapsed_ns"`
	CPU          time.Duration `json:"cpu_ns"`
	CyclesPerSec float64       `json:"cycles_per_s"`
	// VsFull is CyclesPerSec over that of DurabilityFull with as many
	// clients, measured in the same slices.
	VsFull float64 `json:"vs_full"`
	// FsyncsPerCycle counts fsync and fdatasync calls per cycle with
	// strace, in a separate run (-1: strace was not found).
	FsyncsPerCycle float64  `json:"fsyncs_per_cycle"`
	Errors         int      `json:"errors"`
	Samples        []string `json:"error_samples,omitempty"`
}

// CPUPerCycle is the process's CPU per cycle.
func (r *durabilityResult) CPUPerCycle() time.Duration {
	return r.CPU / time.Duration(max(r.Cycles, 1))
}

// durabilityModes are the durabilities the comparison measures.
var durabilityModes = []ledger.Durability{ledger.DurabilityFull, ledger.DurabilityClaims}

// durableClients is a Guard on a ledger of one durability and its
// operation's state.
type durableClients struct {
	g     *changeset.Guard
	state sync.Map
	seq   atomic.Int64
}

// openDurable opens a Guard with opDurable on the ledger at path, created
// if missing, with durability d.
func openDurable(path string, d ledger.Durability) (*durableClients, error) {
	g, err := changeset.New(nil, changeset.Options{LedgerPath: path, WriteMode: changeset.WriteGuarded, Durability: d, MaxPendingPerScope: 100000})
	if err != nil {
		return nil, err
	}
	c := &durableClients{g: g}
	get := func(k string) string {
		v, _ := c.state.Load(k)
		s, _ := v.(string)
		return s
	}
	changeset.Register(g, &mcp.Tool{Name: opDurable}, changeset.Operation[setIn, setIn, setOut]{
		Preview: func(ctx context.Context, in setIn) (*changeset.Proposal[setIn], error) {
			return &changeset.Proposal[setIn]{
				Payload:  in,
				Diff:     changeset.DiffFields(map[string]any{in.Key: get(in.Key)}, map[string]any{in.Key: in.Value}),
				Summary:  "set " + in.Key,
				Resource: "key:" + in.Key,
			}, nil
		},
		Apply: func(ctx context.Context, p setIn) (setOut, error) {
			old, _ := c.state.Swap(p.Key, p.Value)
			s, _ := old.(string)
			return setOut{Previous: s}, nil
		},
		Undo: func(ctx context.Context, p setIn, r setOut) error {
			c.state.Store(p.Key, r.Previous)
			return nil
		},
		Observe: func(ctx context.Context, p setIn) (any, error) { return get(p.Key), nil },
	})
	return c, nil
}

// run has n clients run full cycles, each on a key of its own, for d (or,
// when d is 0, perClient cycles each), and returns the cycles, errors and
// a few error samples.
func (c *durableClients) run(ctx context.Context, n int, d time.Duration, perClient int) (cycles, errs int, samples []string) {
	var mu sync.Mutex
	var wg sync.WaitGroup
	deadline := time.Now().Add(d)
	for i := range n {
		wg.Go(func() {
			done, failed := 0, 0
			var sample string
			for (d > 0 && time.Now().Before(deadline)) || (d == 0 && done+failed < perClient) {
				if err := c.cycle(ctx, fmt.Sprintf("c%d", i)); err != nil {
					failed++
					sample = err.Error()
					continue
				}
				done++
			}
			mu.Lock()
			defer mu.Unlock()
			cycles, errs = cycles+done, errs+failed
			if sample != "" && len(samples) < 3 {
				samples = append(samples, sample)
			}
		})
	}
	wg.Wait()
	return cycles, errs, samples
}

// cycle previews, applies and undoes one change of opDurable on key.
func (c *durableClients) cycle(ctx context.Context, key string) error {
	tag := fmt.Sprintf("%s-%d", key, c.seq.Add(1))
	p, err := c.g.Preview(ctx, opDurable, setIn{Key: key, Value: tag, Tag: tag})
	if err != nil {
		return fmt.Errorf("preview: %w", err)
	}
	a, err := c.g.Apply(ctx, p.ChangeID, p.ConfirmationToken)
	if err != nil {
		return fmt.Errorf("apply: %w", err)
	}
	if _, err := c.g.Undo(ctx, p.ChangeID, a.UndoToken); err != nil {
		return fmt.Errorf("undo: %w", err)
	}
	return nil
}

// durabilityPhase compares the durabilities at each client count of
// clients, for d in all per durability and count.
func durabilityPhase(ctx context.Context, dir string, clients []int, d time.Duration, prog *progress) ([]*durabilityResult, error) {
	work, err := os.MkdirTemp(dir, "changeset-bench-durability-")
	if err != nil {
		return nil, err
	}
	defer os.RemoveAll(work)
	path := func(m ledger.Durability, n int) string { return filepath.Join(work, fmt.Sprintf("%s-%d.db", m, n)) }
	type key struct {
		m ledger.Durability
		n int
	}
	guards := map[key]*durableClients{}
	results := map[key]*durabilityResult{}
	defer func() {
		for _, c := range guards {
			c.g.Close()
		}
	}()
	var out []*durabilityResult
	for _, n := range clients {
		for _, m := range durabilityModes {
			c, err := openDurable(path(m, n), m)
			if err != nil {
				return nil, err
			}
			guards[key{m, n}] = c
			if _, errs, samples := c.run(ctx, n, 0, 5); errs > 0 { // warm up
				return nil, fmt.Errorf("warm-up, %s, %d clients: %s", m, n, strings.Join(samples, "; "))
			}
			r := &durabilityResult{Durability: m.String(), Clients: n, FsyncsPerCycle: -1}
			results[key{m, n}] = r
			out = append(out, r)
		}
	}
	// Alternate the durabilities in slices of about half a second, so
	// that a disk or a neighbour whose speed drifts weighs on both alike.
	slices := max(1, int(d/(time.Second/2)))
	slice := d / time.Duration(slices)
	prog.begin("durability: full vs claims", 2*time.Duration(len(clients))*d)
	for i := range slices {
		prog.note(fmt.Sprintf("slice %d of %d", i+1, slices))
		for _, n := range clients {
			for j := range durabilityModes {
				m := durabilityModes[(i+j)%len(durabilityModes)] // who goes first alternates
				r := results[key{m, n}]
				cpu0, start := cpuTime(), time.Now()
				cycles, errs, samples := guards[key{m, n}].run(ctx, n, slice, 0)
				r.Elapsed += time.Since(start)
				r.CPU += cpuTime() - cpu0
				r.Cycles += cycles
				r.Errors += errs
				r.Samples = append(r.Samples, samples...)
				if err := ctx.Err(); err != nil {
					return nil, err
				}
			}
		}
	}
	for _, r := range out {
		r.CyclesPerSec = float64(r.Cycles) / r.Elapsed.Seconds()
	}
	for _, n := range clients {
		if full := results[key{ledger.DurabilityFull, n}]; full.CyclesPerSec > 0 {
			for _, m := range durabilityModes {
				results[key{m, n}].VsFull = results[key{m, n}].CyclesPerSec / full.CyclesPerSec
			}
		}
	}
	strace, err := exec.LookPath("strace")
	if err != nil {
		return out, nil // fsyncs stay unknown (-1)
	}
	prog.begin("durability: counting fsyncs with strace", 0)
	for _, n := range clients {
		for _, m := range durabilityModes {
			f, err := countFsyncs(ctx, strace, filepath.Join(work, fmt.Sprintf("count-%s-%d.db", m, n)), m, n)
			if err != nil {
				return nil, fmt.Errorf("counting fsyncs, %s, %d clients: %w", m, n, err)
			}
			results[key{m, n}].FsyncsPerCycle = f
		}
	}
	return out, nil
}

// fsyncCycles is how many cycles the fsync count runs, spread over the
// clients (a test runs fewer).
var fsyncCycles = 480

// countFsyncs returns the fsync and fdatasync calls per cycle of n clients
// on a new ledger at path with durability m: those of a run of
// fsyncCycles cycles less those of a run of none (opening and closing the
// ledger), each in a process of its own under strace.
func countFsyncs(ctx context.Context, strace, path string, m ledger.Durability, n int) (float64, error) {
	c, err := openDurable(path, m) // create it, so that both runs open it alike
	if err != nil {
		return 0, err
	}
	c.g.Close()
	perClient := (fsyncCycles + n - 1) / n
	none, _, err := straceFsyncs(ctx, strace, path, m, n, 0)
	if err != nil {
		return 0, err
	}
	all, cycles, err := straceFsyncs(ctx, strace, path, m, n, perClient)
	if err != nil {
		return 0, err
	}
	return float64(all-none) / float64(max(cycles, 1)), nil
}

// straceFsyncs runs the durability subcommand under strace and returns
// the fsync and fdatasync calls of its process and the cycles it ran.
func straceFsyncs(ctx context.Context, strace, path string, m ledger.Durability, n, perClient int) (calls, cycles int, err error) {
	self, err := os.Executable()
	if err != nil {
		return 0, 0, err
	}
	summary := path + fmt.Sprintf(".strace-%d", perClient)
	cmd := exec.CommandContext(ctx, strace, "-f", "--seccomp-bpf", "-c", "-e", "trace=fsync,fdatasync", "-o", summary,
		self, durabilityCommand, "-ledger", path, "-durability", m.String(), "-clients", fmt.Sprint(n), "-cycles", fmt.Sprint(perClient))
	cmd.Stderr = os.Stderr
	out, err := cmd.Output()
	if err != nil {
		return 0, 0, fmt.Errorf("%s: %w", strings.Join(cmd.Args, " "), err)
	}
	if cycles, err = strconv.Atoi(strings.TrimSpace(string(out))); err != nil {
		return 0, 0, fmt.Errorf("the durability subcommand printed %q", out)
	}
	f, err := os.Open(summary)
	if err != nil {
		return 0, 0, err
	}
	defer f.Close()
	calls, err = syncCalls(f)
	return calls, cycles, err
}

// syncCalls reads the calls of fsync and fdatasync from a summary of
// strace -c: lines of "% time, seconds, usecs/call, calls, [errors,]
// syscall".
func syncCalls(r io.Reader) (int, error) {
	total, found := 0, false
	sc := bufio.NewScanner(r)
	for sc.Scan() {
		f := strings.Fields(sc.Text())
		if len(f) < 5 || (f[len(f)-1] != "fsync" && f[len(f)-1] != "fdatasync") {
			continue
		}
		n, err := strconv.Atoi(f[3])
		if err != nil {
			return 0, fmt.Errorf("strace summary line %q: %w", sc.Text(), err)
		}
		total, found = total+n, true
	}
	if err := sc.Err(); err != nil {
		return 0, err
	}
	if !found {
		return 0, nil // no such call at all: strace prints no line for it
	}
	return total, nil
}

// durabilityMain runs the durability subcommand: cycles per client cycles
// on each of clients goroutines, then prints the cycles completed.
func durabilityMain(args []string) int {
	fs := flag.NewFlagSet(durabilityCommand, flag.ContinueOnError)
	target := fs.String("ledger", "", "ledger path")
	var d ledger.Durability
	fs.Var(&d, "durability", "full or claims")
	clients := fs.Int("clients", 1, "goroutines")
	perClient := fs.Int("cycles", 0, "cycles per goroutine")
	if err := fs.Parse(args); err != nil {
		return 2
	}
	c, err := openDurable(*target, d)
	if err != nil {
		fmt.Fprintln(os.Stderr, "durability:", err)
		return 1
	}
	cycles, errs, samples := c.run(context.Background(), *clients, 0, *perClient)
	if err := c.g.Close(); err != nil {
		fmt.Fprintln(os.Stderr, "durability:", err)
		return 1
	}
	if errs > 0 {
		fmt.Fprintln(os.Stderr, "durability:", errors.New(strings.Join(samples, "; ")))
		return 1
	}
	fmt.Println(cycles)
	return 0
}

// printDurability writes the comparison's table.
func (r *report) printDurability(out io.Writer) {
	fmt.Fprintln(out, "Durability: full cycles of an ordinary operation by N clients (goroutines of one process), full vs claims in the same slices")
	w := tabwriter.NewWriter(out, 0, 0, 2, ' ', tabwriter.AlignRight)
	fmt.Fprintln(w, "durability\tclients\tcycles/s\tvs full\tfsyncs/cycle\tCPU/cycle µs\terrors\t")
	for _, d := range r.Durability {
		fsyncs := "n/a"
		if d.FsyncsPerCycle >= 0 {
			fsyncs = fmt.Sprintf("%.2f", d.FsyncsPerCycle)
		}
		fmt.Fprintf(w, "%s\t%d\t%.1f\t%.2fx\t%s\t%d\t%d\t\n", d.Durability, d.Clients, d.CyclesPerSec, d.VsFull, fsyncs, d.CPUPerCycle().Microseconds(), d.Errors)
	}
	w.Flush()
	fmt.Fprintln(out)
}
