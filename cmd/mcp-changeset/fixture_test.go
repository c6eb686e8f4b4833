package main

import (
	"context"
	"crypto/rand"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"io/fs"
	"os"
	"path/filepath"
	"sync"
	"testing"
	"time"

	changeset "github.com/mcp-changeset/changeset-go"
	"github.com/mcp-changeset/changeset-go/internal/testkit"
	"github.com/mcp-changeset/changeset-go/ledger"
	"github.com/modelcontextprotocol/go-sdk/mcp"
)

// store is the resource the test operations change: settings in memory.
type store struct {
	mu sync.Mutex
	m  map[string]string
}

func (s *store) get(k string) string {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.m[k]
}

func (s *store) set(k, v string) string {
	s.mu.Lock()
	defer s.mu.Unlock()
	old := s.m[k]
	s.m[k] = v
	return old
}

type setIn struct {
	Key   string `json:"key"`
	Value string `json:"value"`
}

type setOut struct {
	Previous string `json:"previous"`
}

// secretErrorText is the full text of the failing operation's error: the
// ledger keeps it for operators, and show prints it.
const secretErrorText = "open /srv/secret/credentials: permission denied"

// registerOps registers the operations the tests drive: set (with undo
// and observe), noundo (no inverse), fail (its apply fails) and hang (its
// apply never returns; the value is a file it creates when it starts).
func registerOps(g *changeset.Guard, s *store) {
	preview := func(ctx context.Context, in setIn) (*changeset.Proposal[setIn], error) {
		return &changeset.Proposal[setIn]{
			Payload:  in,
			Diff:     changeset.DiffFields(map[string]any{in.Key: s.get(in.Key)}, map[string]any{in.Key: in.Value}),
			Summary:  "Set " + in.Key + " to " + in.Value,
			Resource: "setting:" + in.Key,
			Warnings: []string{"test warning"},
		}, nil
	}
	apply := func(ctx context.Context, p setIn) (setOut, error) {
		return setOut{Previous: s.set(p.Key, p.Value)}, nil
	}
	changeset.Register(g, &mcp.Tool{Name: "set"}, changeset.Operation[setIn, setIn, setOut]{
		Preview: preview,
		Apply:   apply,
		Undo: func(ctx context.Context, p setIn, r setOut) error {
			s.set(p.Key, r.Previous)
			return nil
		},
		Observe: func(ctx context.Context, p setIn) (any, error) { return s.get(p.Key), nil },
	})
	changeset.Register(g, &mcp.Tool{Name: "noundo"}, changeset.Operation[setIn, setIn, setOut]{Preview: preview, Apply: apply})
	changeset.Register(g, &mcp.Tool{Name: "hang"}, changeset.Operation[setIn, setIn, setOut]{
		Preview: preview,
		Apply: func(ctx context.Context, p setIn) (setOut, error) {
			// Tell the parent the apply started, then wait to be killed.
			if err := os.WriteFile(p.Value, []byte("started"), 0o600); err != nil {
				return setOut{}, err
			}
			time.Sleep(time.Hour)
			return setOut{}, nil
		},
	})
	changeset.Register(g, &mcp.Tool{Name: "fail"}, changeset.Operation[setIn, setIn, setOut]{
		Preview: preview,
		Apply: func(ctx context.Context, p setIn) (setOut, error) {
			return setOut{}, &fs.PathError{Op: "open", Path: "/srv/secret/credentials", Err: fs.ErrPermission}
		},
	})
}

// fixture is a ledger file populated through the library: one or more
// changes in every status, old and recent, and runs.
type fixture struct {
	path string
	ids  map[string]string // change or run ID by role, e.g. "applied", "old_undone"
}

