package main

import (
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
)

// The fsync count reads strace's summary table, with or without the
// errors column, and adds fsync to fdatasync.
func TestSyncCalls_ReadsStraceSummaries(t *testing.T) {
	for _, tc := range []struct {
		summary string
		want    int
	}{
		{`% time     seconds  usecs/call     calls    errors syscall
------ ----------- ----------- --------- --------- ----------------
100.00    0.412345         399      1033           fdatasync
  0.00    0.000012          12         1           fsync
------ ----------- ----------- --------- --------- ----------------
100.00    0.412357         398      1034           total
`, 1034},
		{`% time     seconds  usecs/call     calls    errors syscall
------ ----------- ----------- --------- --------- ----------------
100.00    0.000100          50         2         1 fsync
------ ----------- ----------- --------- --------- ----------------
100.00    0.000100          50         2         1 total
`, 2},
		{"% time     seconds  usecs/call     calls    errors syscall\n------ ----------- ----------- --------- --------- ----------------\n100.00    0.000000           0         0           total\n", 0},
	} {
		got, err := syncCalls(strings.NewReader(tc.summary))
		if err != nil || got != tc.want {
			t.Errorf("syncCalls = %d, %v; want %d for\n%s", got, err, tc.want, tc.summary)
		}
	}
	if _, err := syncCalls(strings.NewReader("100.00 0.1 1 many fdatasync\n")); err == nil {
		t.Error("a summary line without a count was accepted")
	}
}

// The comparison runs both durabilities on one client, and, where strace
// is installed, counts what each cycle syncs: five commits each synced
// under full, the two claims under claims (plus a share of the
// checkpoints).
func TestRun_DurabilityComparesFullAndClaims(t *testing.T) {
	if testing.Short() {
		t.Skip("starts processes")
	}
	fsyncCycles = 60
	dir := t.TempDir()
	jsonPath := filepath.Join(dir, "bench.json")
	err := run(t.Context(), []string{"--dir", dir, "--skip-cycles", "--skip-procs", "--durability-clients", "1",
		"--duration", "300ms", "--json", jsonPath})
	if err != nil {
		t.Fatal(err)
	}
	r := readReport(t, jsonPath)
	if len(r.Durability) != 2 {
		t.Fatalf("%d durability results, want 2", len(r.Durability))
	}
	_, noStrace := exec.LookPath("strace")
	want := map[string][2]float64{"full": {4.9, 5.5}, "claims": {1.9, 2.5}} // fsyncs per cycle
	for _, d := range r.Durability {
		if d.Cycles == 0 || d.Errors != 0 || d.Clients != 1 {
			t.Errorf("%s: %+v", d.Durability, d)
		}
		lo, hi := want[d.Durability][0], want[d.Durability][1]
		switch {
		case noStrace != nil && d.FsyncsPerCycle != -1:
			t.Errorf("%s: %.2f fsyncs per cycle without strace, want -1 (unknown)", d.Durability, d.FsyncsPerCycle)
		case noStrace == nil && (d.FsyncsPerCycle < lo || d.FsyncsPerCycle > hi):
			t.Errorf("%s: %.2f fsyncs per cycle, want %.1f to %.1f", d.Durability, d.FsyncsPerCycle, lo, hi)
		}
	}
}
