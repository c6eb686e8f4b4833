package main

import (
	"encoding/json"
	"fmt"
	"io"
	"os"
	"strings"
	"text/tabwriter"
	"time"
)

// report is everything one invocation measured; --json writes it.
type report struct {
	Command  string          `json:"command"`
	Started  time.Time       `json:"started"`
	Machine  machine         `json:"machine"`
	Settings settings        `json:"settings"`
	Media    []*mediumResult `json:"media"`
	Procs    []*procResult   `json:"processes"`
	Races    []*raceResult   `json:"races"`
	// MCP is the --mcp measurement: example servers through go-sdk
	// clients; MCPProfile the in-process profile of --mcp-profile.
	MCP        []*mcpResult   `json:"mcp,omitempty"`
	MCPProfile *profileResult `json:"mcp_profile,omitempty"`
	// Durability is the comparison of --durability-clients.
	Durability []*durabilityResult `json:"durability,omitempty"`
	// ProcRaw is the baseline measured beside the processes, per backend.
	ProcRaw []namedRaw `json:"processes_raw,omitempty"`
	Goals   []goal     `json:"goals"`
	// Notes explain goals: where the time of a goal that is not met goes.
	Notes []string `json:"notes,omitempty"`
}

type machine struct {
	CPU       string `json:"cpu"`
	Cores     int    `json:"cores"`
	Kernel    string `json:"kernel"`
	GoVersion string `json:"go"`
	Dir       string `json:"dir"`
	FSType    string `json:"fs_type"`
	MemDir    string `json:"mem_dir,omitempty"`
	// LoadBefore and LoadAfter are the one-minute load averages around
	// the run: other work on the machine skews every figure.
	LoadBefore string `json:"load_before"`
	LoadAfter  string `json:"load_after"`
}

type settings struct {
	Duration    time.Duration `json:"duration_ns"`
	MemDuration time.Duration `json:"mem_duration_ns"`
	Procs       []int         `json:"procs"`
	RaceProcs   []int         `json:"race_procs"`
	RaceChanges int           `json:"race_changes"`
	PGClients   []int         `json:"pg_clients,omitempty"`
	Durability  string        `json:"durability"` // --durability
	MCP         *mcpOptions   `json:"mcp,omitempty"`
}

// namedRaw is a baseline of one backend.
type namedRaw struct {
	Backend string    `json:"backend"`
	Raw     rawResult `json:"raw"`
}

// goal is one of the targets of issues 9 and 18, with what this run measured.
type goal struct {
	Name     string `json:"name"`
	Target   string `json:"target"`
	Measured string `json:"measured"`
	Met      bool   `json:"met"`
}

// medium returns the result for a medium, or nil.
func (r *report) medium(name string) *mediumResult {
	for _, m := range r.Media {
		if m.Medium == name {
			return m
		}
	}
	return nil
}

// evaluate fills r.Goals from the measurements.
func (r *report) evaluate() {
	if r.Settings.MCP != nil {
		r.evaluateMCP()
	}
	if disk := r.medium("disk"); disk != nil {
		for _, c := range disk.Cycles {
			r.Goals = append(r.Goals, goal{
				Name:     fmt.Sprintf("%s cycle, per commit, vs the raw commit bound", c.Op),
				Target:   ">= 80%",
				Measured: fmt.Sprintf("%.0f%% (%.1f cycles/s x %.0f commits vs %.0f commits/s)", 100*c.Ratio, c.PerSecond(), c.Steps.Total(), c.RawPerSec),
				Met:      c.Ratio >= 0.8,
			})
		}
	}
	cpu := r.medium("tmpfs")
	where := "on tmpfs"
	if cpu == nil {
		cpu, where = r.medium("disk"), "on disk (no tmpfs: includes the kernel's fsync work)"
	}
	if cpu != nil && cpu.Raw.Commits > 0 {
		// The bare transactions' CPU for as many commits as the cycle
		// makes, measured in the same run on the same medium.
		perCommit := time.Duration(float64(cpu.Raw.CPU) / float64(cpu.Raw.Commits))
		for _, c := range cpu.Cycles {
			bare := time.Duration(c.Steps.Total() * float64(perCommit))
			ratio := float64(c.CPUPerCycle()) / float64(bare)
			r.Goals = append(r.Goals, goal{
				Name:   fmt.Sprintf("CPU per %s cycle outside fsync, vs its bare transactions", c.Op),
				Target: "<= 1.5x",
				Measured: fmt.Sprintf("%.1fx (%d µs user+sys %s vs %d µs for %.0f bare transactions)",
					ratio, c.CPUPerCycle().Microseconds(), where, bare.Microseconds(), c.Steps.Total()),
				Met: ratio <= 1.5,
			})
		}
		if lo := cpu.LedgerOnly; lo.Commits > 0 {
			// Not a goal of the issue: where the ordinary cycle's CPU
			// goes, the Guard's Go code or the ledger's statements.
			alone := lo.CPU / time.Duration(lo.Commits/5)
			for _, c := range cpu.Cycles {
				if c.Op == "ordinary" {
					r.Notes = append(r.Notes, fmt.Sprintf("ordinary cycle: %d µs CPU %s; the same five transactions through package ledger alone %d µs (the Guard adds %.2fx); %d bare transactions %d µs (the ledger's statements cost %.1fx those)",
						c.CPUPerCycle().Microseconds(), where, alone.Microseconds(), float64(c.CPUPerCycle())/float64(alone),
						int(c.Steps.Total()), time.Duration(c.Steps.Total()*float64(perCommit)).Microseconds(), float64(alone)/(c.Steps.Total()*float64(perCommit))))
				}
			}
		}
	}
	for _, backend := range []string{"sqlite", "postgres"} {
		var first, last *procResult
		for _, p := range r.Procs {
			if p.Backend == backend {
				if first == nil {
					first = p
				}
				last = p
			}
		}
		if first == nil || last == first {
			continue
		}
		r.Goals = append(r.Goals, goal{
			Name:     fmt.Sprintf("%s: %d processes' throughput vs %d", backend, last.Procs, first.Procs),
			Target:   ">= 70%",
			Measured: fmt.Sprintf("%.0f%% (%.1f vs %.1f cycles/s)", 100*last.Relative, last.CyclesPerSec, first.CyclesPerSec),
			Met:      last.Relative >= 0.7,
		})
		doubles, busy, claims := last.DoubleApplies, last.Busy, last.Cycles
		for _, rc := range r.Races {
			if rc.Backend == backend && rc.Procs == last.Procs {
				doubles, busy, claims = doubles+rc.DoubleApplies+rc.Unapplied, busy+rc.Busy, claims+rc.Claims
			}
		}
		r.Goals = append(r.Goals, goal{
			Name:     fmt.Sprintf("%s: %d processes, double applies and busy errors", backend, last.Procs),
			Target:   "0 and 0 across >= 10,000 claims",
			Measured: fmt.Sprintf("%d double (or missing) applies, %d busy errors, %d claims", doubles, busy, claims),
			Met:      doubles == 0 && busy == 0 && claims >= 10000,
		})
	}
}

