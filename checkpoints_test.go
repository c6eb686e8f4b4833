package changeset_test

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

	changeset "github.com/mcp-changeset/changeset-go"
	"github.com/mcp-changeset/changeset-go/checkpoint"
	"github.com/mcp-changeset/changeset-go/internal/testkit"
	"github.com/mcp-changeset/changeset-go/ledger"
)

// TestNew_CheckpointsSignedUntilClose: with Options.Checkpoints, the
// Guard signs the history's head into the directory, logs it with the
// Guard's logger, until Close.
func TestNew_CheckpointsSignedUntilClose(t *testing.T) {
	ctx := context.Background()
	dir := t.TempDir()
	_, key, _ := ed25519.GenerateKey(nil)
	logs := &testkit.Buffer{}
	sched := &checkpoint.Schedule{Key: key, Dir: dir, Every: 5 * time.Millisecond}
	g, err := changeset.New(nil, changeset.Options{LedgerPath: filepath.Join(t.TempDir(), "ledger.db"),
		Logger: slog.New(slog.NewTextHandler(logs, nil)), Checkpoints: sched})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := g.StartRun(ctx, "a run to sign"); err != nil {
		t.Fatal(err)
	}
	v, err := g.Ledger().Verify(ctx, ledger.VerifyOptions{})
	if err != nil || v.Head.Seq == 0 {
		t.Fatalf("the ledger's head = %+v, %v; want an entry", v, err)
	}
	path := filepath.Join(dir, fmt.Sprintf("checkpoint-%d.json", v.Head.Seq))
	for deadline := time.Now().Add(time.Minute); ; time.Sleep(5 * time.Millisecond) {
		if _, err := os.Stat(path); err == nil {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("no %s after a minute; logs:\n%s", path, logs)
		}
	}
	if err := g.Close(); err != nil {
		t.Fatal(err)
	}
	st, err := checkpoint.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	if err := checkpoint.Verify(st, key.Public().(ed25519.PublicKey)); err != nil || st.Link() != v.Head {
		t.Fatalf("%s = %+v, Verify %v; want the head %+v", path, st.Link(), err, v.Head)
	}
	if !strings.Contains(logs.String(), "checkpoint signed") || !strings.Contains(logs.String(), "file="+path) {
		t.Errorf("the Guard's logger has no record of the checkpoint:\n%s", logs)
	}
}

func TestNew_RefusesAnInvalidCheckpointSchedule(t *testing.T) {
	_, key, _ := ed25519.GenerateKey(nil)
	for name, s := range map[string]*checkpoint.Schedule{
		"no key":            {Dir: t.TempDir()},
		"a missing dir":     {Key: key, Dir: filepath.Join(t.TempDir(), "nope")},
		"a negative period": {Key: key, Dir: t.TempDir(), Every: -time.Minute},
	} {
		g, err := changeset.New(nil, changeset.Options{LedgerPath: filepath.Join(t.TempDir(), "ledger.db"), Checkpoints: s})
		if err == nil {
			g.Close()
			t.Errorf("New with a schedule with %s succeeded", name)
		}
	}
}
