package main

import (
	"context"
	"database/sql"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"time"
)

// mcpOptions are the flags of the --mcp measurement.
type mcpOptions struct {
	on         bool
	profile    string
	Clients    []int    `json:"clients"`
	Transports []string `json:"transports"`
	Examples   []string `json:"examples"`
}

// parse fills o from the comma-separated flag values.
func (o *mcpOptions) parse(clients, transports, examples string) error {
	var err error
	if o.Clients, err = intList(clients); err != nil {
		return fmt.Errorf("--mcp-clients: %w", err)
	}
	if o.Transports, err = names(transports, "stdio", "http"); err != nil {
		return fmt.Errorf("--mcp-transports: %w", err)
	}
	if o.Examples, err = names(examples, "settings", "tickets"); err != nil {
		return fmt.Errorf("--mcp-examples: %w", err)
	}
	if o.on && (len(o.Clients) == 0 || len(o.Transports) == 0 || len(o.Examples) == 0) {
		return fmt.Errorf("--mcp needs at least one client count, transport and example")
	}
	return nil
}

// names splits a comma-separated list whose every entry must be one of
// known.
func names(list string, known ...string) ([]string, error) {
	var out []string
	for _, f := range strings.Split(list, ",") {
		if f = strings.TrimSpace(f); f == "" {
			continue
		}
		if !slices.Contains(known, f) {
			return nil, fmt.Errorf("unknown %q (want %s)", f, strings.Join(known, " or "))
		}
		out = append(out, f)
	}
	return out, nil
}

// mcpPhases measures every example over every transport by every client
// count, then writes the profile if asked.
func mcpPhases(ctx context.Context, o *options, r *report, prog *progress) error {
	work, err := os.MkdirTemp(o.dir, "changeset-bench-mcp-")
	if err != nil {
		return err
	}
	defer os.RemoveAll(work)
	prog.begin("building the examples", 0)
	bins, err := buildExamples(ctx, work, o.mcp.Examples)
	if err != nil {
		return err
	}
	token, tokenFile, err := newBearerToken(work)
	if err != nil {
		return err
	}
	for _, name := range o.mcp.Examples {
		for _, transport := range o.mcp.Transports {
			res, err := runMCP(ctx, o, name, bins[name], transport, work, tokenFile, token, prog)
			if err != nil {
				return fmt.Errorf("--mcp, %s over %s: %w", name, transport, err)
			}
			r.MCP = append(r.MCP, res...)
		}
	}
	if o.mcp.profile != "" {
		if r.MCPProfile, err = profileMCP(ctx, o.mcp.profile, work, o.duration, prog); err != nil {
			return fmt.Errorf("--mcp-profile: %w", err)
		}
	}
	return nil
}

// runMCP measures one example over one transport: a group of K servers
// for each client count K. The groups take turns in slices of about a
// second, each slice measuring the group's floor (read calls, then raw
// commits, half a slice each) and then its cycles, so that a machine
// whose speed drifts weighs on all of them alike.
func runMCP(ctx context.Context, o *options, name, bin, transport, work, tokenFile, token string, prog *progress) ([]*mcpResult, error) {
	ex := mcpExamples[name]
	var groups []*mcpGroup
	defer func() {
		for _, g := range groups {
			g.close()
		}
	}()
	prog.begin(fmt.Sprintf("mcp: %s over %s", name, transport), 2*o.duration*time.Duration(len(o.mcp.Clients)))
	for _, k := range o.mcp.Clients {
		g := &mcpGroup{res: &mcpResult{Example: name, Op: ex.op, Transport: transport, Clients: k, CommitsPerCycle: ex.commits}}
		groups = append(groups, g)
		for i := range k {
			prog.note(fmt.Sprintf("starting server %d of %d", i+1, k))
			base := filepath.Join(work, fmt.Sprintf("%s-%s-%d-%d", name, transport, k, i))
			s, err := startServer(ctx, ex, bin, transport, base+".db", tokenFile, token)
			if err != nil {
				return nil, fmt.Errorf("server %d of %d: %w", i+1, k, err)
			}
			g.servers = append(g.servers, s)
			db, err := openRawSQLite(ctx, base+"-raw.db")
			if err != nil {
				return nil, err
			}
			g.raw = append(g.raw, db)
		}
	}
	n := max(1, int(o.duration/time.Second))
	slice := o.duration / time.Duration(n)
	for i := range n {
		for _, g := range groups {
			prog.note(fmt.Sprintf("slice %d of %d: %d clients", i+1, n, g.res.Clients))
			if err := g.slice(ctx, slice); err != nil {
				return nil, err
			}
		}
	}
	var out []*mcpResult
	for _, g := range groups {
		out = append(out, g.summary())
	}
	return out, nil
}

// mcpGroup is K servers, each driven by a client of its own, and K raw
// SQLite files beside their ledgers for the floor.
type mcpGroup struct {
	res     *mcpResult
	servers []*mcpServer
	raw     []*sql.DB
	// Sums over the slices; times are the sums of the clients' times.
	reads, cycles       int
	readTime, cycleTime time.Duration
	readCPU, cycleCPU   time.Duration // of the server processes
	clientCPU           time.Duration // of this process, during the cycles
	commits             rawResult
	cpuKnown            bool
}

