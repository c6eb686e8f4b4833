// Command changeset-bench measures what a guarded write costs on this
// machine, and what happens when processes share a ledger, in one
// invocation:
//
//   - the physical baseline: how many transactions of one INSERT and one
//     conditional UPDATE the same SQLite file, with the ledger's pragmas
//     (WAL, synchronous=FULL, BEGIN IMMEDIATE), commits per second;
//   - full ledger cycles (preview, apply, undo through the Go API) per
//     second, for an ordinary Operation and a transactional operation, the commits
//     each step costs, and the ledger's commit rate as a share of the
//     baseline's;
//   - the CPU time a cycle costs outside fsync, from the same workload on
//     tmpfs (where fsync returns at once) and getrusage;
//   - N processes (1, 2, 4, 8) sharing one ledger: throughput, claim
//     latency, busy errors and double applies, and N processes racing to
//     apply the same changes;
//   - the same for PostgreSQL at 1, 4 and 16 clients with --postgres.
//
// With --mcp it measures the path users take instead: K example servers
// (examples/settings, an ordinary operation, and examples/tickets, a
// transactional one), each on a ledger of its own, driven by go-sdk
// clients over stdio and Streamable HTTP, against a floor measured in the
// same run: three read-only calls of the same servers plus the commits of
// a cycle on the same disk. --mcp-profile writes a CPU profile of an
// in-process settings server under the same load.
//
// --durability full|claims opens every ledger it measures with that
// durability; --durability-clients 1,4,16 also compares the two at those
// numbers of clients (goroutines of one process), cycles/s and, with
// strace installed, fsyncs per cycle.
//
// It prints tables and writes the figures as JSON with --json. On a
// terminal, a progress line shows on standard error.
//
// Usage:
//
//	changeset-bench [--quick] [--dir DIR] [--json FILE] [--postgres URL] [--durability full|claims]
//	changeset-bench --skip-cycles --skip-procs --durability-clients 1,4,16 [--duration D]
//	changeset-bench --mcp [--quick] [--dir DIR] [--json FILE] [--mcp-profile FILE]
//	changeset-bench --scale N [--scale-base M] [--dir DIR] [--json FILE] [--postgres URL]
//
// With --scale it builds two ledgers of a realistic mix through package
// ledger's API, of M (10,000 by default) and N changes, and times the
// dashboard's pages, opening and lookups in this process and
// mcp-changeset's commands (list --by and --action, expire, check,
// prune) as processes on both, the smaller first for each row, and
// prints a markdown table with the ratio of the two: SQLite always,
// PostgreSQL too with --postgres (a fresh schema per ledger, dropped at
// the end).
//
// --quick takes about 20 seconds, the default about a minute (more with
// --postgres). docs/benchmarks.md explains the figures.
package main

import (
	"context"
	"flag"
	"fmt"
	"net/url"
	"os"
	"os/signal"
	"runtime"
	"strings"
	"time"

	changeset "github.com/mcp-changeset/changeset-go"
	_ "github.com/mcp-changeset/changeset-go/ledger/postgres" // postgres:// ledgers for --postgres
)

func main() {
	if len(os.Args) > 1 && os.Args[1] == workerCommand {
		os.Exit(workerMain(os.Args[2:]))
	}
	if len(os.Args) > 1 && os.Args[1] == durabilityCommand {
		os.Exit(durabilityMain(os.Args[2:]))
	}
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt)
	err := run(ctx, os.Args[1:])
	stop()
	if err != nil {
		fmt.Fprintln(os.Stderr, "changeset-bench:", err)
		os.Exit(1)
	}
}

// options are the command's flags.
type options struct {
	dir, memDir          string
	duration, memDur     time.Duration
	procs, raceProcs     []int
	raceChanges          int
	postgres             string
	pgClients            []int
	jsonPath             string
	skipMedia, skipProcs bool
	mcp                  mcpOptions
	scale                scaleOptions
	durabilityClients    []int
}