// print writes the human-readable tables.
func (r *report) print(out io.Writer) {
	m := r.Machine
	fmt.Fprintf(out, "changeset-bench on %s (%d cores), %s, %s; ledgers in %s (%s); load average %s before, %s after\n\n",
		m.CPU, m.Cores, m.Kernel, m.GoVersion, m.Dir, m.FSType, m.LoadBefore, m.LoadAfter)
	w := tabwriter.NewWriter(out, 0, 0, 2, ' ', tabwriter.AlignRight)
	if len(r.MCP) > 0 {
		r.printMCP(out)
	}
	if len(r.Media)+len(r.ProcRaw) > 0 {
		r.printBaseline(out)
	}
	if len(r.Media) > 0 {
		r.printCycles(out)
	}
	if len(r.Procs) > 0 {
		fmt.Fprintln(out, "Processes sharing one ledger: full cycles of the ordinary operation")
		fmt.Fprintln(w, "backend\tprocs\tcycles/s\tvs first\tcommits vs baseline\tclaim p50 ms\tclaim p99 ms\tbusy\tdouble applies\tother errors\t")
		for _, p := range r.Procs {
			fmt.Fprintf(w, "%s\t%d\t%.1f\t%.0f%%\t%.0f%%\t%.1f\t%.1f\t%d\t%d\t%d\t\n", p.Backend, p.Procs, p.CyclesPerSec, 100*p.Relative, 100*p.VsBaseline,
				ms(p.ClaimP50), ms(p.ClaimP99), p.Busy, p.DoubleApplies, p.Other)
		}
		w.Flush()
		fmt.Fprintln(out)
	}
	if len(r.Durability) > 0 {
		r.printDurability(out)
	}
	if len(r.Races) > 0 {
		fmt.Fprintln(out, "Racing claims: every process applies every change, in its own random order")
		fmt.Fprintln(w, "backend\tprocs\tchanges\tclaims\tapplied\tlost race\tbusy\tother\tdouble applies\tunapplied\tclaim p50 ms\tclaim p99 ms\tclaims/s\t")
		for _, rc := range r.Races {
			fmt.Fprintf(w, "%s\t%d\t%d\t%d\t%d\t%d\t%d\t%d\t%d\t%d\t%.1f\t%.1f\t%.0f\t\n", rc.Backend, rc.Procs, rc.Changes, rc.Claims,
				rc.Applied, rc.Conflicts+rc.StatusRefusals, rc.Busy, rc.Other, rc.DoubleApplies, rc.Unapplied,
				ms(rc.ClaimP50), ms(rc.ClaimP99), float64(rc.Claims)/rc.Elapsed.Seconds())
		}
		w.Flush()
		fmt.Fprintln(out)
	}
	for _, s := range r.samples() {
		fmt.Fprintln(out, "error sample:", s)
	}
	fmt.Fprintln(out, "Goals (issues 9 and 18)")
	gw := tabwriter.NewWriter(out, 0, 0, 2, ' ', 0)
	for _, g := range r.Goals {
		mark := "MET"
		if !g.Met {
			mark = "NOT MET"
		}
		fmt.Fprintf(gw, "  %s\t%s\t%s\t%s\n", mark, g.Name, g.Target, g.Measured)
	}
	gw.Flush()
	for _, n := range r.Notes {
		fmt.Fprintln(out, "  note:", n)
	}
}

