package changeset_test

import (
	"bufio"
	"context"
	"errors"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	changeset "github.com/mcp-changeset/changeset-go"
	"github.com/mcp-changeset/changeset-go/internal/faulttest"
	"github.com/mcp-changeset/changeset-go/ledger"
)

// Faults of the ledger's environment, for the harness of fault_test.go.

// mustLedgerError asserts that err is a *LedgerError with the cause want,
// and that what the agent would read of it says so without details.
func mustLedgerError(t *testing.T, what string, err, want error) {
	t.Helper()
	var le *changeset.LedgerError
	if !errors.As(err, &le) || !errors.Is(err, want) {
		t.Fatalf("%s: got %v, want a LedgerError wrapping %q", what, err, want)
	}
}

func TestFault_LedgerLockedPastBusyTimeoutRefusesAndSpendsNothing(t *testing.T) {
	if testing.Short() {
		t.Skip("starts a process")
	}
	f := newFixture(t, func(o *changeset.Options) { o.BusyTimeout = 200 * time.Millisecond })
	pendingID, pendingTok := f.preview("set", "theme", "dark")
	appliedID, appliedTok := f.preview("set", "language", "fr")
	undoTok := f.apply(appliedID, appliedTok)

	holder := helperCmd(t, "faultlock", f.path, "")
	stdin, _ := holder.StdinPipe()
	out, _ := holder.StdoutPipe()
	if err := holder.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { holder.Process.Kill(); holder.Wait() })
	if line, _ := bufio.NewReader(out).ReadString('\n'); strings.TrimSpace(line) != "locked" {
		t.Fatalf("lock holder said %q", line)
	}

	ctx := context.Background()
	_, err := f.guard.Preview(ctx, "set", setIn{Key: "theme", Value: "blue"})
	mustLedgerError(t, "preview", err, ledger.ErrBusy)
	_, err = f.guard.Apply(ctx, pendingID, pendingTok)
	mustLedgerError(t, "apply", err, ledger.ErrBusy)
	_, err = f.guard.Undo(ctx, appliedID, undoTok)
	mustLedgerError(t, "undo", err, ledger.ErrBusy)
	// The agent reads a tool error naming the cause, not a protocol error.
	msg := mustFail(t, f.session, "apply_change", map[string]any{"change_id": pendingID, "confirmation_token": pendingTok}, "ledger is busy")
	if strings.Contains(msg, f.path) {
		t.Errorf("the agent was told the ledger's path: %q", msg)
	}
	// Readers are not blocked by a writer (WAL).
	if st := mustCall(t, f.session, "get_change_status", map[string]any{"change_id": pendingID}); st["status"] != "pending" {
		t.Fatalf("status while locked: %v", st)
	}

	stdin.Close() // the holder rolls back and exits
	if err := holder.Wait(); err != nil {
		t.Fatal(err)
	}
	// Nothing was spent: the same tokens work now.
	f.apply(pendingID, pendingTok)
	mustCall(t, f.session, "undo_change", map[string]any{"change_id": appliedID, "undo_token": undoTok})
	if n := f.store.applies.Load(); n != 2 {
		t.Fatalf("%d applies, want 2", n)
	}
	checkLedger(t, f.guard.Ledger())
}

func TestFault_ReadOnlyLedgerRefusesWritesAndSpendsNothing(t *testing.T) {
	f := newFixture(t)
	pendingID, pendingTok := f.preview("set", "theme", "dark")
	appliedID, appliedTok := f.preview("set", "language", "fr")
	undoTok := f.apply(appliedID, appliedTok)
	ctx := context.Background()

	t.Run("opened read-only", func(t *testing.T) {
		ro, err := ledger.Open(ctx, f.path, ledger.OpenOptions{ReadOnly: true})
		if err != nil {
			t.Fatal(err)
		}
		defer ro.Close()
		g, err := changeset.New(nil, changeset.Options{Ledger: ro, WriteMode: changeset.WriteGuarded})
		if err != nil {
			t.Fatal(err)
		}
		registerTestOps(g, f.store)
		_, err = g.Preview(ctx, "set", setIn{Key: "theme", Value: "blue"})
		mustLedgerError(t, "preview", err, ledger.ErrReadOnly)
		_, err = g.Apply(ctx, pendingID, pendingTok)
		mustLedgerError(t, "apply", err, ledger.ErrReadOnly)
		_, err = g.Undo(ctx, appliedID, undoTok)
		mustLedgerError(t, "undo", err, ledger.ErrReadOnly)
		if st, err := g.Status(ctx, pendingID); err != nil || st.Status != "pending" {
			t.Fatalf("status: %v %v", st, err)
		}
		checkLedger(t, ro)
	})

	t.Run("file not writable", func(t *testing.T) {
		if os.Geteuid() == 0 {
			t.Skip("running as root, which writes through any file mode: the read-only open above stands in for this case")
		}
		dir := filepath.Dir(f.path)
		for _, p := range []string{f.path, f.path + "-wal", f.path + "-shm", dir} {
			mode := os.FileMode(0o400)
			if p == dir {
				mode = 0o500
			}
			os.Chmod(p, mode)
			t.Cleanup(func() { os.Chmod(p, 0o700) })
		}
		g, err := changeset.New(nil, changeset.Options{LedgerPath: f.path, WriteMode: changeset.WriteGuarded})
		var le *changeset.LedgerError
		if err != nil { // refusing to open is a clear refusal too
			if !errors.As(err, &le) {
				t.Fatalf("open of a read-only file: %v, want a LedgerError", err)
			}
			return
		}
		defer g.Close()
		registerTestOps(g, f.store)
		_, err = g.Apply(ctx, pendingID, pendingTok)
		if !errors.As(err, &le) {
			t.Fatalf("apply on a read-only file: %v, want a LedgerError", err)
		}
	})

	// After both, the tokens still work on the writable ledger.
	f.apply(pendingID, pendingTok)
	mustCall(t, f.session, "undo_change", map[string]any{"change_id": appliedID, "undo_token": undoTok})
	checkLedger(t, f.guard.Ledger())
}

