package main

import (
	"bufio"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"math"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"time"

	changeset "github.com/mcp-changeset/changeset-go"
	"github.com/mcp-changeset/changeset-go/ledger"
)

// procResult is a run of full cycles by N processes sharing one ledger.
type procResult struct {
	Backend      string        `json:"backend"`
	Procs        int           `json:"procs"`
	Cycles       int           `json:"cycles"`
	Elapsed      time.Duration `json:"elapsed_ns"`
	CyclesPerSec float64       `json:"cycles_per_s"`
	Relative     float64       `json:"relative_to_1"` // throughput over that of the smallest process count
	// VsBaseline is the group's commit rate (cycles/s times the commits of
	// a cycle) over the baseline measured beside it.
	VsBaseline    float64       `json:"vs_baseline"`
	ClaimP50      time.Duration `json:"claim_p50_ns"`
	ClaimP99      time.Duration `json:"claim_p99_ns"`
	Busy          int           `json:"busy_errors"`
	Other         int           `json:"other_errors"`
	DoubleApplies int           `json:"double_applies"`
	Samples       []string      `json:"error_samples,omitempty"`
}

// raceResult is a run of N processes racing to apply the same changes.
type raceResult struct {
	Backend        string        `json:"backend"`
	Procs          int           `json:"procs"`
	Changes        int           `json:"changes"`
	Claims         int           `json:"claims"`
	Applied        int           `json:"applied"`
	Conflicts      int           `json:"conflicts"`
	StatusRefusals int           `json:"status_refusals"`
	Busy           int           `json:"busy_errors"`
	Other          int           `json:"other_errors"`
	DoubleApplies  int           `json:"double_applies"`
	Unapplied      int           `json:"unapplied"`
	Elapsed        time.Duration `json:"elapsed_ns"`
	ClaimP50       time.Duration `json:"claim_p50_ns"`
	ClaimP99       time.Duration `json:"claim_p99_ns"`
	Samples        []string      `json:"error_samples,omitempty"`
}

// group is n worker processes on one ledger.
type group struct {
	n       int
	procs   []*worker
	markers []string
}

type worker struct {
	cmd   *exec.Cmd
	stdin io.WriteCloser
	out   *json.Decoder
}

// startGroup starts n workers on target and waits until every one is
// ready. dir receives their marker files.
func startGroup(ctx context.Context, target, dir, mode string, n int, changesFile string) (*group, error) {
	self, err := os.Executable()
	if err != nil {
		return nil, err
	}
	g := &group{n: n}
	for i := range n {
		marker := filepath.Join(dir, fmt.Sprintf("%s-%d-%d.markers", mode, n, i))
		if err := os.Remove(marker); err != nil && !os.IsNotExist(err) {
			return nil, err // a stale file would count as double applies
		}
		g.markers = append(g.markers, marker)
		cmd := exec.CommandContext(ctx, self, workerCommand, "-ledger", target, "-mode", mode, "-durability", durability.String(),
			"-changes", changesFile, "-marker", marker, "-id", fmt.Sprint(i))
		cmd.Stderr = os.Stderr
		stdin, err := cmd.StdinPipe()
		if err != nil {
			g.close()
			return nil, err
		}
		stdout, err := cmd.StdoutPipe()
		if err != nil {
			g.close()
			return nil, err
		}
		if err := cmd.Start(); err != nil {
			g.close()
			return nil, err
		}
		r := bufio.NewReader(stdout)
		g.procs = append(g.procs, &worker{cmd, stdin, json.NewDecoder(r)})
		if line, err := r.ReadString('\n'); strings.TrimSpace(line) != "ready" {
			g.close()
			return nil, fmt.Errorf("worker %d of %d did not start: %q %v", i, n, line, err)
		}
	}
	return g, nil
}

// round has every worker of g work for d, together, and returns their
// results.
func (g *group) round(d time.Duration) ([]*workerResult, error) {
	for _, w := range g.procs {
		if _, err := io.WriteString(w.stdin, "go "+d.String()+"\n"); err != nil {
			return nil, err
		}
	}
	var out []*workerResult
	for i, w := range g.procs {
		var r workerResult
		if err := w.out.Decode(&r); err != nil {
			return nil, fmt.Errorf("worker %d of %d: %w", i, g.n, err)
		}
		out = append(out, &r)
	}
	return out, nil
}

// close ends the workers of g.
func (g *group) close() error {
	var first error
	for _, w := range g.procs {
		w.stdin.Close()
		if err := w.cmd.Wait(); err != nil && first == nil {
			first = err
		}
	}
	g.procs = nil
	return first
}

// runProcCycles measures full cycles by groups of counts[i] processes, each
// group on the ledger target(counts[i]). The groups take turns in slices
// of about a second, so that a disk whose speed drifts affects them alike.
//
// raw, when not nil, runs the physical baseline on the same database for
// the time it is given; it takes its turn in every slice too, so that the
// baseline it returns was measured beside the processes.
func runProcCycles(ctx context.Context, backend string, target func(int) string, dir string, counts []int, d time.Duration,
	raw func(time.Duration) (rawResult, error), prog *progress) ([]*procResult, rawResult, error) {
	var groups []*group
	defer func() {
		for _, g := range groups {
			g.close()
		}
	}()
	for _, n := range counts {
		prog.note(fmt.Sprintf("starting %d processes", n))
		g, err := startGroup(ctx, target(n), dir, modeCycles, n, "")
		if err != nil {
			return nil, rawResult{}, err
		}
		groups = append(groups, g)
	}
	slices := max(1, int(d/time.Second))
	slice := d / time.Duration(slices)
	results := make([][]*workerResult, len(groups))
	var base rawResult
	for i := range slices {
		if raw != nil {
			prog.note(fmt.Sprintf("slice %d of %d: baseline", i+1, slices))
			r, err := raw(slice / 2)
			if err != nil {
				return nil, rawResult{}, err
			}
			base = base.add(r)
		}
		for j, g := range groups {
			prog.note(fmt.Sprintf("slice %d of %d: %d processes", i+1, slices, g.n))
			rs, err := g.round(slice)
			if err != nil {
				return nil, rawResult{}, err
			}
			results[j] = append(results[j], rs...)
		}
	}
	var out []*procResult
	for j, g := range groups {
		r, err := procSummary(backend, g, results[j], slices)
		if err != nil {
			return nil, rawResult{}, err
		}
		out = append(out, r)
	}
	return out, base, nil
}

