package main

import (
	"context"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	changeset "github.com/mcp-changeset/changeset-go"
	"github.com/mcp-changeset/changeset-go/ledger"
)

// killMidApply previews a change of the hang operation in the ledger at
// path, has a helper process apply it, and kills the helper with SIGKILL
// once the operation has started: the change is left applying, as a
// crashed server leaves it. It returns the change's ID.
func killMidApply(t *testing.T, path string) string {
	t.Helper()
	ctx := context.Background()
	marker := filepath.Join(t.TempDir(), "started")
	g, err := changeset.New(nil, changeset.Options{LedgerPath: path, WriteMode: changeset.WriteGuarded})
	if err != nil {
		t.Fatal(err)
	}
	registerOps(g, &store{m: map[string]string{}})
	p, err := g.Preview(ctx, "hang", setIn{Key: "k", Value: marker})
	g.Close()
	if err != nil {
		t.Fatal(err)
	}
	addSecret("the confirmation token of the killed apply", p.ConfirmationToken)

	helper := exec.Command(os.Args[0], "-test.run=^$")
	helper.Env = append(os.Environ(), helperEnv+"=hang", helperLedgerEnv+"="+path, helperChangeEnv+"="+p.ChangeID+"="+p.ConfirmationToken)
	helper.Stderr = os.Stderr
	if err := helper.Start(); err != nil {
		t.Fatal(err)
	}
	for deadline := time.Now().Add(30 * time.Second); ; time.Sleep(10 * time.Millisecond) {
		if _, err := os.Stat(marker); err == nil {
			break
		}
		if time.Now().After(deadline) {
			helper.Process.Kill()
			t.Fatal("the helper never started its apply")
		}
	}
	if err := helper.Process.Kill(); err != nil { // SIGKILL: no deferred code runs
		t.Fatal(err)
	}
	helper.Wait()
	return p.ChangeID
}

func TestCheck_StaleAfterFindsAChangeLeftApplyingBySIGKILL(t *testing.T) {
	if testing.Short() {
		t.Skip("starts processes")
	}
	t.Parallel()
	path := filepath.Join(t.TempDir(), "ledger.db")
	id := killMidApply(t, path)
	if st := status(t, path, id); st != ledger.Applying {
		t.Fatalf("the killed apply left its change %s, want applying", st)
	}
	before := readFile(t, path)

	// Seconds old: not stale by the default of 10 minutes.
	r := runL(t, path, "check")
	want(t, r, exitOK)
	if r.stdout != "ok\n" || r.stderr != "" {
		t.Errorf("check with the default threshold reported the fresh row: %s", r)
	}

	r = runL(t, path, "check", "--stale-after", "1ms")
	if r.code != exitError {
		t.Fatalf("check --stale-after 1ms: %s", r)
	}
	lines := strings.Split(strings.TrimSpace(r.stdout), "\n")
	if len(lines) != 1 || !strings.HasPrefix(lines[0], "stale: change "+id+" applying, last updated ") || !strings.HasSuffix(lines[0], " ago, action hang") {
		t.Errorf("check --stale-after 1ms printed:\n%s", r.stdout)
	}
	for _, w := range []string{"1 change or run left in flight for more than 1ms in " + path, "mcp-changeset reconcile ID"} {
		if !strings.Contains(r.stderr, w) {
			t.Errorf("stderr lacks %q:\n%s", w, r.stderr)
		}
	}

	r = runL(t, path, "check", "--stale-after", "1ms", "--json")
	if r.code != exitError {
		t.Fatalf("check --json: %s", r)
	}
	doc := decode(t, r)
	stale, _ := doc["stale"].([]any)
	if doc["ok"] != false || len(doc["problems"].([]any)) != 0 || doc["stale_after"] != "1ms" || len(stale) != 1 {
		t.Fatalf("check --json = %v", doc)
	}
	row := stale[0].(map[string]any)
	age, _ := row["age_seconds"].(float64)
	if row["kind"] != "change" || row["id"] != id || row["status"] != "applying" || row["action"] != "hang" || row["label"] != "" || age <= 0 || age > 600 {
		t.Errorf("stale row = %v", row)
	}
	if _, err := time.Parse(time.RFC3339Nano, row["updated_at"].(string)); err != nil {
		t.Errorf("updated_at: %v", err)
	}
	sameBytes(t, path, before, "check")

	// Once an operator closes it, nothing is left to report.
	want(t, runL(t, path, "reconcile", id, "--note", "the write never reached the store", "--yes"), exitOK)
	want(t, runL(t, path, "check", "--stale-after", "1ms"), exitOK, "ok")
}

