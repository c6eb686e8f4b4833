package changeset_test

import (
	"context"
	"encoding/json"
	"errors"
	"io/fs"
	"path/filepath"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	changeset "github.com/mcp-changeset/changeset-go"
	"github.com/mcp-changeset/changeset-go/internal/testkit"
	"github.com/mcp-changeset/changeset-go/ledger"
	"github.com/modelcontextprotocol/go-sdk/mcp"
)

// kv is the resource the test operations change: a map guarded by a mutex.
type kv struct {
	mu      sync.Mutex
	m       map[string]string
	applies atomic.Int64 // how many times an Apply wrote
	undos   atomic.Int64
}

func (s *kv) get(k string) string {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.m[k]
}

func (s *kv) set(k, v string) string {
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

// fixture is a Guard with test operations over a fresh ledger, and a
// go-sdk client connected to its server over in-memory transports.
type fixture struct {
	t       *testing.T
	path    string // the SQLite file of a newFixture; "" for newFixtureOn
	guard   *changeset.Guard
	store   *kv
	clock   *testkit.Clock
	session *mcp.ClientSession
	server  *mcp.Server
}

// newFixture builds a fixture on a SQLite file that the Guard opens itself
// (Options.LedgerPath), for the tests that look at the file; edit adjusts
// the options before New.
func newFixture(t *testing.T, edit ...func(*changeset.Options)) *fixture {
	t.Helper()
	path := filepath.Join(t.TempDir(), "ledger.db")
	f := buildFixture(t, changeset.Options{LedgerPath: path}, edit)
	f.path = path
	return f
}

// newFixtureOn builds a fixture on a new ledger of kit's backend, passed
// in Options.Ledger and closed when t ends; edit adjusts the options
// before New.
func newFixtureOn(t *testing.T, kit backendKit, edit ...func(*changeset.Options)) *fixture {
	t.Helper()
	return buildFixture(t, changeset.Options{Ledger: kit.Ledger(t)}, edit)
}

// buildFixture completes base, whose ledger is set, into a fixture.
func buildFixture(t *testing.T, base changeset.Options, edit []func(*changeset.Options)) *fixture {
	t.Helper()
	f := &fixture{
		t:     t,
		store: &kv{m: map[string]string{"theme": "light", "language": "en"}},
		clock: testkit.NewClock(time.Date(2026, 11, 30, 9, 0, 0, 0, time.UTC)),
	}
	opts := base
	opts.WriteMode, opts.Clock = changeset.WriteGuarded, f.clock.Now
	opts.Durability = testDurability()
	for _, e := range edit {
		e(&opts)
	}
	server := mcp.NewServer(&mcp.Implementation{Name: "test", Version: "1"}, nil)
	g, err := changeset.New(server, opts)
	if err != nil {
		t.Fatalf("New: %v", err)
	}
	t.Cleanup(func() { g.Close() })
	f.guard, f.server = g, server
	registerTestOps(g, f.store)
	f.session = connect(t, server)
	return f
}

// registerTestOps registers the operations the tests drive:
//   - set: sets a key, with undo and observe;
//   - fail: its apply fails with an *fs.PathError naming a secret path;
//   - big: its apply returns a result of the requested size;
//   - noundo: sets a key and has no inverse;
//   - boom: its apply panics.
func registerTestOps(g *changeset.Guard, s *kv) {
	preview := func(ctx context.Context, in setIn) (*changeset.Proposal[setIn], error) {
		if in.Key == "" {
			return nil, changeset.Refuse("key is required")
		}
		return &changeset.Proposal[setIn]{
			Payload:  in,
			Diff:     changeset.DiffFields(map[string]any{in.Key: s.get(in.Key)}, map[string]any{in.Key: in.Value}),
			Summary:  "Set " + in.Key,
			Resource: "setting:" + in.Key,
		}, nil
	}
	apply := func(ctx context.Context, p setIn) (setOut, error) {
		s.applies.Add(1)
		return setOut{Previous: s.set(p.Key, p.Value)}, nil
	}
	changeset.Register(g, &mcp.Tool{Name: "set", Description: "Set a key."}, changeset.Operation[setIn, setIn, setOut]{
		Preview: preview,
		Apply:   apply,
		Undo: func(ctx context.Context, p setIn, r setOut) error {
			s.undos.Add(1)
			s.set(p.Key, r.Previous)
			return nil
		},
		Observe: func(ctx context.Context, p setIn) (any, error) { return s.get(p.Key), nil },
	})
	changeset.Register(g, &mcp.Tool{Name: "noundo"}, changeset.Operation[setIn, setIn, setOut]{AllowEmptyDiff: true, Preview: preview, Apply: apply})
	changeset.Register(g, &mcp.Tool{Name: "fail"}, changeset.Operation[setIn, setIn, setOut]{
		Preview: preview,
		Apply: func(ctx context.Context, p setIn) (setOut, error) {
			return setOut{}, &fs.PathError{Op: "open", Path: "/srv/secret/credentials", Err: fs.ErrPermission}
		},
	})
	changeset.Register(g, &mcp.Tool{Name: "big"}, changeset.Operation[setIn, setIn, setOut]{
		Preview: preview,
		Apply: func(ctx context.Context, p setIn) (setOut, error) {
			s.applies.Add(1)
			return setOut{Previous: strings.Repeat("x", len(p.Value))}, nil
		},
		Undo: func(ctx context.Context, p setIn, r setOut) error { return nil },
	})
	changeset.Register(g, &mcp.Tool{Name: "boom"}, changeset.Operation[setIn, setIn, setOut]{
		Preview: preview,
		Apply:   func(ctx context.Context, p setIn) (setOut, error) { panic("operation bug") },
	})
}

// connect starts server on an in-memory transport and returns a connected
// client session.
func connect(t *testing.T, server *mcp.Server) *mcp.ClientSession {
	t.Helper()
	return connectServer(t, server, nil, nil)
}

// connectServer is connect with the client's options and session options.
func connectServer(t *testing.T, server *mcp.Server, opts *mcp.ClientOptions, sopts *mcp.ClientSessionOptions) *mcp.ClientSession {
	t.Helper()
	ctx := context.Background()
	st, ct := mcp.NewInMemoryTransports()
	ss, err := server.Connect(ctx, st, nil)
	if err != nil {
		t.Fatalf("server connect: %v", err)
	}
	client := mcp.NewClient(&mcp.Implementation{Name: "test-client", Version: "1"}, opts)
	cs, err := client.Connect(ctx, ct, sopts)
	if err != nil {
		t.Fatalf("client connect: %v", err)
	}
	t.Cleanup(func() { cs.Close(); ss.Wait() })
	return cs
}

// call invokes a tool and returns its structured result decoded into a map,
// or the text of its tool error. A protocol error fails the test.
func call(t *testing.T, cs *mcp.ClientSession, name string, args map[string]any) (map[string]any, string) {
	t.Helper()
	res, err := cs.CallTool(context.Background(), &mcp.CallToolParams{Name: name, Arguments: args})
	if err != nil {
		t.Fatalf("%s: protocol error: %v", name, err)
	}
	if res.IsError {
		var text []string
		for _, c := range res.Content {
			if tc, ok := c.(*mcp.TextContent); ok {
				text = append(text, tc.Text)
			}
		}
		return nil, strings.Join(text, "\n")
	}
	var out map[string]any
	raw, _ := json.Marshal(res.StructuredContent)
	if err := json.Unmarshal(raw, &out); err != nil {
		t.Fatalf("%s: structured content: %v", name, err)
	}
	return out, ""
}

// mustCall is call for a step that must succeed.
func mustCall(t *testing.T, cs *mcp.ClientSession, name string, args map[string]any) map[string]any {
	t.Helper()
	out, errText := call(t, cs, name, args)
	if errText != "" {
		t.Fatalf("%s: tool error: %s", name, errText)
	}
	return out
}

// mustFail is call for a step that must be refused with a message
// containing want.
func mustFail(t *testing.T, cs *mcp.ClientSession, name string, args map[string]any, want string) string {
	t.Helper()
	out, errText := call(t, cs, name, args)
	if errText == "" {
		t.Fatalf("%s: succeeded with %v, want a refusal containing %q", name, out, want)
	}
	if !strings.Contains(errText, want) {
		t.Fatalf("%s: refusal %q does not contain %q", name, errText, want)
	}
	return errText
}

// preview previews set(key, value) through the client and returns the
// change ID and confirmation token.
func (f *fixture) preview(op, key, value string) (id, token string) {
	f.t.Helper()
	out := mustCall(f.t, f.session, "preview_"+op, map[string]any{"key": key, "value": value})
	return out["change_id"].(string), out["confirmation_token"].(string)
}

// apply applies through the client and returns the undo token ("" when none).
func (f *fixture) apply(id, token string) string {
	f.t.Helper()
	out := mustCall(f.t, f.session, "apply_change", map[string]any{"change_id": id, "confirmation_token": token})
	tok, _ := out["undo_token"].(string)
	return tok
}

// status reads a change's status from the ledger.
func (f *fixture) status(id string) ledger.Status {
	f.t.Helper()
	c, err := f.guard.Record(context.Background(), id)
	if err != nil {
		f.t.Fatalf("Record(%s): %v", id, err)
	}
	return c.Status
}

func isLedgerError(err error) bool {
	var le *changeset.LedgerError
	return errors.As(err, &le)
}
