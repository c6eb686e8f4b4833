package main

import (
	"encoding/json"
	"fmt"
	"io"
	"os"
	"strings"
	"time"

	"github.com/mcp-changeset/changeset-go/ledger"
)

// print writes the report as markdown: a table per backend, ready to
// paste into docs/benchmarks.md.
func (r *scaleReport) print(out io.Writer) {
	m := r.Machine
	fmt.Fprintf(out, "`%s` on %s, %d cores, %s (%s); load %s before, %s after.\n",
		r.Command, m.CPU, m.Cores, m.FSType, m.GoVersion, m.LoadBefore, m.LoadAfter)
	for _, be := range r.Backends {
		be.print(out, r.Base, r.N, r.MaxRuns)
	}
}

var backendTitles = map[string]string{"sqlite": "SQLite", "postgres": "PostgreSQL"}

func (be *scaleBackend) print(out io.Writer, base, n, maxRuns int) {
	title := backendTitles[be.Name]
	fmt.Fprintf(out, "\n### %s: %s and %s changes\n\n", title, thousands(base), thousands(n))
	b0, b1 := be.Ledgers[0].Build, be.Ledgers[1].Build
	fmt.Fprintf(out, "Built through package ledger's API (runs, changes, every transition with its history entry, in time order, "+
		"%s statements to a transaction): %s changes in %s (%s changes/s), %s in %s (%s changes/s). "+
		"The larger ledger holds %s.\n\n",
		thousands(scaleBatch), thousands(base), fmtDuration(b0.Elapsed), thousands(int(b0.PerSecond)),
		thousands(n), fmtDuration(b1.Elapsed), thousands(int(b1.PerSecond)), statusLine(b1.ByStatus))
	fmt.Fprintf(out, "| %s | %s changes | %s changes | ratio |\n|---|---:|---:|---:|\n", title, thousands(base), thousands(n))
	cell := func(l *scaleLedger) string {
		return fmt.Sprintf("%s · %s · %s", thousands(l.Build.Changes), thousands(l.Build.Runs), thousands(l.Build.History))
	}
	fmt.Fprintf(out, "| changes · runs · history entries | %s | %s | |\n", cell(be.Ledgers[0]), cell(be.Ledgers[1]))
	fmt.Fprintf(out, "| size on disk | %s | %s | %s |\n", fmtBytes(be.Ledgers[0].Size), fmtBytes(be.Ledgers[1].Size),
		fmtRatio(float64(be.Ledgers[1].Size)/float64(max(be.Ledgers[0].Size, 1))))
	for _, row := range be.Rows {
		fmt.Fprintf(out, "| %s | %s | %s | %s |\n", row.What, fmtDuration(row.Times[0].Median), fmtDuration(row.Times[1].Median), fmtRatio(row.Ratio))
	}
	if p0, p1 := be.Prune[0], be.Prune[1]; p0 != nil && p1 != nil {
		deleted := func(p *pruneResult, l *scaleLedger) string {
			s := fmt.Sprintf("%s (%.0f%%)", thousands(p.Deleted), 100*float64(p.Deleted)/float64(l.Build.Changes))
			if p.WouldDelete != p.Deleted {
				s += fmt.Sprintf(", the dry run said %s", thousands(p.WouldDelete))
			}
			return s
		}
		fmt.Fprintf(out, "| prune: changes deleted | %s | %s | |\n", deleted(p0, be.Ledgers[0]), deleted(p1, be.Ledgers[1]))
		sizes := func(p *pruneResult) string {
			return fmtBytes(p.SizeBefore) + " → " + fmtBytes(p.SizeAfter)
		}
		fmt.Fprintf(out, "| prune: size on disk before → after | %s | %s | |\n", sizes(p0), sizes(p1))
		if be.Name == "sqlite" {
			returned := func(p *pruneResult) string {
				if p.Returned < 0 {
					return "nothing freed"
				}
				return fmt.Sprintf("%.0f%% (%s left free in the file)", 100*p.Returned, fmtBytes(p.FreeAfter))
			}
			fmt.Fprintf(out, "| prune: share of the freed space given back to the disk | %s | %s | |\n", returned(p0), returned(p1))
		}
	}
	fmt.Fprintf(out, "\nTimes are medians of up to %d runs (one run for what takes 3 s or more, and for prune --yes); "+
		"commands are the mcp-changeset binary, start to exit; pages are the dashboard's handler in this process.\n", maxRuns)
}

// statusLine lists the counts of each status, in the order of the mix.
func statusLine(by map[ledger.Status]int) string {
	var parts []string
	for _, m := range scaleMix {
		parts = append(parts, fmt.Sprintf("%s %s", thousands(by[m.Status]), m.Status))
	}
	return strings.Join(parts, ", ")
}

// writeJSON writes the report to path.
func (r *scaleReport) writeJSON(path string) error {
	data, err := json.MarshalIndent(r, "", "  ")
	if err != nil {
		return err
	}
	return os.WriteFile(path, append(data, '\n'), 0o644)
}

// fmtDuration writes d with three significant digits or so: 0.42 ms,
// 12.3 ms, 123 ms, 2.34 s, 75.1 s.
func fmtDuration(d time.Duration) string {
	ms := float64(d) / float64(time.Millisecond)
	switch {
	case ms < 10:
		return fmt.Sprintf("%.2f ms", ms)
	case ms < 100:
		return fmt.Sprintf("%.1f ms", ms)
	case ms < 1000:
		return fmt.Sprintf("%.0f ms", ms)
	case ms < 100_000:
		return fmt.Sprintf("%.3g s", ms/1000)
	default:
		return fmt.Sprintf("%.0f s", ms/1000)
	}
}

// fmtBytes writes n in decimal units: 35.6 MB, 3.31 GB.
func fmtBytes(n int64) string {
	switch f := float64(n); {
	case f >= 1e9:
		return fmt.Sprintf("%.2f GB", f/1e9)
	case f >= 1e6:
		return fmt.Sprintf("%.1f MB", f/1e6)
	default:
		return fmt.Sprintf("%.0f kB", f/1e3)
	}
}

// fmtRatio writes a ratio: 1.0×, 12×, 140×.
func fmtRatio(r float64) string {
	if r < 10 {
		return fmt.Sprintf("%.1f×", r)
	}
	return fmt.Sprintf("%.0f×", r)
}