// populate creates a ledger in a new directory and fills it through the
// library: previews, applies, failures, undos, runs (one with an undo dry
// run pending, one undone) and changes left in flight. Every token
// it mints and every digest the ledger stores is registered with addSecret.
// The ledger is closed when populate returns, so its main file holds
// everything and no side files remain.
func populate(t *testing.T) *fixture {
	t.Helper()
	ctx := context.Background()
	f := &fixture{path: filepath.Join(t.TempDir(), "ledger.db"), ids: map[string]string{}}
	s := &store{m: map[string]string{}}
	clk := testkit.NewClock(time.Time{})
	server := mcp.NewServer(&mcp.Implementation{Name: "fixture", Version: "1"}, nil)
	g, err := changeset.New(server, changeset.Options{LedgerPath: f.path, WriteMode: changeset.WriteGuarded, Clock: clk.Now})
	if err != nil {
		t.Fatal(err)
	}
	registerOps(g, s)
	session := connect(t, server)
	l := g.Ledger()

	preview := func(role, op, key, value string, extra ...map[string]any) (id, token string) {
		t.Helper()
		in := map[string]any{"key": key, "value": value}
		for _, e := range extra {
			for k, v := range e {
				in[k] = v
			}
		}
		p, err := g.Preview(ctx, op, in)
		if err != nil {
			t.Fatalf("preview %s: %v", role, err)
		}
		addSecret("the confirmation token of "+role, p.ConfirmationToken)
		f.ids[role] = p.ChangeID
		return p.ChangeID, p.ConfirmationToken
	}
	apply := func(role, op, key, value string) (id, undoToken string) {
		t.Helper()
		id, tok := preview(role, op, key, value)
		res, err := g.Apply(ctx, id, tok)
		if op == "fail" {
			if err == nil {
				t.Fatalf("apply %s succeeded", role)
			}
			return id, ""
		}
		if err != nil {
			t.Fatalf("apply %s: %v", role, err)
		}
		addSecret("the undo token of "+role, res.UndoToken)
		return id, res.UndoToken
	}
	undo := func(role, id, tok string) {
		t.Helper()
		if _, err := g.Undo(ctx, id, tok); err != nil {
			t.Fatalf("undo %s: %v", role, err)
		}
	}
	// move puts a change in an in-flight status as a process that died
	// mid-apply or mid-undo would have left it.
	move := func(id string, from, to ledger.Status) {
		t.Helper()
		err := l.WithTx(ctx, func(tx *ledger.Tx) error {
			c, err := tx.Change(id)
			if err != nil {
				return err
			}
			c.Status, c.UpdatedAt = to, clk.Now()
			if to == ledger.Applying {
				c.ConfirmHash, c.AppliedBy = "", "agent"
			} else {
				c.UndoHash, c.UndoneBy = "", "agent"
			}
			return tx.UpdateChange(c, from)
		})
		if err != nil {
			t.Fatalf("move %s to %s: %v", id, to, err)
		}
	}

	now := time.Now()
	// Old rows, last updated 40 days ago.
	clk.Set(now.Add(-40 * 24 * time.Hour))
	id, tok := apply("old_undone", "set", "a", "1")
	undo("old_undone", id, tok)
	apply("old_apply_failed", "fail", "b", "1")
	apply("old_applied_noundo", "noundo", "c", "1")
	apply("old_applied_closed", "set", "d", "1") // its undo window closed long ago
	id, _ = preview("old_applying", "set", "e", "1")
	move(id, ledger.Pending, ledger.Applying)
	id, _ = apply("old_undoing", "set", "f", "1")
	move(id, ledger.Applied, ledger.Undoing)
	preview("old_pending", "set", "g", "1") // stale, never pruned
	id, tok = preview("old_expired", "set", "h", "1")
	clk.Set(now.Add(-40*24*time.Hour + time.Hour))
	if _, err := g.Apply(ctx, id, tok); err == nil {
		t.Fatal("an expired preview was applied")
	}
	oldRun, err := g.StartRun(ctx, "an old empty run")
	if err != nil {
		t.Fatal(err)
	}
	f.ids["old_run"] = oldRun.RunID

	// Recent rows.
	clk.Set(now.Add(-2 * time.Hour))
	preview("stale", "set", "theme", "blue") // expired 1h45m ago, still pending
	clk.Set(now.Add(-10 * time.Minute))
	preview("pending", "set", "theme", "dark")
	apply("applied", "set", "language", "fr")
	apply("applied_noundo", "noundo", "font", "serif")
	apply("apply_failed", "fail", "theme", "x")
	id, tok = apply("undone", "set", "size", "12")
	undo("undone", id, tok)
	id, tok = apply("undo_failed", "set", "color", "red")
	s.set("color", "a person's edit")
	if _, err := g.Undo(ctx, id, tok); err == nil {
		t.Fatal("undo over a later edit succeeded")
	}
	id, _ = preview("applying", "set", "width", "80")
	move(id, ledger.Pending, ledger.Applying)
	id, _ = apply("undoing", "set", "height", "24")
	move(id, ledger.Applied, ledger.Undoing)
	apply("nasty", "set", "motd", "\x1b[31mred\x1b[0m \u202eevil\u202c\nnext line\ttab")

	// A run with changes, and the agent's dry run of its undo, which
	// mints a confirmation token bound to the plan.
	run, err := g.StartRun(ctx, "tidy the settings")
	if err != nil {
		t.Fatal(err)
	}
	f.ids["run"] = run.RunID
	id, tok = preview("run_applied", "set", "zone", "utc", map[string]any{"run_id": run.RunID})
	if _, err := g.Apply(ctx, id, tok); err != nil {
		t.Fatal(err)
	}
	preview("run_pending", "set", "zone", "local", map[string]any{"run_id": run.RunID})
	res, err := session.CallTool(ctx, &mcp.CallToolParams{Name: "undo_run", Arguments: map[string]any{"run_id": run.RunID, "dry_run": true}})
	if err != nil || res.IsError {
		t.Fatalf("undo_run dry run: %v %v", err, res)
	}
	dry, _ := res.StructuredContent.(map[string]any)
	runToken, _ := dry["confirmation_token"].(string)
	if runToken == "" {
		t.Fatalf("the dry run returned no token: %v", res.StructuredContent)
	}
	addSecret("the confirmation token of run "+run.RunID, runToken)

	// A run a person undid.
	undoneRun, err := g.StartRun(ctx, "a run undone by a person")
	if err != nil {
		t.Fatal(err)
	}
	f.ids["undone_run"] = undoneRun.RunID
	id, tok = preview("run_undone", "set", "mode", "fast", map[string]any{"run_id": undoneRun.RunID})
	if _, err := g.Apply(ctx, id, tok); err != nil {
		t.Fatal(err)
	}
	if _, err := g.UndoRun(ctx, undoneRun.RunID, false, changeset.Person("alice")); err != nil {
		t.Fatal(err)
	}

	// Register every digest the ledger stores.
	changes, err := l.Changes(ctx, ledger.ChangeFilter{})
	if err != nil {
		t.Fatal(err)
	}
	for _, c := range changes {
		addSecret("the scope digest of "+c.ID, string(c.ScopeHash))
		addSecret("the payload digest of "+c.ID, string(c.PayloadHash))
		addSecret("the state digest of "+c.ID, string(c.StateHash))
		addSecret("the confirmation digest of "+c.ID, string(c.ConfirmHash))
		addSecret("the undo digest of "+c.ID, string(c.UndoHash))
	}
	runs, err := l.Runs(ctx, ledger.RunFilter{})
	if err != nil {
		t.Fatal(err)
	}
	for _, r := range runs {
		addSecret("the scope digest of "+r.ID, string(r.ScopeHash))
		addSecret("the plan digest of "+r.ID, string(r.PlanHash))
		addSecret("the confirmation digest of "+r.ID, string(r.ConfirmHash))
	}
	if err := g.Close(); err != nil {
		t.Fatal(err)
	}
	return f
}