func (r *report) samples() []string {
	var out []string
	for _, p := range r.Procs {
		out = append(out, p.Samples...)
	}
	for _, rc := range r.Races {
		out = append(out, rc.Samples...)
	}
	if len(out) > 5 {
		out = out[:5]
	}
	return out
}

// writeJSON writes r to path.
func (r *report) writeJSON(path string) error {
	b, err := json.MarshalIndent(r, "", "  ")
	if err != nil {
		return err
	}
	return os.WriteFile(path, append(b, '\n'), 0o644)
}

func micros(d time.Duration, n int) float64 {
	if n == 0 {
		return 0
	}
	return float64(d.Microseconds()) / float64(n)
}

func ms(d time.Duration) float64 { return float64(d.Microseconds()) / 1000 }

// intList parses "1,2,4,8".
func intList(s string) ([]int, error) {
	var out []int
	for _, f := range strings.Split(s, ",") {
		if f = strings.TrimSpace(f); f == "" {
			continue
		}
		var n int
		if _, err := fmt.Sscan(f, &n); err != nil || n < 1 {
			return nil, fmt.Errorf("%q is not a positive number", f)
		}
		out = append(out, n)
	}
	return out, nil
}

// printCycles writes the table of single-process cycles.
func (r *report) printCycles(out io.Writer) {
	w := tabwriter.NewWriter(out, 0, 0, 2, ' ', tabwriter.AlignRight)
	fmt.Fprintln(out, "Ledger cycles: preview + apply + undo through the Go API, one goroutine")
	fmt.Fprintln(w, "medium\top\tcycles/s\tcommits (p+a+u)\tledger commits/s\tvs baseline\twall µs/cycle\tCPU µs/cycle\t")
	for _, md := range r.Media {
		for _, c := range md.Cycles {
			fmt.Fprintf(w, "%s\t%s\t%.1f\t%g+%g+%g\t%.0f\t%.0f%%\t%d\t%d\t\n", c.Medium, c.Op, c.PerSecond(),
				c.Steps.Preview, c.Steps.Apply, c.Steps.Undo, c.PerSecond()*c.Steps.Total(), 100*c.Ratio,
				c.WallPerCycle().Microseconds(), c.CPUPerCycle().Microseconds())
		}
		if lo := md.LedgerOnly; lo.Commits > 0 {
			cycles := lo.Commits / 5
			fmt.Fprintf(w, "%s\t%s\t%.1f\t%s\t%.0f\t%.0f%%\t%d\t%d\t\n", md.Medium, "ledger alone", float64(cycles)/lo.Elapsed.Seconds(),
				"1+2+2", lo.PerSecond(), 100*lo.PerSecond()/md.Raw.PerSecond(),
				(lo.Elapsed / time.Duration(cycles)).Microseconds(), (lo.CPU / time.Duration(cycles)).Microseconds())
		}
	}
	w.Flush()
	fmt.Fprintln(out, "(ledger alone: the ordinary cycle's five transactions, rows and history, through package ledger with no Guard)")
	fmt.Fprintln(out)
}

// commitsPerCycle is what a cycle of the ordinary operation commits: as
// counted in this run, or the 5 that docs/benchmarks.md explains.
func (r *report) commitsPerCycle() float64 {
	if disk := r.medium("disk"); disk != nil {
		for _, c := range disk.Cycles {
			if c.Op == "ordinary" && c.Steps.Total() > 0 {
				return c.Steps.Total()
			}
		}
	}
	return 5
}

// printBaseline writes the table of the physical baselines.
func (r *report) printBaseline(out io.Writer) {
	w := tabwriter.NewWriter(out, 0, 0, 2, ' ', tabwriter.AlignRight)
	fmt.Fprintln(out, "Physical baseline: INSERT + conditional UPDATE per transaction, one client")
	fmt.Fprintln(out, "(SQLite: the ledger's file and pragmas, WAL, synchronous=FULL, BEGIN IMMEDIATE; PostgreSQL: the ledger's database as configured)")
	fmt.Fprintln(w, "baseline\tcommits/s\tµs/commit\tCPU µs/commit\t")
	for _, md := range r.Media {
		fmt.Fprintf(w, "%s\t%.0f\t%.0f\t%.0f\t\n", md.Medium, md.Raw.PerSecond(),
			micros(md.Raw.Elapsed, md.Raw.Commits), micros(md.Raw.CPU, md.Raw.Commits))
	}
	for _, pr := range r.ProcRaw {
		fmt.Fprintf(w, "%s, beside the processes\t%.0f\t%.0f\t%.0f\t\n", pr.Backend, pr.Raw.PerSecond(),
			micros(pr.Raw.Elapsed, pr.Raw.Commits), micros(pr.Raw.CPU, pr.Raw.Commits))
	}
	w.Flush()
	fmt.Fprintln(out)

}
