package main

import (
	"fmt"
	"io"
	"text/tabwriter"
	"time"
)

// mcpResult is K clients, each driving an example server of its own over
// one transport, running full cycles (preview, apply_change, undo_change).
type mcpResult struct {
	Example   string `json:"example"`
	Op        string `json:"op"` // "ordinary" or "tx"
	Transport string `json:"transport"`
	Clients   int    `json:"clients"`
	Cycles    int    `json:"cycles"`
	// Elapsed is the clients' mean time; CyclesPerSec is the group's.
	Elapsed      time.Duration `json:"elapsed_ns"`
	CyclesPerSec float64       `json:"cycles_per_s"`
	// The floor is the cycle rate that three read-only calls of the same
	// servers plus the commits of a cycle on the same disk allow, both
	// measured with the same number of clients at once:
	// Clients / (3 × ReadCall + CommitsPerCycle × Commit).
	CommitsPerCycle int           `json:"commits_per_cycle"`
	ReadCall        time.Duration `json:"read_call_ns"` // mean
	Commit          time.Duration `json:"commit_ns"`    // mean, of a raw INSERT + UPDATE transaction
	FloorPerSec     float64       `json:"floor_cycles_per_s"`
	// VsFloor is CyclesPerSec over FloorPerSec: 1 would mean the library
	// adds nothing to the SDK's round trips and the disk's commits.
	VsFloor float64 `json:"vs_floor"`
	// Calls holds the latency of preview, apply, undo and read calls.
	Calls map[string]latency `json:"calls"`
	// Server CPU (user + system of the server processes) per call of a
	// cycle and per read call, and their ratio; 0 where unknown.
	ServerCPUPerCall time.Duration `json:"server_cpu_per_call_ns"`
	ServerCPUPerRead time.Duration `json:"server_cpu_per_read_ns"`
	ServerCPUVsRead  float64       `json:"server_cpu_vs_read"`
	// ClientCPUPerCycle is this process's CPU (the go-sdk clients) per
	// cycle: on a small machine the clients compete with the servers.
	ClientCPUPerCycle time.Duration `json:"client_cpu_per_cycle_ns"`
}

// latency is the distribution of one kind of call.
type latency struct {
	N   int           `json:"n"`
	P50 time.Duration `json:"p50_ns"`
	P99 time.Duration `json:"p99_ns"`
	// VsRead is P50 over the read call's P50.
	VsRead float64 `json:"p50_vs_read"`
}

// callKinds are the calls in the order the tables show them.
var callKinds = []string{"preview", "apply", "undo", "read"}

// printMCP writes the tables of the --mcp measurement.
func (r *report) printMCP(out io.Writer) {
	w := tabwriter.NewWriter(out, 0, 0, 2, ' ', tabwriter.AlignRight)
	fmt.Fprintln(out, "MCP path: preview + apply_change + undo_change through go-sdk clients, each with an example server and ledger of its own")
	fmt.Fprintln(out, "(floor: 3 read-only calls + the cycle's commits as raw transactions on the same disk, measured with as many clients at once)")
	fmt.Fprintln(w, "example\ttransport\tclients\tcycles/s\tfloor cycles/s\tvs floor\tread call ms\tcommit ms\tserver CPU µs/call\tµs/read\tcall vs read\tclient CPU µs/cycle\t")
	for _, m := range r.MCP {
		fmt.Fprintf(w, "%s (%s)\t%s\t%d\t%.0f\t%.0f\t%.0f%%\t%.2f\t%.2f\t%d\t%d\t%.1fx\t%d\t\n", m.Example, m.Op, m.Transport, m.Clients,
			m.CyclesPerSec, m.FloorPerSec, 100*m.VsFloor, msf(m.ReadCall), msf(m.Commit),
			m.ServerCPUPerCall.Microseconds(), m.ServerCPUPerRead.Microseconds(), m.ServerCPUVsRead, m.ClientCPUPerCycle.Microseconds())
	}
	w.Flush()
	fmt.Fprintln(out)
	fmt.Fprintln(out, "MCP path: latency per call, p50 / p99 in ms (and p50 over the read call's)")
	fmt.Fprint(w, "example\ttransport\tclients\t")
	for _, k := range callKinds {
		fmt.Fprintf(w, "%s\t", k)
	}
	fmt.Fprintln(w)
	for _, m := range r.MCP {
		fmt.Fprintf(w, "%s\t%s\t%d\t", m.Example, m.Transport, m.Clients)
		for _, k := range callKinds {
			c := m.Calls[k]
			fmt.Fprintf(w, "%.2f / %.2f (%.1fx)\t", msf(c.P50), msf(c.P99), c.VsRead)
		}
		fmt.Fprintln(w)
	}
	w.Flush()
	fmt.Fprintln(out)
	if p := r.MCPProfile; p != nil {
		fmt.Fprintf(out, "CPU profile of an in-process settings server, one client over in-memory transports: %s\n", p.Path)
		fmt.Fprintf(out, "(%d cycles, %.0f cycles/s, preview/apply/undo/read p50 %.2f/%.2f/%.2f/%.2f ms); server side only:\n",
			p.Cycles, p.CyclesPerSec, msf(p.Calls["preview"].P50), msf(p.Calls["apply"].P50), msf(p.Calls["undo"].P50), msf(p.Calls["read"].P50))
		fmt.Fprintf(out, "  go tool pprof -tagfocus side=server -top -cum %s\n\n", p.Path)
	}
}

// evaluateMCP adds the goals of issue 18 that the --mcp measurement
// decides: over stdio, one client at >= 80% of the floor and the largest
// client count (four by default) at >= 70%.
func (r *report) evaluateMCP() {
	for _, name := range r.Settings.MCP.Examples {
		var first, last *mcpResult
		for _, m := range r.MCP {
			if m.Example == name && m.Transport == "stdio" {
				if first == nil {
					first = m
				}
				last = m
			}
		}
		if first == nil {
			continue
		}
		add := func(m *mcpResult, target float64) {
			r.Goals = append(r.Goals, goal{
				Name:     fmt.Sprintf("MCP over stdio, %s (%s), %d clients, vs the floor", m.Example, m.Op, m.Clients),
				Target:   fmt.Sprintf(">= %.0f%%", 100*target),
				Measured: fmt.Sprintf("%.0f%% (%.0f vs %.0f cycles/s)", 100*m.VsFloor, m.CyclesPerSec, m.FloorPerSec),
				Met:      m.VsFloor >= target,
			})
		}
		if first.Clients == 1 {
			add(first, 0.8)
		}
		if last.Clients > 1 {
			add(last, 0.7)
		}
	}
}

// msf is d in milliseconds, with fractions.
func msf(d time.Duration) float64 { return float64(d) / float64(time.Millisecond) }
