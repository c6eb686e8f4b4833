package serve

import (
	"context"
	"crypto/ed25519"
	"encoding/json"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/mcp-changeset/changeset-go/checkpoint"
	"github.com/mcp-changeset/changeset-go/ledger"
	"github.com/modelcontextprotocol/go-sdk/mcp"
)

// The checkpoint flags are checked together.
func TestFlags_Checkpoint(t *testing.T) {
	for _, c := range []struct {
		f    Flags
		want string // "" for valid
	}{
		{Flags{CheckpointKey: "k", CheckpointDir: "d", CheckpointEvery: time.Hour}, ""},
		{Flags{CheckpointKey: "k", CheckpointDir: "d", CheckpointEvery: time.Minute}, ""},
		{Flags{CheckpointEvery: checkpoint.DefaultEvery}, ""},
		{Flags{CheckpointKey: "k", CheckpointEvery: time.Hour}, "go together"},
		{Flags{CheckpointDir: "d", CheckpointEvery: time.Hour}, "go together"},
		{Flags{CheckpointKey: "k", CheckpointDir: "d", CheckpointEvery: 0}, "want a positive duration"},
		{Flags{CheckpointKey: "k", CheckpointDir: "d", CheckpointEvery: -time.Hour}, "want a positive duration"},
		{Flags{CheckpointEvery: time.Minute}, "only makes sense with --checkpoint-key"},
	} {
		c.f.Ledger = "x.db"
		err := c.f.Check()
		switch {
		case c.want == "" && err != nil:
			t.Errorf("%+v: %v", c.f, err)
		case c.want != "" && (err == nil || !strings.Contains(err.Error(), c.want)):
			t.Errorf("%+v: %v, want an error containing %q", c.f, err, c.want)
		}
	}
}

// --checkpoint-key and --checkpoint-dir make the key and the directory,
// and the server signs the history's head into it at start, logging the
// key it made and the checkpoint.
func TestMain_CheckpointFlags(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	dir := t.TempDir()
	path := filepath.Join(dir, "ledger.db")
	l, err := ledger.Open(ctx, path, ledger.OpenOptions{Create: true})
	if err != nil {
		t.Fatal(err)
	}
	now := time.Now()
	c := &ledger.Change{ID: "chg_1", Action: "a", Status: ledger.Pending, ScopeHash: "s", Payload: json.RawMessage(`{}`),
		ConfirmHash: "c", CreatedAt: now, UpdatedAt: now, ExpiresAt: now.Add(time.Minute)}
	if err := l.WithTx(ctx, func(tx *ledger.Tx) error { return tx.InsertChange(c) }); err != nil {
		t.Fatal(err)
	}
	l.Close()

	keyFile, cpDir := filepath.Join(dir, "checkpoint.key"), filepath.Join(dir, "checkpoints", "notes")
	cmd, _, stderr := mainCmd(t, "--ledger", path, "--checkpoint-key", keyFile, "--checkpoint-dir", cpDir, "--checkpoint-every", "1h")
	cmd.Stdout = nil
	cs, err := mcp.NewClient(&mcp.Implementation{Name: "checkpoint-test", Version: "1"}, nil).Connect(ctx, &mcp.CommandTransport{Command: cmd}, nil)
	if err != nil {
		t.Fatalf("connect: %v; stderr:\n%s", err, stderr)
	}
	defer cs.Close()
	file := filepath.Join(cpDir, "checkpoint-1.json")
	for {
		if _, err := os.Stat(file); err == nil {
			break
		}
		if ctx.Err() != nil {
			t.Fatalf("no %s; stderr:\n%s", file, stderr)
		}
		time.Sleep(10 * time.Millisecond)
	}
	key, err := checkpoint.LoadKey(keyFile)
	if err != nil {
		t.Fatal(err)
	}
	pub := key.Public().(ed25519.PublicKey)
	st, err := checkpoint.ReadFile(file)
	if err != nil {
		t.Fatal(err)
	}
	if err := checkpoint.Verify(st, pub); err != nil || st.Seq != 1 {
		t.Fatalf("%s: seq %d, %v", file, st.Seq, err)
	}
	cs.Close()
	cmd.Wait()
	logs := stderr.String()
	for _, want := range []string{"checkpoint key created", checkpoint.FormatPublicKey(pub), "checkpoint signed", "file=" + file} {
		if !strings.Contains(logs, want) {
			t.Errorf("the server's log lacks %q:\n%s", want, logs)
		}
	}
}
