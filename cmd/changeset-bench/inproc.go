package main

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"time"

	changeset "github.com/mcp-changeset/changeset-go"
	"github.com/mcp-changeset/changeset-go/internal/commitcount"
)

// cycleResult is a run of full cycles (preview, apply, undo through the Go
// API) of one operation, from one goroutine.
type cycleResult struct {
	Medium  string        `json:"medium"` // "disk" or "tmpfs"
	Op      string        `json:"op"`     // "ordinary" or "tx"
	Cycles  int           `json:"cycles"`
	Elapsed time.Duration `json:"elapsed_ns"`
	CPU     time.Duration `json:"cpu_ns"`
	// Steps is the commits of each step, counted on a ledger of its own
	// (see package commitcount).
	Steps stepCommits `json:"commits"`
	// RawPerSec is the baseline's commit rate on the same file in the
	// same run; Ratio is the ledger's commit rate over it.
	RawPerSec float64 `json:"raw_commits_per_s"`
	Ratio     float64 `json:"ratio_per_commit"`
}

// stepCommits is what each step of a cycle commits.
type stepCommits struct {
	Preview float64 `json:"preview"`
	Apply   float64 `json:"apply"`
	Undo    float64 `json:"undo"`
}

// Total is the commits of a whole cycle.
func (s stepCommits) Total() float64 { return s.Preview + s.Apply + s.Undo }

// PerSecond is the cycle rate.
func (r cycleResult) PerSecond() float64 { return float64(r.Cycles) / r.Elapsed.Seconds() }

// WallPerCycle is the elapsed time of one cycle.
func (r cycleResult) WallPerCycle() time.Duration { return r.Elapsed / time.Duration(max(r.Cycles, 1)) }

// CPUPerCycle is the process's CPU time (user+sys) per cycle.
func (r cycleResult) CPUPerCycle() time.Duration { return r.CPU / time.Duration(max(r.Cycles, 1)) }

// mediumResult is everything measured on one medium.
type mediumResult struct {
	Medium string        `json:"medium"`
	Dir    string        `json:"dir"`
	FSType string        `json:"fs_type"`
	Raw    rawResult     `json:"raw"`
	Cycles []cycleResult `json:"cycles"`
	// LedgerOnly is an ordinary cycle's five transactions through package
	// ledger alone (see ledgerOnly), measured in the same slices.
	LedgerOnly rawResult `json:"ledger_only"`
}

// openGuard opens a Guard with the benchmark's operations on a new ledger
// at path.
func openGuard(path string) (*changeset.Guard, *store, error) {
	g, err := changeset.New(nil, changeset.Options{LedgerPath: path, WriteMode: changeset.WriteGuarded, Durability: durability})
	if err != nil {
		return nil, nil, err
	}
	s := newStore(nil)
	if err := register(g, s, true); err != nil {
		g.Close()
		return nil, nil, err
	}
	return g, s, nil
}

