package dashboard_test

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"maps"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	changeset "github.com/mcp-changeset/changeset-go"
	"github.com/mcp-changeset/changeset-go/dashboard"
	"github.com/mcp-changeset/changeset-go/internal/testkit"
	"github.com/mcp-changeset/changeset-go/ledger"
	"github.com/modelcontextprotocol/go-sdk/mcp"
)

// store is the resource the test operations change: a key/value map.
type store struct {
	mu sync.Mutex
	m  map[string]string
}

func (s *store) get(k string) (string, bool) {
	s.mu.Lock()
	defer s.mu.Unlock()
	v, ok := s.m[k]
	return v, ok
}

func (s *store) put(k string, v *string) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if v == nil {
		delete(s.m, k)
	} else {
		s.m[k] = *v
	}
}

// dump is the whole store as one string, for comparisons.
func (s *store) dump() string {
	s.mu.Lock()
	defer s.mu.Unlock()
	var b strings.Builder
	for _, k := range slices.Sorted(maps.Keys(s.m)) {
		fmt.Fprintf(&b, "%s=%q\n", k, s.m[k])
	}
	return b.String()
}

type kvIn struct {
	Key   string `json:"key"`
	Value string `json:"value,omitempty"`
}

// kvPrev is what an apply replaced: nil when the key did not exist.
type kvPrev struct {
	Previous *string `json:"previous"`
}

// registerOps registers the operations the tests drive:
//   - set_value and delete_value, with undo and Observe of their key;
//   - set_plain, set_value without a Resource;
//   - log_line, with no inverse;
//   - save_value, whose apply fails with an error naming a secret path.
func registerOps(g *changeset.Guard, s *store) {
	observe := func(ctx context.Context, p kvIn) (any, error) {
		if v, ok := s.get(p.Key); ok {
			return v, nil
		}
		return nil, nil
	}
	old := func(k string) any {
		if v, ok := s.get(k); ok {
			return v
		}
		return nil
	}
	apply := func(ctx context.Context, p kvIn, v *string) (kvPrev, error) {
		var prev kvPrev
		if o, ok := s.get(p.Key); ok {
			prev.Previous = &o
		}
		s.put(p.Key, v)
		return prev, nil
	}
	undo := func(ctx context.Context, p kvIn, r kvPrev) error { s.put(p.Key, r.Previous); return nil }
	changeset.Register(g, &mcp.Tool{Name: "set_value"}, changeset.Operation[kvIn, kvIn, kvPrev]{
		Preview: func(ctx context.Context, in kvIn) (*changeset.Proposal[kvIn], error) {
			return &changeset.Proposal[kvIn]{Payload: in, Summary: fmt.Sprintf("Set %s to %q", in.Key, in.Value), Resource: "key:" + in.Key,
				Diff: changeset.DiffFields(map[string]any{in.Key: old(in.Key)}, map[string]any{in.Key: in.Value})}, nil
		},
		Apply:   func(ctx context.Context, p kvIn) (kvPrev, error) { return apply(ctx, p, &p.Value) },
		Undo:    undo,
		Observe: observe,
	})
	changeset.Register(g, &mcp.Tool{Name: "set_plain"}, changeset.Operation[kvIn, kvIn, kvPrev]{ // names no resource
		Preview: func(ctx context.Context, in kvIn) (*changeset.Proposal[kvIn], error) {
			return &changeset.Proposal[kvIn]{Payload: in, Summary: fmt.Sprintf("Set %s to %q", in.Key, in.Value),
				Diff: changeset.DiffFields(map[string]any{in.Key: old(in.Key)}, map[string]any{in.Key: in.Value})}, nil
		},
		Apply:   func(ctx context.Context, p kvIn) (kvPrev, error) { return apply(ctx, p, &p.Value) },
		Undo:    undo,
		Observe: observe,
	})
	changeset.Register(g, &mcp.Tool{Name: "delete_value"}, changeset.Operation[kvIn, kvIn, kvPrev]{
		Preview: func(ctx context.Context, in kvIn) (*changeset.Proposal[kvIn], error) {
			if _, ok := s.get(in.Key); !ok {
				return nil, changeset.Refuse("no key %q", in.Key)
			}
			return &changeset.Proposal[kvIn]{Payload: in, Summary: "Delete " + in.Key, Resource: "key:" + in.Key,
				Diff: []changeset.DiffEntry{{Field: in.Key, Before: old(in.Key)}}}, nil
		},
		Apply:   func(ctx context.Context, p kvIn) (kvPrev, error) { return apply(ctx, p, nil) },
		Undo:    undo,
		Observe: observe,
	})
	changeset.Register(g, &mcp.Tool{Name: "log_line"}, changeset.Operation[kvIn, kvIn, kvPrev]{
		Preview: func(ctx context.Context, in kvIn) (*changeset.Proposal[kvIn], error) {
			return &changeset.Proposal[kvIn]{Payload: in, Summary: "Log " + in.Value, Resource: "log",
				Diff: []changeset.DiffEntry{{Field: "log", After: in.Value}}}, nil
		},
		Apply: func(ctx context.Context, p kvIn) (kvPrev, error) {
			v := p.Value
			return apply(ctx, kvIn{Key: "log"}, &v)
		},
	})
	changeset.Register(g, &mcp.Tool{Name: "save_value"}, changeset.Operation[kvIn, kvIn, kvPrev]{
		Preview: func(ctx context.Context, in kvIn) (*changeset.Proposal[kvIn], error) {
			return &changeset.Proposal[kvIn]{Payload: in, Summary: "Save " + in.Key,
				Diff: changeset.DiffFields(nil, map[string]any{in.Key: in.Value})}, nil
		},
		Apply: func(ctx context.Context, p kvIn) (kvPrev, error) {
			return kvPrev{}, errors.New("open /srv/private/values.db: permission denied")
		},
	})
}

