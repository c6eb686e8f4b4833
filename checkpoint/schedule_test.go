package checkpoint_test

import (
	"context"
	"crypto/ed25519"
	"fmt"
	"log/slog"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/mcp-changeset/changeset-go/checkpoint"
	"github.com/mcp-changeset/changeset-go/internal/testkit"
	"github.com/mcp-changeset/changeset-go/ledger"
)

// logs collects a logger's records as JSON lines, safely from several
// goroutines.
type logs struct{ testkit.Buffer }

// signed returns the records of checkpoints signed.
func (l *logs) signed(t *testing.T) []map[string]any {
	var out []map[string]any
	for _, r := range l.Records(t) {
		if r["msg"] == "checkpoint signed" {
			out = append(out, r)
		}
	}
	return out
}

func newSchedule(t *testing.T, key ed25519.PrivateKey, dir string) (*checkpoint.Schedule, *logs) {
	lg := &logs{}
	return &checkpoint.Schedule{Key: key, Dir: dir, Every: 5 * time.Millisecond,
		Logger: slog.New(slog.NewJSONHandler(lg, &slog.HandlerOptions{Level: slog.LevelDebug}))}, lg
}

// files returns the names of the files in dir.
func files(t *testing.T, dir string) []string {
	t.Helper()
	entries, err := os.ReadDir(dir)
	if err != nil {
		t.Fatal(err)
	}
	var names []string
	for _, e := range entries {
		names = append(names, e.Name())
	}
	return names
}

func TestSchedule_Run_WritesAndLogsEachCheckpoint(t *testing.T) {
	l := openLedger(t)
	key := newKey(t)
	dir := t.TempDir()
	s, lg := newSchedule(t, key, dir)
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- s.Run(ctx, l) }()

	// Each new entry is signed at a later tick; wait for its file (a
	// wait, not a measure of time: the deadline only ends a hung test).
	for i := 1; i <= 3; i++ {
		addChange(t, l, fmt.Sprintf("chg_%d", i))
		path := filepath.Join(dir, fmt.Sprintf("checkpoint-%d.json", i))
		for deadline := time.Now().Add(time.Minute); ; time.Sleep(5 * time.Millisecond) {
			if _, err := os.Stat(path); err == nil {
				break
			}
			if time.Now().After(deadline) {
				t.Fatalf("no %s after a minute; logs:\n%s", path, lg.String())
			}
		}
	}
	cancel()
	if err := <-done; err != nil {
		t.Fatalf("Run = %v, want nil when its context ends", err)
	}

	pub := key.Public().(ed25519.PublicKey)
	for i := 1; i <= 3; i++ {
		path := filepath.Join(dir, fmt.Sprintf("checkpoint-%d.json", i))
		info, err := os.Stat(path)
		if err != nil {
			t.Fatal(err)
		}
		if perm := info.Mode().Perm(); perm != 0o644 {
			t.Errorf("%s has mode %04o, want 0644", path, perm)
		}
		st, err := checkpoint.ReadFile(path)
		if err != nil {
			t.Fatal(err)
		}
		if err := checkpoint.Verify(st, pub); err != nil || st.Seq != int64(i) {
			t.Errorf("%s: seq %d, Verify %v", path, st.Seq, err)
		}
		v, err := l.Verify(context.Background(), ledger.VerifyOptions{Checkpoints: []ledger.Link{st.Link()}})
		if err != nil || !v.OK() {
			t.Errorf("the ledger does not verify with %s: %v %v", path, v, err)
		}
	}
	// One record per file, with its seq, hash and file; nothing signed
	// twice; no temporary file left.
	recs := lg.signed(t)
	if len(recs) != 3 {
		t.Fatalf("%d records of checkpoints signed, want 3:\n%s", len(recs), lg.String())
	}
	for i, r := range recs {
		st, _ := checkpoint.ReadFile(filepath.Join(dir, fmt.Sprintf("checkpoint-%d.json", i+1)))
		if r["seq"] != float64(i+1) || r["hash"] != st.Hash.String() || r["file"] != filepath.Join(dir, fmt.Sprintf("checkpoint-%d.json", i+1)) {
			t.Errorf("record %d = %v; want seq %d, its hash and file", i, r, i+1)
		}
	}
	if names := files(t, dir); len(names) != 3 {
		t.Errorf("the directory holds %q, want the three checkpoints only", names)
	}
}

func TestSchedule_Tick_SkipsWhenNothingIsNew(t *testing.T) {
	ctx := context.Background()
	l := openLedger(t)
	dir := t.TempDir()
	s, lg := newSchedule(t, newKey(t), dir)
	if st := s.Tick(ctx, l); st != nil {
		t.Fatalf("Tick of an empty history wrote %+v", st)
	}
	addChange(t, l, "chg_1")
	if st := s.Tick(ctx, l); st == nil || st.Seq != 1 {
		t.Fatalf("Tick = %+v, want entry 1 signed; logs:\n%s", st, lg.String())
	}
	if st := s.Tick(ctx, l); st != nil {
		t.Fatalf("Tick with nothing new wrote %+v", st)
	}
	if names := files(t, dir); len(names) != 1 || names[0] != "checkpoint-1.json" {
		t.Fatalf("the directory holds %q, want checkpoint-1.json", names)
	}
}