func TestCheck_StaleAfterFindsARunLeftUndoing(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	path := filepath.Join(t.TempDir(), "ledger.db")
	g, err := changeset.New(nil, changeset.Options{LedgerPath: path, WriteMode: changeset.WriteGuarded})
	if err != nil {
		t.Fatal(err)
	}
	registerOps(g, &store{m: map[string]string{}})
	l := g.Ledger()
	now := time.Now()
	// toUndoing moves run id from open to undoing, as an undo that died
	// half way leaves it, last updated at the given time.
	toUndoing := func(id string, at time.Time) {
		t.Helper()
		err := l.WithTx(ctx, func(tx *ledger.Tx) error {
			r, err := tx.Run(id)
			if err != nil {
				return err
			}
			r.Status, r.UpdatedAt = ledger.RunUndoing, at
			return tx.UpdateRun(r, ledger.RunOpen)
		})
		if err != nil {
			t.Fatal(err)
		}
	}
	old, err := g.StartRun(ctx, "tidy the settings \x1b[31m")
	if err != nil {
		t.Fatal(err)
	}
	// A change of the old run left undoing half an hour ago.
	p, err := g.Preview(ctx, "set", map[string]any{"key": "theme", "value": "dark", "run_id": old.RunID})
	if err == nil {
		_, err = g.Apply(ctx, p.ChangeID, p.ConfirmationToken)
	}
	if err != nil {
		t.Fatal(err)
	}
	err = l.WithTx(ctx, func(tx *ledger.Tx) error {
		c, err := tx.Change(p.ChangeID)
		if err != nil {
			return err
		}
		c.Status, c.UndoHash, c.UndoneBy, c.UpdatedAt = ledger.Undoing, "", "agent", now.Add(-30*time.Minute)
		return tx.UpdateChange(c, ledger.Applied)
	})
	if err != nil {
		t.Fatal(err)
	}
	toUndoing(old.RunID, now.Add(-time.Hour))
	fresh, err := g.StartRun(ctx, "a run being undone right now")
	if err != nil {
		t.Fatal(err)
	}
	toUndoing(fresh.RunID, now)
	open, err := g.StartRun(ctx, "an open run")
	if err != nil {
		t.Fatal(err)
	}
	// An old open run is not in flight: never reported.
	err = l.WithTx(ctx, func(tx *ledger.Tx) error {
		r, err := tx.Run(open.RunID)
		if err != nil {
			return err
		}
		r.UpdatedAt = now.Add(-48 * time.Hour)
		return tx.UpdateRun(r, ledger.RunOpen)
	})
	if err != nil {
		t.Fatal(err)
	}
	g.Close()

	r := runL(t, path, "check")
	if r.code != exitError {
		t.Fatalf("check: %s", r)
	}
	wantLines := []string{
		"stale: change " + p.ChangeID + " undoing, last updated 30m",
		"stale: run " + old.RunID + ` undoing, last updated 1h0m`,
	}
	lines := strings.Split(strings.TrimSpace(r.stdout), "\n")
	if len(lines) != len(wantLines) {
		t.Fatalf("check printed %d lines, want %d:\n%s", len(lines), len(wantLines), r.stdout)
	}
	for i, w := range wantLines {
		if !strings.HasPrefix(lines[i], w) {
			t.Errorf("line %d = %q, want it to start %q", i+1, lines[i], w)
		}
	}
	if !strings.HasSuffix(lines[0], ", action set") || !strings.HasSuffix(lines[1], `, label "tidy the settings \u001b[31m"`) {
		t.Errorf("lines lack the action or the cleaned label:\n%s", r.stdout)
	}
	if !strings.Contains(r.stderr, "2 changes or runs left in flight for more than 10m0s") {
		t.Errorf("stderr: %s", r.stderr)
	}

	// Past the threshold: an hour-old run is not older than two hours.
	want(t, runL(t, path, "check", "--stale-after", "2h"), exitOK, "ok")
	r = runL(t, path, "check", "--stale-after", "45m", "--json")
	if r.code != exitError {
		t.Fatalf("check --stale-after 45m: %s", r)
	}
	stale := decode(t, r)["stale"].([]any)
	if len(stale) != 1 {
		t.Fatalf("check --stale-after 45m --json: %v", stale)
	}
	row := stale[0].(map[string]any)
	if row["kind"] != "run" || row["id"] != old.RunID || row["status"] != "undoing" || row["action"] != "" || row["label"] != "tidy the settings \x1b[31m" {
		t.Errorf("stale run = %v", row)
	}
	if age := row["age_seconds"].(float64); age < 3600 || age > 3600+600 {
		t.Errorf("age_seconds = %v, want about 3600", age)
	}
	// With a threshold of days (and a zero one: everything in flight).
	want(t, runL(t, path, "check", "--stale-after", "1d"), exitOK, "ok")
	r = runL(t, path, "check", "--stale-after", "0s")
	if r.code != exitError || strings.Count(r.stdout, "stale: ") != 3 || !strings.Contains(r.stdout, fresh.RunID) {
		t.Errorf("check --stale-after 0s: %s", r)
	}
}

func TestCheck_StaleAfterRefusesBadDurations(t *testing.T) {
	t.Parallel()
	f := populate(t)
	for _, arg := range []string{"soon", "-5m", "5x", "d", "1.5d", "7dd", ""} {
		wantErr(t, runL(t, f.path, "check", "--stale-after", arg), "invalid value", "--stale-after", "Usage: mcp-changeset check")
	}
}