func TestFault_CorruptPageIsRefusedAndReportedByCheck(t *testing.T) {
	ctx := context.Background()
	dir := t.TempDir()
	path := filepath.Join(dir, "ledger.db")
	g, err := changeset.New(nil, changeset.Options{LedgerPath: path, WriteMode: changeset.WriteGuarded})
	if err != nil {
		t.Fatal(err)
	}
	store := &kv{m: map[string]string{}}
	registerTestOps(g, store)
	var ids, tokens []string
	for i := range 40 { // enough rows for the changes table to span pages
		p, err := g.Preview(ctx, "set", setIn{Key: strings.Repeat("k", 200) + string(rune('a'+i%26)), Value: strings.Repeat("v", 300)})
		if err != nil {
			t.Fatal(err)
		}
		ids, tokens = append(ids, p.ChangeID), append(tokens, p.ConfirmationToken)
	}
	if _, err := g.Ledger().DB().Exec("PRAGMA wal_checkpoint(TRUNCATE)"); err != nil {
		t.Fatal(err)
	}
	var root, pageSize int64
	db := g.Ledger().DB()
	if err := db.QueryRow(`SELECT rootpage FROM sqlite_schema WHERE name = 'changes'`).Scan(&root); err != nil {
		t.Fatal(err)
	}
	if err := db.QueryRow(`PRAGMA page_size`).Scan(&pageSize); err != nil {
		t.Fatal(err)
	}
	g.Close()
	pristine, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}

	t.Run("a page of the changes table", func(t *testing.T) {
		restore(t, path, pristine)
		if err := faulttest.CorruptPage(path, root, pageSize); err != nil {
			t.Fatal(err)
		}
		before := digest(t, path)
		l, err := ledger.Open(context.Background(), path, ledger.OpenOptions{})
		if err != nil {
			mustLedgerError(t, "open", err, ledger.ErrCorrupt)
			return
		}
		defer l.Close()
		g, err := changeset.New(nil, changeset.Options{Ledger: l, WriteMode: changeset.WriteGuarded})
		if err != nil {
			t.Fatal(err)
		}
		registerTestOps(g, store)
		_, err = g.Apply(ctx, ids[0], tokens[0])
		mustLedgerError(t, "apply", err, ledger.ErrCorrupt)
		_, err = g.Preview(ctx, "set", setIn{Key: "theme", Value: "dark"})
		mustLedgerError(t, "preview", err, ledger.ErrCorrupt)
		if n := store.applies.Load(); n != 0 {
			t.Fatalf("%d applies ran on a corrupt ledger", n)
		}
		problems, err := l.Check(ctx) // what mcp-changeset check prints
		if err != nil || len(problems) == 0 || !strings.HasPrefix(problems[0], "integrity: ") {
			t.Fatalf("check: %q %v, want integrity problems", problems, err)
		}
		t.Logf("check reports: %q", problems)
		if after := digest(t, path); after != before {
			t.Fatal("the refused operations changed the damaged file")
		}
	})

	t.Run("the schema page", func(t *testing.T) {
		restore(t, path, pristine)
		if err := faulttest.CorruptPage(path, 1, pageSize); err != nil {
			t.Fatal(err)
		}
		before := digest(t, path)
		_, err := changeset.New(nil, changeset.Options{LedgerPath: path, WriteMode: changeset.WriteGuarded})
		mustLedgerError(t, "open", err, ledger.ErrCorrupt)
		if after := digest(t, path); after != before {
			t.Fatal("the refused open changed the damaged file")
		}
	})
}

// restore puts the bytes of a ledger back and removes its side files.
func restore(t *testing.T, path string, data []byte) {
	t.Helper()
	os.Remove(path + "-wal")
	os.Remove(path + "-shm")
	if err := os.WriteFile(path, data, 0o600); err != nil {
		t.Fatal(err)
	}
}