// procSummary adds up the results of a group's workers over its slices.
func procSummary(backend string, g *group, results []*workerResult, slices int) (*procResult, error) {
	r := &procResult{Backend: backend, Procs: g.n}
	var lat []int64
	var elapsed time.Duration
	for _, w := range results {
		r.Cycles += w.Cycles
		r.Busy += w.Busy
		r.Other += w.Other + w.Conflicts + w.StatusRefusals // no one races in this mode
		r.Samples = append(r.Samples, w.OtherSamples...)
		elapsed += w.Elapsed
		lat = append(lat, w.ClaimMicros...)
	}
	// The workers of a slice run side by side: the group's time is the
	// mean of its workers' times.
	r.Elapsed = elapsed / time.Duration(g.n)
	r.CyclesPerSec = float64(r.Cycles) / r.Elapsed.Seconds()
	r.ClaimP50, r.ClaimP99 = percentile(lat, 50), percentile(lat, 99)
	counts, err := countMarkers(g.markers)
	if err != nil {
		return nil, err
	}
	for _, c := range counts {
		if c > 1 {
			r.DoubleApplies++
		}
	}
	return r, nil
}

// runRace previews m changes on target, then has n processes race to
// apply every one of them. Each change must be applied exactly once.
func runRace(ctx context.Context, backend, target, dir string, n, m int, prog *progress) (*raceResult, error) {
	// Every preview waits for the race at once: raise the pending quota
	// above them.
	g, err := changeset.New(nil, changeset.Options{LedgerPath: target, WriteMode: changeset.WriteGuarded, MaxPendingPerScope: m + 1, Durability: durability})
	if err != nil {
		return nil, err
	}
	defer g.Close()
	if err := register(g, newStore(nil), false); err != nil {
		return nil, err
	}
	var lines []string
	ids := map[string]string{} // tag → change ID
	for i := range m {
		tag := fmt.Sprintf("race%d-%d", n, i)
		p, err := g.Preview(ctx, opRace, setIn{Key: "race", Value: tag, Tag: tag})
		if err != nil {
			return nil, err
		}
		ids[tag] = p.ChangeID
		lines = append(lines, p.ChangeID+" "+p.ConfirmationToken)
		prog.note(fmt.Sprintf("previewed %d/%d", i+1, m))
	}
	changesFile := filepath.Join(dir, fmt.Sprintf("race-%d.changes", n))
	if err := os.WriteFile(changesFile, []byte(strings.Join(lines, "\n")+"\n"), 0o600); err != nil {
		return nil, err
	}
	prog.note("starting the processes")
	grp, err := startGroup(ctx, target, dir, modeRace, n, changesFile)
	if err != nil {
		return nil, err
	}
	defer grp.close()
	prog.note("racing")
	start := time.Now()
	results, err := grp.round(0)
	if err != nil {
		return nil, err
	}
	markers := grp.markers
	r := &raceResult{Backend: backend, Procs: n, Changes: m, Elapsed: time.Since(start)}
	wins := map[string]int{}
	var lat []int64
	for _, w := range results {
		r.Claims += len(w.ClaimMicros)
		r.Applied += w.Applied
		r.Conflicts += w.Conflicts
		r.StatusRefusals += w.StatusRefusals
		r.Busy += w.Busy
		r.Other += w.Other
		r.Samples = append(r.Samples, w.OtherSamples...)
		lat = append(lat, w.ClaimMicros...)
		for _, id := range w.Won {
			wins[id]++
		}
	}
	r.ClaimP50, r.ClaimP99 = percentile(lat, 50), percentile(lat, 99)
	counts, err := countMarkers(markers)
	if err != nil {
		return nil, err
	}
	for tag, id := range ids {
		if counts[tag] > 1 || wins[id] > 1 {
			r.DoubleApplies++
		}
		c, err := g.Ledger().Change(ctx, id)
		if err != nil {
			return nil, err
		}
		if c.Status != ledger.Applied || counts[tag] == 0 {
			r.Unapplied++
		}
	}
	return r, nil
}

// countMarkers counts the lines of the marker files: applies per tag.
func countMarkers(paths []string) (map[string]int, error) {
	counts := map[string]int{}
	for _, p := range paths {
		data, err := os.ReadFile(p)
		if err != nil && !os.IsNotExist(err) {
			return nil, err
		}
		for _, tag := range strings.Fields(string(data)) {
			counts[tag]++
		}
	}
	return counts, nil
}

// percentile returns the p-th percentile (nearest rank) of micros.
func percentile(micros []int64, p float64) time.Duration {
	if len(micros) == 0 {
		return 0
	}
	s := slices.Clone(micros)
	slices.Sort(s)
	rank := int(math.Ceil(p/100*float64(len(s)))) - 1
	return time.Duration(s[max(rank, 0)]) * time.Microsecond
}
