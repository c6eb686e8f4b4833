package main

import (
	"encoding/json"
	"os"
	"path/filepath"
	"reflect"
	"runtime"
	"strings"
	"testing"
	"time"

	"github.com/mcp-changeset/changeset-go/internal/pgtest"
)

// TestMain lets the test binary stand in for the command's workers, which
// the command starts by running its own executable.
func TestMain(m *testing.M) {
	if len(os.Args) > 1 && os.Args[1] == workerCommand {
		os.Exit(workerMain(os.Args[2:]))
	}
	if len(os.Args) > 1 && os.Args[1] == durabilityCommand {
		os.Exit(durabilityMain(os.Args[2:]))
	}
	code := m.Run()
	pgtest.Stop()
	os.Exit(code)
}

func TestRun_ShortMeasurementWritesTableAndJSON(t *testing.T) {
	if testing.Short() {
		t.Skip("starts processes")
	}
	dir := t.TempDir()
	jsonPath := filepath.Join(dir, "bench.json")
	err := run(t.Context(), []string{"--dir", dir, "--duration", "200ms", "--mem-duration", "100ms",
		"--procs", "1,2", "--race-changes", "20", "--json", jsonPath})
	if err != nil {
		t.Fatal(err)
	}
	r := readReport(t, jsonPath)
	disk := r.medium("disk")
	if disk == nil || disk.Raw.Commits == 0 || len(disk.Cycles) != 2 {
		t.Fatalf("disk medium: %+v", disk)
	}
	for _, c := range disk.Cycles {
		want := map[string]float64{"ordinary": 5, "tx": 3}[c.Op]
		if c.Cycles == 0 || c.Steps.Total() != want {
			t.Errorf("%s: %d cycles, %v commits per cycle, want %v", c.Op, c.Cycles, c.Steps.Total(), want)
		}
	}
	// The ledger-alone measurement ran in the same slices, five commits
	// per cycle, and the report says where the cycle's CPU goes.
	if lo := disk.LedgerOnly; lo.Commits == 0 || lo.Commits%5 != 0 || lo.CPU <= 0 {
		t.Errorf("ledger alone: %+v", lo)
	}
	if len(r.Notes) == 0 || !strings.Contains(r.Notes[0], "through package ledger alone") {
		t.Errorf("notes: %q", r.Notes)
	}
	if len(r.Procs) != 2 || len(r.Races) != 1 {
		t.Fatalf("%d process results, %d races", len(r.Procs), len(r.Races))
	}
	for _, p := range r.Procs {
		if p.Cycles == 0 || p.DoubleApplies != 0 || p.Other != 0 {
			t.Errorf("%d processes: %+v", p.Procs, p)
		}
	}
	if rc := r.Races[0]; rc.Claims != 40 || rc.Applied != 20 || rc.DoubleApplies != 0 || rc.Unapplied != 0 {
		t.Errorf("race: %+v", rc)
	}
}

func TestRedactHidesPostgresPassword(t *testing.T) {
	got := redact([]string{"--quick", "--postgres", "postgres://u:secret@h/db", "--postgres=postgres://u:pw@h/db?x=1", "--json", "a.json"})
	want := []string{"--quick", "--postgres", "postgres://u:xxxxx@h/db", "--postgres=postgres://u:xxxxx@h/db?x=1", "--json", "a.json"}
	if !reflect.DeepEqual(got, want) {
		t.Fatalf("redact = %q", got)
	}
}

func TestPercentileIsNearestRank(t *testing.T) {
	v := []int64{5, 1, 4, 2, 3, 10, 9, 8, 7, 6}
	if p := percentile(v, 50); p != 5*time.Microsecond {
		t.Errorf("p50 = %v", p)
	}
	if p := percentile(v, 99); p != 10*time.Microsecond {
		t.Errorf("p99 = %v", p)
	}
	if p := percentile(nil, 50); p != 0 {
		t.Errorf("p50 of nothing = %v", p)
	}
}