// slice measures the floor for d, then runs cycles for d.
func (g *mcpGroup) slice(ctx context.Context, d time.Duration) error {
	cpu0, known := g.serverCPU()
	n, el, err := together(g.servers, d/2, func(s *mcpServer) error { _, err := s.call(ctx, "read", s.ex.read, nil); return err })
	if err != nil {
		return err
	}
	cpu1, _ := g.serverCPU()
	g.reads, g.readTime, g.readCPU, g.cpuKnown = g.reads+n, g.readTime+el, g.readCPU+cpu1-cpu0, known

	var mu sync.Mutex
	var wg sync.WaitGroup
	errs := make([]error, len(g.raw))
	for i, db := range g.raw {
		wg.Go(func() {
			r, err := rawCommits(ctx, db, d/2, false)
			mu.Lock()
			g.commits, errs[i] = g.commits.add(r), err
			mu.Unlock()
		})
	}
	wg.Wait()
	for _, err := range errs {
		if err != nil {
			return fmt.Errorf("raw commits: %w", err)
		}
	}

	cpu2, _ := g.serverCPU()
	self := cpuTime()
	n, el, err = together(g.servers, d, func(s *mcpServer) error { return s.cycle(ctx) })
	if err != nil {
		return err
	}
	cpu3, _ := g.serverCPU()
	g.cycles, g.cycleTime, g.cycleCPU, g.clientCPU = g.cycles+n, g.cycleTime+el, g.cycleCPU+cpu3-cpu2, g.clientCPU+cpuTime()-self
	return nil
}

// serverCPU is the CPU time the group's server processes have used, and
// whether it is known.
func (g *mcpGroup) serverCPU() (time.Duration, bool) {
	var sum time.Duration
	for _, s := range g.servers {
		c, ok := procCPU(s.pid())
		if !ok {
			return 0, false
		}
		sum += c
	}
	return sum, true
}

// together has every server do step over and over, each from a goroutine
// of its own, until d has passed; it returns the steps done and the sum of
// the goroutines' elapsed times.
func together(servers []*mcpServer, d time.Duration, step func(*mcpServer) error) (int, time.Duration, error) {
	var mu sync.Mutex
	var wg sync.WaitGroup
	var steps int
	var elapsed time.Duration
	var first error
	for _, s := range servers {
		wg.Go(func() {
			n, start := 0, time.Now()
			var err error
			for time.Since(start) < d && err == nil {
				if err = step(s); err == nil {
					n++
				}
			}
			mu.Lock()
			defer mu.Unlock()
			steps, elapsed = steps+n, elapsed+time.Since(start)
			if first == nil {
				first = err
			}
		})
	}
	wg.Wait()
	return steps, elapsed, first
}

// close ends the group's servers and closes the raw files.
func (g *mcpGroup) close() {
	var wg sync.WaitGroup
	for _, s := range g.servers {
		wg.Go(s.close)
	}
	wg.Wait()
	for _, db := range g.raw {
		db.Close()
	}
}

// summary computes the group's result from its sums.
func (g *mcpGroup) summary() *mcpResult {
	r, k := g.res, len(g.servers)
	r.Cycles = g.cycles
	r.Elapsed = g.cycleTime / time.Duration(k) // the clients run side by side
	r.CyclesPerSec = float64(g.cycles) / r.Elapsed.Seconds()
	r.ReadCall = g.readTime / time.Duration(max(g.reads, 1))
	r.Commit = g.commits.Elapsed / time.Duration(max(g.commits.Commits, 1))
	floor := 3*r.ReadCall + time.Duration(r.CommitsPerCycle)*r.Commit
	r.FloorPerSec = float64(k) / floor.Seconds()
	r.VsFloor = r.CyclesPerSec / r.FloorPerSec
	var lat = map[string][]int64{}
	for _, s := range g.servers {
		for kind, l := range s.lat {
			lat[kind] = append(lat[kind], l...)
		}
	}
	r.Calls = map[string]latency{}
	read := percentile(lat["read"], 50)
	for kind, l := range lat {
		c := latency{N: len(l), P50: percentile(l, 50), P99: percentile(l, 99)}
		if read > 0 {
			c.VsRead = float64(c.P50) / float64(read)
		}
		r.Calls[kind] = c
	}
	if g.cpuKnown && g.cycles > 0 && g.reads > 0 {
		r.ServerCPUPerCall = g.cycleCPU / time.Duration(3*g.cycles)
		r.ServerCPUPerRead = g.readCPU / time.Duration(g.reads)
		if r.ServerCPUPerRead > 0 {
			r.ServerCPUVsRead = float64(r.ServerCPUPerCall) / float64(r.ServerCPUPerRead)
		}
	}
	r.ClientCPUPerCycle = g.clientCPU / time.Duration(max(g.cycles, 1))
	return r
}