func digest(t *testing.T, path string) string {
	t.Helper()
	d, err := faulttest.Digest(path)
	if err != nil {
		t.Fatal(err)
	}
	return d
}

func TestFault_ClockJumps(t *testing.T) {
	f := newFixture(t)
	ctx := context.Background()

	// Forward past the TTL: the preview expired and nothing applies.
	id, tok := f.preview("set", "theme", "dark")
	f.clock.Advance(changeset.DefaultTTL + time.Second)
	mustFail(t, f.session, "apply_change", map[string]any{"change_id": id, "confirmation_token": tok}, "expired")
	if s := f.status(id); s != ledger.Expired {
		t.Fatalf("status %s, want expired", s)
	}

	// Backwards beyond MaxClockSkew: refused, nothing spent; once the
	// clock is right again the same token applies.
	id, tok = f.preview("set", "theme", "dark")
	f.clock.Advance(-2 * changeset.DefaultMaxClockSkew)
	mustFail(t, f.session, "apply_change", map[string]any{"change_id": id, "confirmation_token": tok}, "fix the clock")
	if s := f.status(id); s != ledger.Pending {
		t.Fatalf("status %s, want pending", s)
	}
	f.clock.Advance(2 * changeset.DefaultMaxClockSkew)
	undoTok := f.apply(id, tok)

	// Backwards within the skew: fine, for apply and undo alike.
	id2, tok2 := f.preview("set", "language", "fr")
	f.clock.Advance(-changeset.DefaultMaxClockSkew / 2)
	undoTok2 := f.apply(id2, tok2)
	mustCall(t, f.session, "undo_change", map[string]any{"change_id": id2, "undo_token": undoTok2})

	// Forward past the undo window: the undo is refused, the change stays
	// applied and its token is not burnt by the refusal.
	f.clock.Advance(changeset.DefaultUndoTTL + time.Minute)
	mustFail(t, f.session, "undo_change", map[string]any{"change_id": id, "undo_token": undoTok}, "undo window closed")
	if s := f.status(id); s != ledger.Applied {
		t.Fatalf("status %s, want applied", s)
	}
	if n := f.store.applies.Load(); n != 2 {
		t.Fatalf("%d applies, want 2", n)
	}
	if _, err := f.guard.Ledger().ExpireStale(ctx); err != nil {
		t.Fatal(err)
	}
	checkLedger(t, f.guard.Ledger())
}

func TestFault_DiskFullRefusesWithALedgerErrorAndRecovers(t *testing.T) {
	dir := t.TempDir()
	unmount, err := faulttest.MountTmpfs(dir, "2M")
	if err != nil {
		t.Skipf("cannot simulate a full disk here: %v", err)
	}
	t.Cleanup(unmount)
	f := newFixture(t, func(o *changeset.Options) { o.LedgerPath = filepath.Join(dir, "ledger.db") })
	ctx := context.Background()
	pendingID, pendingTok := f.preview("set", "theme", "dark")

	// Fill the filesystem, then preview until the ledger cannot grow.
	filler := filepath.Join(dir, "filler")
	fill, err := os.Create(filler)
	if err != nil {
		t.Fatal(err)
	}
	for chunk := make([]byte, 16<<10); ; {
		if _, err := fill.Write(chunk); err != nil {
			break
		}
	}
	fill.Close()
	var full error
	for i := 0; i < 2000 && full == nil; i++ {
		_, full = f.guard.Preview(ctx, "set", setIn{Key: "theme", Value: strings.Repeat("x", 8<<10)})
	}
	if full == nil {
		t.Fatal("the ledger kept growing on a full filesystem")
	}
	var le *changeset.LedgerError
	if !errors.As(full, &le) || !errors.Is(full, ledger.ErrFull) {
		t.Fatalf("preview on a full disk: %v, want a LedgerError wrapping ErrFull", full)
	}
	agent := mustFail(t, f.session, "preview_set", map[string]any{"key": "theme", "value": strings.Repeat("x", 8<<10)}, "the change ledger failed: ledger storage is full")
	t.Logf("preview on a full disk: %v; the agent reads: %s", full, agent)
	_, applyErr := f.guard.Apply(ctx, pendingID, pendingTok)
	if applyErr != nil && !errors.As(applyErr, &le) {
		t.Fatalf("apply on a full disk: %v, want a LedgerError", applyErr)
	}
	t.Logf("apply on a full disk: %v", applyErr)
	checkLedger(t, f.guard.Ledger())

	// Space again: everything works, and a change refused for lack of
	// space is still pending with its token valid.
	if err := os.Remove(filler); err != nil {
		t.Fatal(err)
	}
	if applyErr != nil {
		if s := f.status(pendingID); s != ledger.Pending {
			t.Fatalf("after a refused apply: %s, want pending", s)
		}
		f.apply(pendingID, pendingTok)
	}
	id, tok := f.preview("set", "language", "fr")
	f.apply(id, tok)
	if n := f.store.applies.Load(); n != 2 {
		t.Fatalf("%d applies, want 2", n)
	}
	checkLedger(t, f.guard.Ledger())
}