func parseFlags(args []string) (*options, error) {
	fs := flag.NewFlagSet("changeset-bench", flag.ContinueOnError)
	o := &options{}
	quick := fs.Bool("quick", false, "short phases (2 s on disk, 1 s on tmpfs, races at the largest process count only; with --mcp 0.7 s per client count): under a minute")
	fs.StringVar(&o.dir, "dir", os.TempDir(), "directory for the ledgers: put it on the disk you mean to measure")
	fs.StringVar(&o.memDir, "mem-dir", memDir(), "a tmpfs directory for the CPU measurement (\"\" to skip)")
	fs.DurationVar(&o.duration, "duration", 5*time.Second, "length of each measurement on disk (with --mcp: of each client count's cycles, default 3 s)")
	fs.DurationVar(&o.memDur, "mem-duration", 2*time.Second, "length of each measurement on tmpfs")
	procs := fs.String("procs", "1,2,4,8", "process counts sharing one SQLite ledger")
	raceProcs := fs.String("race-procs", "", "process counts that race for the same changes (default: every count above 1; with --quick, the largest)")
	fs.IntVar(&o.raceChanges, "race-changes", 1250, "changes each race previews; every process claims every one")
	fs.StringVar(&o.postgres, "postgres", "", "a postgres:// URL: also measure PostgreSQL (uses a schema of its own, dropped at the end)")
	pgClients := fs.String("pg-clients", "1,4,16", "client processes sharing the PostgreSQL ledger")
	fs.StringVar(&o.jsonPath, "json", "", "write the figures as JSON to `FILE`")
	fs.BoolVar(&o.skipMedia, "skip-cycles", false, "skip the baseline and single-process cycles")
	fs.BoolVar(&o.skipProcs, "skip-procs", false, "skip the multi-process measurements")
	fs.Var(&durability, "durability", "the durability of every ledger measured: full (every commit waits for the disk) or claims (only the claims do)")
	durabilityClients := fs.String("durability-clients", "", "also compare the durabilities full and claims with these client counts (goroutines of one process), e.g. 1,4,16; fsyncs counted with strace when installed")
	fs.BoolVar(&o.mcp.on, "mcp", false, "measure example servers through go-sdk clients instead (see the --mcp-* flags)")
	mcpClients := fs.String("mcp-clients", "1,2,4", "with --mcp: client counts, each client driving a server of its own")
	mcpTransports := fs.String("mcp-transports", "stdio,http", "with --mcp: transports, stdio and/or http (Streamable HTTP on loopback)")
	mcpExamples := fs.String("mcp-examples", "settings,tickets", "with --mcp: the examples to run (settings: ordinary operation; tickets: transactional)")
	fs.StringVar(&o.mcp.profile, "mcp-profile", "", "with --mcp: also write a CPU profile of an in-process settings server under one client's load to `FILE`")
	fs.IntVar(&o.scale.N, "scale", 0, "build ledgers of `N` changes and of --scale-base changes through the ledger's API and time the pages and commands on both (see docs/benchmarks.md)")
	fs.IntVar(&o.scale.Base, "scale-base", 10000, "with --scale: the size N is compared with")
	fs.StringVar(&o.scale.CLI, "cli", "", "with --scale: the mcp-changeset binary to time (default: built from the module with go build)")
	fs.BoolVar(&o.scale.SkipSQLite, "skip-sqlite", false, "with --scale and --postgres: measure PostgreSQL only")
	fs.BoolVar(&o.scale.Keep, "keep-ledgers", false, "with --scale: keep the ledgers (and PostgreSQL schemas) instead of deleting them")
	fs.IntVar(&o.scale.MaxRuns, "scale-runs", 25, "with --scale: time each quick row at most this many times (the median is reported)")
	fs.Uint64Var(&o.scale.Seed, "scale-seed", 1, "with --scale: the seed of the ledgers' contents (the same seed builds the same ledgers)")
	fs.Usage = func() {
		fmt.Fprintf(fs.Output(), "Usage: changeset-bench [flags]\n\nMeasure the changeset ledger against the disk's own commit rate.\n\nFlags:\n")
		fs.PrintDefaults()
		fmt.Fprintf(fs.Output(), "\nExamples:\n  changeset-bench --quick\n  changeset-bench --json bench.json\n  changeset-bench --mcp --quick --mcp-profile mcp.pprof\n  changeset-bench --postgres 'postgres://bench@localhost/bench' --skip-cycles\n  changeset-bench --scale 100000 --json scale.json\n")
	}
	if err := fs.Parse(args); err != nil {
		return nil, err
	}
	if fs.NArg() > 0 {
		return nil, fmt.Errorf("unexpected argument %q", fs.Arg(0))
	}
	if o.scale.N != 0 && o.mcp.on {
		return nil, fmt.Errorf("--scale and --mcp measure different things; run them one at a time")
	}
	set := map[string]bool{}
	fs.Visit(func(f *flag.Flag) { set[f.Name] = true })
	switch {
	case o.mcp.on && !set["duration"] && *quick:
		o.duration = 700 * time.Millisecond
	case o.mcp.on && !set["duration"]:
		o.duration = 3 * time.Second
	case *quick && !set["duration"]:
		o.duration = 2 * time.Second
	}
	if *quick {
		if !set["mem-duration"] {
			o.memDur = time.Second
		}
	}
	var err error
	if err := o.mcp.parse(*mcpClients, *mcpTransports, *mcpExamples); err != nil {
		return nil, err
	}
	if o.procs, err = intList(*procs); err != nil {
		return nil, fmt.Errorf("--procs: %w", err)
	}
	if *durabilityClients != "" {
		if o.durabilityClients, err = intList(*durabilityClients); err != nil {
			return nil, fmt.Errorf("--durability-clients: %w", err)
		}
	}
	if o.pgClients, err = intList(*pgClients); err != nil {
		return nil, fmt.Errorf("--pg-clients: %w", err)
	}
	switch {
	case *raceProcs != "":
		if o.raceProcs, err = intList(*raceProcs); err != nil {
			return nil, fmt.Errorf("--race-procs: %w", err)
		}
	case *quick && len(o.procs) > 0:
		o.raceProcs = []int{o.procs[len(o.procs)-1]}
	default:
		for _, n := range o.procs {
			if n > 1 {
				o.raceProcs = append(o.raceProcs, n)
			}
		}
	}
	return o, nil
}