func TestRunMCP_OneStdioClientReportsCallsAndRatios(t *testing.T) {
	if testing.Short() {
		t.Skip("builds and starts example servers")
	}
	dir := t.TempDir()
	jsonPath, profile := filepath.Join(dir, "mcp.json"), filepath.Join(dir, "mcp.pprof")
	err := run(t.Context(), []string{"--mcp", "--dir", dir, "--duration", "400ms", "--mcp-clients", "1",
		"--mcp-transports", "stdio", "--mcp-profile", profile, "--json", jsonPath})
	if err != nil {
		t.Fatal(err)
	}
	r := readReport(t, jsonPath)
	if len(r.MCP) != 2 || len(r.Media) != 0 || len(r.Procs) != 0 {
		t.Fatalf("%d MCP results (want settings and tickets), %d media, %d process results", len(r.MCP), len(r.Media), len(r.Procs))
	}
	commits := map[string]int{"settings": 5, "tickets": 3}
	for _, m := range r.MCP {
		if m.Transport != "stdio" || m.Clients != 1 || m.CommitsPerCycle != commits[m.Example] || m.Cycles == 0 {
			t.Errorf("%s: %+v", m.Example, m)
		}
		if m.VsFloor <= 0 || m.VsFloor >= 10 || m.FloorPerSec <= 0 || m.ReadCall <= 0 || m.Commit <= 0 {
			t.Errorf("%s: implausible floor: %.2f of %.0f cycles/s (read %v, commit %v)", m.Example, m.VsFloor, m.FloorPerSec, m.ReadCall, m.Commit)
		}
		for _, k := range callKinds {
			c := m.Calls[k]
			if c.N == 0 || c.P50 <= 0 || c.P99 < c.P50 || c.VsRead <= 0 || c.VsRead >= 100 {
				t.Errorf("%s, %s calls: %+v", m.Example, k, c)
			}
		}
		if m.Calls["preview"].N != m.Cycles || m.Calls["undo"].N != m.Cycles {
			t.Errorf("%s: %d cycles but %d previews and %d undos timed", m.Example, m.Cycles, m.Calls["preview"].N, m.Calls["undo"].N)
		}
		if runtime.GOOS == "linux" && (m.ServerCPUPerCall <= 0 || m.ServerCPUVsRead <= 0 || m.ServerCPUVsRead >= 100) {
			t.Errorf("%s: server CPU %v per call, %.1f times a read's", m.Example, m.ServerCPUPerCall, m.ServerCPUVsRead)
		}
	}
	if len(r.Goals) != 2 {
		t.Errorf("goals: %+v, want one per example (one stdio client)", r.Goals)
	}
	if p := r.MCPProfile; p == nil || p.Cycles == 0 || p.Calls["read"].N != 200 {
		t.Fatalf("profile: %+v", p)
	}
	if fi, err := os.Stat(profile); err != nil || fi.Size() == 0 {
		t.Fatalf("profile file: %v", err)
	}
}

func TestParseFlags_MCPRejectsUnknownNames(t *testing.T) {
	for _, args := range [][]string{
		{"--mcp", "--mcp-transports", "stdio,grpc"},
		{"--mcp", "--mcp-examples", "notes"},
		{"--mcp", "--mcp-clients", "0"},
		{"--mcp", "--mcp-clients", ""},
	} {
		if _, err := parseFlags(args); err == nil {
			t.Errorf("parseFlags(%q) accepted it", args)
		}
	}
	o, err := parseFlags([]string{"--mcp", "--quick", "--mcp-transports", "http"})
	if err != nil || o.duration >= time.Second || o.mcp.Transports[0] != "http" || len(o.mcp.Clients) != 3 {
		t.Fatalf("parseFlags: %+v, %v", o, err)
	}
}

// readReport reads the report run wrote with --json.
func readReport(t *testing.T, path string) *report {
	t.Helper()
	data, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	var r report
	if err := json.Unmarshal(data, &r); err != nil {
		t.Fatal(err)
	}
	return &r
}