// fixture is a Guard with the test operations over a fresh SQLite ledger,
// an MCP client for the agent's side, and a dashboard over the Guard.
type fixture struct {
	t       *testing.T
	guard   *changeset.Guard
	server  *mcp.Server
	store   *store
	clock   *testkit.Clock
	session *mcp.ClientSession
	dash    *dashboard.Dashboard
	tokens  []string // every token minted for the agent, and every session ID
	bodies  []string // every response the dashboard sent, headers included
}

const loginToken = "test-login-token-0123456789abcdef"

// newFixture builds a fixture; edit adjusts the Guard's options.
func newFixture(t *testing.T, edit ...func(*changeset.Options, *dashboard.Options)) *fixture {
	t.Helper()
	f := &fixture{
		t:     t,
		store: &store{m: map[string]string{"theme": "light", "language": "en", "motd": "hello", "volume": "5"}},
		clock: testkit.NewClock(time.Date(2026, 11, 30, 9, 0, 0, 0, time.UTC)),
	}
	opts := changeset.Options{LedgerPath: filepath.Join(t.TempDir(), "ledger.db"), WriteMode: changeset.WriteGuarded, Clock: f.clock.Now}
	dopts := dashboard.Options{LoginToken: loginToken, Person: "ana", Now: f.clock.Now}
	for _, e := range edit {
		e(&opts, &dopts)
	}
	server := mcp.NewServer(&mcp.Implementation{Name: "test", Version: "1"}, nil)
	g, err := changeset.New(server, opts)
	if err != nil {
		t.Fatalf("changeset.New: %v", err)
	}
	t.Cleanup(func() { g.Close() })
	registerOps(g, f.store)
	f.guard, f.server = g, server
	f.session = connect(t, server)
	if f.dash, err = dashboard.New(g, dopts); err != nil {
		t.Fatalf("dashboard.New: %v", err)
	}
	t.Cleanup(f.assertNoSecrets)
	return f
}

func connect(t *testing.T, server *mcp.Server) *mcp.ClientSession {
	t.Helper()
	return connectAs(t, server, "agent")
}

// connectAs connects an MCP client named name: its calls are recorded as
// "agent:<name>".
func connectAs(t *testing.T, server *mcp.Server, name string) *mcp.ClientSession {
	t.Helper()
	ctx := context.Background()
	st, ct := mcp.NewInMemoryTransports()
	ss, err := server.Connect(ctx, st, nil)
	if err != nil {
		t.Fatalf("server connect: %v", err)
	}
	cs, err := mcp.NewClient(&mcp.Implementation{Name: name, Version: "1"}, nil).Connect(ctx, ct, nil)
	if err != nil {
		t.Fatalf("client connect: %v", err)
	}
	t.Cleanup(func() { cs.Close(); ss.Wait() })
	return cs
}

// do previews and applies one change through the Guard's Go API, as an
// agent would through the tools, and returns its ID.
func (f *fixture) do(runID, op, key, value string) string {
	f.t.Helper()
	id := f.preview(runID, op, key, value)
	f.clock.Advance(time.Minute)
	res, err := f.guard.Apply(context.Background(), id, f.tokens[len(f.tokens)-1])
	if err != nil {
		f.t.Fatalf("apply %s %s: %v", op, key, err)
	}
	if res.UndoToken != "" {
		f.tokens = append(f.tokens, res.UndoToken)
	}
	return id
}

// preview previews one change and keeps its token.
func (f *fixture) preview(runID, op, key, value string) string {
	f.t.Helper()
	f.clock.Advance(time.Minute)
	in := map[string]any{"key": key, "value": value}
	if runID != "" {
		in["run_id"] = runID
	}
	p, err := f.guard.Preview(context.Background(), op, in)
	if err != nil {
		f.t.Fatalf("preview %s %s: %v", op, key, err)
	}
	f.tokens = append(f.tokens, p.ConfirmationToken)
	return p.ChangeID
}

func (f *fixture) startRun(label string) string {
	f.t.Helper()
	f.clock.Advance(time.Minute)
	r, err := f.guard.StartRun(context.Background(), label)
	if err != nil {
		f.t.Fatalf("StartRun: %v", err)
	}
	return r.RunID
}

// scenario is what the agent did in the tests' ledger.
type scenario struct {
	run     string   // "Tidy up settings": the run the tests undo
	changes []string // its changes, oldest first
	other   string   // a second run, with an agent's dry run pending
	single  string   // an applied change outside any run
	pending string   // a previewed change never applied
	failed  string   // a change whose apply failed
}