func run(ctx context.Context, args []string) error {
	o, err := parseFlags(args)
	if err != nil {
		if err == flag.ErrHelp {
			return nil
		}
		return err
	}
	r := &report{
		Command: "changeset-bench " + strings.Join(redact(args), " "),
		Started: time.Now().UTC(),
		Machine: machine{CPU: cpuModel(), Cores: runtime.NumCPU(), Kernel: kernel(), GoVersion: runtime.Version(),
			Dir: o.dir, FSType: fsType(o.dir), MemDir: o.memDir, LoadBefore: loadAverage()},
		Settings: settings{Duration: o.duration, MemDuration: o.memDur, Procs: o.procs, RaceProcs: o.raceProcs, RaceChanges: o.raceChanges,
			Durability: durability.String()},
	}
	prog := newProgress(os.Stderr)
	if o.scale.N > 0 {
		return scaleMain(ctx, o, args, prog)
	}
	if o.mcp.on {
		r.Settings.MCP = &o.mcp
		err = mcpPhases(ctx, o, r, prog)
	} else {
		err = measure(ctx, o, r, prog)
	}
	prog.close()
	if err != nil {
		return err
	}
	r.Machine.LoadAfter = loadAverage()
	r.evaluate()
	r.print(os.Stdout)
	if o.jsonPath != "" {
		if err := r.writeJSON(o.jsonPath); err != nil {
			return err
		}
	}
	return nil
}