// randomHex returns n random bytes in lowercase hex.
func randomHex(n int) string {
	b := make([]byte, n)
	rand.Read(b)
	return hex.EncodeToString(b)
}

// digest returns a fresh SHA-256 digest in hex, like those the ledger
// stores.
func digest(what string) string {
	sum := sha256.Sum256([]byte(what + randomHex(16)))
	return hex.EncodeToString(sum[:])
}

// status reads the status of change id straight from the ledger file,
// read-only.
func status(t *testing.T, path, id string) ledger.Status {
	t.Helper()
	l, err := ledger.Open(context.Background(), path, ledger.OpenOptions{ReadOnly: true})
	if err != nil {
		t.Fatal(err)
	}
	defer l.Close()
	c, err := l.Change(context.Background(), id)
	if errors.Is(err, ledger.ErrNotFound) {
		return "(deleted)"
	}
	if err != nil {
		t.Fatal(err)
	}
	return c.Status
}

// connect serves server over in-memory transports and returns a client
// session, closed with the test.
func connect(t *testing.T, server *mcp.Server) *mcp.ClientSession {
	t.Helper()
	ctx := context.Background()
	st, ct := mcp.NewInMemoryTransports()
	ss, err := server.Connect(ctx, st, nil)
	if err != nil {
		t.Fatal(err)
	}
	cs, err := mcp.NewClient(&mcp.Implementation{Name: "fixture-client", Version: "1"}, nil).Connect(ctx, ct, nil)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { cs.Close(); ss.Wait() })
	return cs
}
