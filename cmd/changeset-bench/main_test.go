package main

import (
	"encoding/json"
	"image/png"
	"os"
	"path/filepath"
	"reflect"
	"testing"
	"time"
)

// TestMain lets the test binary stand in for the command's workers, which
// the command starts by running its own executable.
func TestMain(m *testing.M) {
	if len(os.Args) > 1 && os.Args[1] == workerCommand {
		os.Exit(workerMain(os.Args[2:]))
	}
	os.Exit(m.Run())
}

func TestRun_ShortMeasurementWritesTableJSONAndPlot(t *testing.T) {
	if testing.Short() {
		t.Skip("starts processes")
	}
	dir := t.TempDir()
	jsonPath, plotPath := filepath.Join(dir, "bench.json"), filepath.Join(dir, "bench.png")
	err := run(t.Context(), []string{"--dir", dir, "--duration", "200ms", "--mem-duration", "100ms",
		"--procs", "1,2", "--race-changes", "20", "--json", jsonPath, "--plot", plotPath})
	if err != nil {
		t.Fatal(err)
	}
	var r report
	data, err := os.ReadFile(jsonPath)
	if err != nil {
		t.Fatal(err)
	}
	if err := json.Unmarshal(data, &r); err != nil {
		t.Fatal(err)
	}
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
	f, err := os.Open(plotPath)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	img, err := png.Decode(f)
	if err != nil || img.Bounds().Dx() < 800 {
		t.Fatalf("plot: %v %v", img, err)
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

func TestNiceStep(t *testing.T) {
	for in, want := range map[float64]float64{0.7: 1, 1.5: 2, 3: 5, 7: 10, 120: 200, 480: 500} {
		if got := niceStep(in); got != want {
			t.Errorf("niceStep(%v) = %v, want %v", in, got, want)
		}
	}
}