func TestSchedule_Tick_RefusesAndLogsATamperedHistoryThenGoesOn(t *testing.T) {
	ctx := context.Background()
	l := openLedger(t)
	dir := t.TempDir()
	s, lg := newSchedule(t, newKey(t), dir)
	addChange(t, l, "chg_1")
	addChange(t, l, "chg_2")
	tamper(t, l, `UPDATE ledger_history SET note = 'nothing happened' WHERE seq = 2`)
	if st := s.Tick(ctx, l); st != nil {
		t.Fatalf("Tick signed a tampered history: %+v", st)
	}
	var refused map[string]any
	for _, r := range lg.Records(t) {
		if r["level"] == "ERROR" {
			refused = r
		}
	}
	if refused == nil || refused["first_bad_seq"] != float64(2) || !strings.Contains(fmt.Sprint(refused["first"]), "entry 2 ") {
		t.Fatalf("no error record naming entry 2; logs:\n%s", lg.String())
	}
	if names := files(t, dir); len(names) != 0 {
		t.Fatalf("the directory holds %q after a refusal", names)
	}
	// Put back, the next tick signs.
	tamper(t, l, `UPDATE ledger_history SET note = '' WHERE seq = 2`)
	if st := s.Tick(ctx, l); st == nil || st.Seq != 2 {
		t.Fatalf("Tick after the repair = %+v; logs:\n%s", st, lg.String())
	}
}

// TestSchedule_Run_HoldsTheHistoryToItsNewestCheckpoint restarts a
// schedule on a history cut back and rewritten after its last checkpoint:
// it finds the checkpoint in its directory and refuses to sign.
func TestSchedule_Run_HoldsTheHistoryToItsNewestCheckpoint(t *testing.T) {
	ctx := context.Background()
	l := openLedger(t)
	key := newKey(t)
	dir := t.TempDir()
	s, _ := newSchedule(t, key, dir)
	addChange(t, l, "chg_1")
	addChange(t, l, "chg_2")
	if st := s.Tick(ctx, l); st == nil || st.Seq != 2 {
		t.Fatalf("Tick = %+v", st)
	}
	// Someone removes chg_2 and its entry, then writes a new entry 2 in
	// its place, hashed as the ledger would.
	tamper(t, l, `DELETE FROM ledger_history WHERE change_id = 'chg_2'`)
	tamper(t, l, `DELETE FROM changes WHERE id = 'chg_2'`)
	addChange(t, l, "chg_3")
	if v, err := l.Verify(ctx, ledger.VerifyOptions{}); err != nil || !v.OK() || v.Head.Seq != 2 {
		t.Fatalf("the rewritten history alone = %+v, %v; want it whole, head 2", v, err)
	}
	// A file of another key, with a higher seq, is passed over.
	other, err := checkpoint.Sign(newKey(t), ledger.Link{Seq: 99, Hash: [32]byte{1}}, time.Now())
	if err != nil {
		t.Fatal(err)
	}
	data, _ := other.Marshal()
	if err := os.WriteFile(filepath.Join(dir, "checkpoint-99.json"), data, 0o644); err != nil {
		t.Fatal(err)
	}

	again, lg := newSchedule(t, key, dir)
	ctx2, cancel := context.WithCancel(ctx)
	done := make(chan error, 1)
	go func() { done <- again.Run(ctx2, l) }()
	for deadline := time.Now().Add(time.Minute); ; time.Sleep(5 * time.Millisecond) {
		if strings.Contains(lg.String(), "does not verify") || time.Now().After(deadline) {
			break
		}
	}
	cancel()
	<-done
	out := lg.String()
	if !strings.Contains(out, "is no longer in the history as it was verified before") {
		t.Fatalf("the restarted schedule did not refuse the rewritten history; logs:\n%s", out)
	}
	if !strings.Contains(out, "checkpoint-99.json") {
		t.Errorf("the file of another key was not logged as passed over; logs:\n%s", out)
	}
	if len(lg.signed(t)) != 0 {
		t.Fatalf("the restarted schedule signed the rewritten history; logs:\n%s", out)
	}
}

func TestSchedule_Check(t *testing.T) {
	dir := t.TempDir()
	file := filepath.Join(dir, "file")
	os.WriteFile(file, nil, 0o644)
	for name, tc := range map[string]struct {
		s    checkpoint.Schedule
		want string
	}{
		"no key":         {checkpoint.Schedule{Dir: dir}, "not an Ed25519 private key"},
		"no directory":   {checkpoint.Schedule{Key: newKey(t)}, "needs a directory"},
		"a missing one":  {checkpoint.Schedule{Key: newKey(t), Dir: filepath.Join(dir, "nope")}, "no such file"},
		"a file":         {checkpoint.Schedule{Key: newKey(t), Dir: file}, "not a directory"},
		"negative every": {checkpoint.Schedule{Key: newKey(t), Dir: dir, Every: -time.Second}, "negative"},
	} {
		if err := tc.s.Check(); err == nil || !strings.Contains(err.Error(), tc.want) {
			t.Errorf("Check of a schedule with %s = %v, want %q", name, err, tc.want)
		}
		if err := tc.s.Run(context.Background(), openLedger(t)); err == nil {
			t.Errorf("Run of a schedule with %s started", name)
		}
	}
	ok := checkpoint.Schedule{Key: newKey(t), Dir: dir}
	if err := ok.Check(); err != nil {
		t.Fatal(err)
	}
}