// measure runs every phase the options ask for.
func measure(ctx context.Context, o *options, r *report, prog *progress) error {
	if !o.skipMedia {
		media := [][2]string{{"disk", o.dir}}
		if o.memDir != "" {
			media = append(media, [2]string{"tmpfs", o.memDir})
		}
		for _, m := range media {
			d := o.duration
			if m[0] == "tmpfs" {
				d = o.memDur
			}
			res, err := runMedium(ctx, m[0], m[1], d, prog)
			if err != nil {
				return fmt.Errorf("%s: %w", m[0], err)
			}
			r.Media = append(r.Media, res)
		}
	}
	if !o.skipProcs {
		work, err := os.MkdirTemp(o.dir, "changeset-bench-procs-")
		if err != nil {
			return err
		}
		defer os.RemoveAll(work)
		target := func(n int) string { return fmt.Sprintf("%s/procs-%d.db", work, n) }
		if err := createLedger(target(0)); err != nil {
			return err
		}
		db, err := openRawSQLite(ctx, target(0)) // the baseline's file: same disk, pragmas and size
		if err != nil {
			return err
		}
		defer db.Close()
		raw := func(d time.Duration) (rawResult, error) { return rawCommits(ctx, db, d, false) }
		if err := processPhases(ctx, o, r, prog, "sqlite", target, work, o.procs, o.raceProcs, raw); err != nil {
			return err
		}
	}
	if len(o.durabilityClients) > 0 {
		res, err := durabilityPhase(ctx, o.dir, o.durabilityClients, o.duration, prog)
		if err != nil {
			return fmt.Errorf("durability: %w", err)
		}
		r.Durability = res
	}
	if o.postgres != "" {
		r.Settings.PGClients = o.pgClients
		return postgresPhases(ctx, o, r, prog)
	}
	return nil
}

// processPhases measures cycles by each process count in counts, with the
// baseline that raw runs beside them, then the races. target names the
// ledger for a process count.
func processPhases(ctx context.Context, o *options, r *report, prog *progress, backend string, target func(int) string, work string,
	counts, races []int, raw func(time.Duration) (rawResult, error)) error {
	for _, n := range counts {
		if err := createLedger(target(n)); err != nil {
			return err
		}
	}
	prog.begin(fmt.Sprintf("%s: processes sharing a ledger", backend), time.Duration(len(counts))*o.duration+o.duration/2)
	procs, base, err := runProcCycles(ctx, backend, target, work, counts, o.duration, raw, prog)
	if err != nil {
		return fmt.Errorf("%s processes: %w", backend, err)
	}
	if raw != nil {
		r.ProcRaw = append(r.ProcRaw, namedRaw{backend, base})
		for _, p := range procs {
			p.VsBaseline = p.CyclesPerSec * r.commitsPerCycle() / base.PerSecond()
		}
	}
	for _, p := range procs {
		if procs[0].CyclesPerSec > 0 {
			p.Relative = p.CyclesPerSec / procs[0].CyclesPerSec
		}
	}
	r.Procs = append(r.Procs, procs...)
	for _, n := range races {
		prog.begin(fmt.Sprintf("%s: %d processes racing for %d changes", backend, n, o.raceChanges), 0)
		rc, err := runRace(ctx, backend, target(1000+n), work, n, o.raceChanges, prog)
		if err != nil {
			return fmt.Errorf("%s, race of %d processes: %w", backend, n, err)
		}
		r.Races = append(r.Races, rc)
	}
	return nil
}

// createLedger creates the ledger at target, so that workers starting
// together find it ready.
func createLedger(target string) error {
	g, err := changeset.New(nil, changeset.Options{LedgerPath: target, Durability: durability})
	if err != nil {
		return err
	}
	return g.Close()
}

// redact hides the password of a --postgres URL among args, for the report.
func redact(args []string) []string {
	out := make([]string, len(args))
	for i, a := range args {
		out[i] = a
		name, value, hasValue := strings.Cut(a, "=")
		if !hasValue && i > 0 && strings.TrimLeft(args[i-1], "-") == "postgres" {
			value, hasValue = a, true
		}
		if u, err := url.Parse(value); hasValue && err == nil && u.User != nil {
			if _, set := u.User.Password(); set {
				if value == a {
					out[i] = u.Redacted()
				} else {
					out[i] = name + "=" + u.Redacted()
				}
			}
		}
	}
	return out
}