// build makes the scenario: a run whose undo undoes two settings, finds
// that the run itself created and deleted "banner", skips "motd" (a person
// edited it after the agent) and reports the log line as irreversible.
func (f *fixture) build() scenario {
	f.t.Helper()
	var s scenario
	s.run = f.startRun("Tidy up settings")
	s.changes = append(s.changes,
		f.do(s.run, "set_value", "theme", "dark"),
		f.do(s.run, "set_value", "language", "fr"),
		f.do(s.run, "set_value", "banner", "welcome"),
		f.do(s.run, "delete_value", "banner", ""),
		f.do(s.run, "set_value", "motd", "updated by the agent"),
	)
	f.clock.Advance(time.Minute)
	human := "edited by a person"
	f.store.put("motd", &human)
	s.changes = append(s.changes, f.do(s.run, "log_line", "", "tidied"))

	s.other = f.startRun("Second task")
	f.do(s.other, "set_value", "colour", "blue")
	out := f.callTool("undo_run", map[string]any{"run_id": s.other})
	if tok, _ := out["confirmation_token"].(string); tok == "" {
		f.t.Fatalf("agent dry run returned no token: %v", out)
	} else {
		f.tokens = append(f.tokens, tok)
	}
	s.single = f.do("", "set_value", "volume", "11")
	s.pending = f.preview("", "set_value", "theme", "solarized")
	s.failed = f.preview("", "save_value", "draft", "x")
	f.clock.Advance(time.Minute)
	if _, err := f.guard.Apply(context.Background(), s.failed, f.tokens[len(f.tokens)-1]); err == nil {
		f.t.Fatal("save_value applied; want a failure")
	}
	f.clock.Advance(5 * time.Minute)
	return s
}

// callTool calls one of the agent's tools and returns its structured
// result; a tool error fails the test.
func (f *fixture) callTool(name string, args map[string]any) map[string]any {
	f.t.Helper()
	return f.callToolOn(f.session, name, args)
}

// callToolOn calls a tool as the agent of session cs.
func (f *fixture) callToolOn(cs *mcp.ClientSession, name string, args map[string]any) map[string]any {
	f.t.Helper()
	res, err := cs.CallTool(context.Background(), &mcp.CallToolParams{Name: name, Arguments: args})
	if err != nil {
		f.t.Fatalf("%s: %v", name, err)
	}
	raw, _ := json.Marshal(res.StructuredContent)
	if res.IsError {
		f.t.Fatalf("%s: tool error: %v", name, res.Content)
	}
	var out map[string]any
	json.Unmarshal(raw, &out)
	return out
}

// rows returns every change and run of the ledger, digests included, for
// comparisons and for the search for leaked digests.
func (f *fixture) rows() ([]*ledger.Change, []*ledger.Run) {
	f.t.Helper()
	ctx := context.Background()
	changes, err := f.guard.Ledger().Changes(ctx, ledger.ChangeFilter{})
	if err != nil {
		f.t.Fatal(err)
	}
	runs, err := f.guard.Ledger().Runs(ctx, ledger.RunFilter{})
	if err != nil {
		f.t.Fatal(err)
	}
	for i, c := range changes { // read each row on its own too, as Get does
		if changes[i], err = f.guard.Ledger().Change(ctx, c.ID); err != nil {
			f.t.Fatal(err)
		}
	}
	return changes, runs
}

// snapshot renders the ledger's rows and the store as one string.
func (f *fixture) snapshot() string {
	changes, runs := f.rows()
	b, _ := json.Marshal(struct {
		C []*ledger.Change
		R []*ledger.Run
		S string
	}{changes, runs, f.store.dump()})
	return string(b)
}

// assertNoSecrets searches every response the dashboard sent for every
// token minted in the test, the login token, and every digest stored in
// the ledger's rows.
func (f *fixture) assertNoSecrets() {
	f.t.Helper()
	secrets := append([]string{loginToken, f.dash.LoginToken()}, f.tokens...)
	changes, runs := f.rows()
	for _, c := range changes {
		secrets = append(secrets, string(c.PayloadHash), string(c.ScopeHash), string(c.StateHash), string(c.ConfirmHash), string(c.UndoHash))
	}
	for _, r := range runs {
		secrets = append(secrets, string(r.ScopeHash), string(r.PlanHash), string(r.ConfirmHash))
	}
	lowered := make([]string, len(f.bodies)) // each body once: there are hundreds of secrets
	for i, body := range f.bodies {
		lowered[i] = strings.ToLower(body)
	}
	n := 0
	for _, s := range secrets {
		if s == "" {
			continue
		}
		n++
		ls := strings.ToLower(s)
		for i, body := range lowered {
			if strings.Contains(body, ls) {
				f.t.Errorf("response %d holds a secret (%.12s…):\n%.400s", i, s, f.bodies[i])
			}
		}
	}
	if len(f.bodies) > 0 && len(changes) > 0 && n < 5 {
		f.t.Errorf("only %d secrets to search for; the fixture should have minted more", n)
	}
}