// runMedium measures, on one directory, the baseline and full cycles of the
// ordinary and the transactional operation, each for d in all.
func runMedium(ctx context.Context, medium, dir string, d time.Duration, prog *progress) (*mediumResult, error) {
	work, err := os.MkdirTemp(dir, "changeset-bench-")
	if err != nil {
		return nil, err
	}
	defer os.RemoveAll(work)
	res := &mediumResult{Medium: medium, Dir: dir, FSType: fsType(dir)}

	steps := map[string]stepCommits{}
	for _, op := range []string{opOrdinary, opTx} {
		prog.begin(fmt.Sprintf("%s: counting the commits of %s", medium, op), 0)
		if steps[op], err = countCommits(ctx, filepath.Join(work, "count-"+op+".db"), op); err != nil {
			return nil, err
		}
	}

	path := filepath.Join(work, "ledger.db")
	g, s, err := openGuard(path)
	if err != nil {
		return nil, err
	}
	defer g.Close()
	raw, err := openRawSQLite(ctx, path)
	if err != nil {
		return nil, err
	}
	defer raw.Close()

	// Interleave the baseline and the cycles in slices of about half a
	// second, so that a disk (or a neighbour) whose speed drifts weighs on
	// both alike.
	slices := max(1, int(d/(time.Second/2)))
	slice := d / time.Duration(slices)
	cycles := map[string]*cycleResult{}
	for _, op := range []string{opOrdinary, opTx} {
		if err := warmUp(ctx, g, s, op); err != nil {
			return nil, err
		}
		cycles[op] = &cycleResult{Medium: medium, Op: opName(op), Steps: steps[op]}
	}
	prog.begin(medium+": baseline and cycles", 3*d)
	for i := range slices {
		prog.note(fmt.Sprintf("slice %d of %d", i+1, slices))
		r, err := rawCommits(ctx, raw, slice/2, false)
		if err != nil {
			return nil, err
		}
		res.Raw = res.Raw.add(r)
		lo, err := ledgerOnly(ctx, g.Ledger(), s, slice/2)
		if err != nil {
			return nil, err
		}
		res.LedgerOnly = res.LedgerOnly.add(lo)
		for _, op := range []string{opOrdinary, opTx} {
			c, err := runCycles(ctx, g, s, op, slice)
			if err != nil {
				return nil, err
			}
			cycles[op].add(c)
		}
	}
	res.Cycles = []cycleResult{*cycles[opOrdinary], *cycles[opTx]}
	for i := range res.Cycles {
		c := &res.Cycles[i]
		c.RawPerSec = res.Raw.PerSecond()
		c.Ratio = c.PerSecond() * c.Steps.Total() / c.RawPerSec
	}
	return res, nil
}

// opName is the name of op in reports.
func opName(op string) string { return map[string]string{opOrdinary: "ordinary", opTx: "tx"}[op] }

// warmUp runs a few cycles of op, so that the connection pool and the
// caches are warm before anything is timed.
func warmUp(ctx context.Context, g *changeset.Guard, s *store, op string) error {
	for i := range 10 {
		if _, err := cycle(ctx, g, s, op, "warm", fmt.Sprint("warm", op, i)); err != nil {
			return err
		}
	}
	return nil
}

// runCycles runs full cycles of op for d.
func runCycles(ctx context.Context, g *changeset.Guard, s *store, op string, d time.Duration) (cycleResult, error) {
	var r cycleResult
	cpu0, start := cpuTime(), time.Now()
	for time.Since(start) < d {
		s.seq++
		tag := fmt.Sprint(op, s.seq)
		if _, err := cycle(ctx, g, s, op, "k", tag); err != nil {
			return r, err
		}
		r.Cycles++
	}
	r.Elapsed, r.CPU = time.Since(start), cpuTime()-cpu0
	return r, nil
}

// add sums the counts and times of o into r.
func (r *cycleResult) add(o cycleResult) {
	r.Cycles += o.Cycles
	r.Elapsed += o.Elapsed
	r.CPU += o.CPU
}

// countCommits counts what each step of a cycle of op commits, over a few
// cycles on a fresh ledger at path opened with commit counting on.
func countCommits(ctx context.Context, path, op string) (stepCommits, error) {
	commitcount.Enable()
	defer commitcount.Disable()
	g, _, err := openGuard(path)
	if err != nil {
		return stepCommits{}, err
	}
	defer g.Close()
	const cycles = 20
	var sc stepCommits
	for i := range cycles {
		tag := fmt.Sprint("count", i)
		c0 := commitcount.Commits()
		p, err := g.Preview(ctx, op, setIn{Key: "k", Value: tag, Tag: tag})
		if err != nil {
			return sc, err
		}
		c1 := commitcount.Commits()
		a, err := g.Apply(ctx, p.ChangeID, p.ConfirmationToken)
		if err != nil {
			return sc, err
		}
		c2 := commitcount.Commits()
		if _, err := g.Undo(ctx, p.ChangeID, a.UndoToken); err != nil {
			return sc, err
		}
		c3 := commitcount.Commits()
		sc.Preview += float64(c1 - c0)
		sc.Apply += float64(c2 - c1)
		sc.Undo += float64(c3 - c2)
	}
	sc.Preview, sc.Apply, sc.Undo = sc.Preview/cycles, sc.Apply/cycles, sc.Undo/cycles
	return sc, nil
}
