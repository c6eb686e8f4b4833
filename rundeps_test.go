package changeset_test

import (
	"context"
	"encoding/json"
	"errors"
	"maps"
	"slices"
	"strings"
	"testing"
	"time"

	changeset "github.com/mcp-changeset/changeset-go"
	"github.com/mcp-changeset/changeset-go/ledger"
	"github.com/modelcontextprotocol/go-sdk/mcp"
)

// The tests in this file cover the rules of a run's undo that concern
// what a change relies on and what it touches: dependencies
// (Proposal.DependsOn) stay inside their scope and hold back both
// undo_run and undo_change; a change the undo keeps keeps its resource,
// also when a person's edit lands between the plan and the execution;
// and a change that names several resources (Proposal.Resources) is
// undone exactly, or kept whole. Each runs on every ledger backend.
//
// Each test names, in the comment above it, the production line it was
// verified against: with that line mutated as described, the test fails;
// with it in place, the test passes.

// doTok previews op with args through cs (in runID, when not empty),
// applies it and returns the change ID and its undo token.
func doTok(t *testing.T, f *fixture, cs *mcp.ClientSession, runID, op string, args map[string]any) (id, undoToken string) {
	t.Helper()
	f.clock.Advance(time.Second) // one step after another
	if runID != "" {
		args["run_id"] = runID
	}
	out := mustCall(t, cs, "preview_"+op, args)
	if runID != "" && out["run_id"] != runID {
		t.Fatalf("preview did not join run %s: %v", runID, out)
	}
	id = out["change_id"].(string)
	app := mustCall(t, cs, "apply_change", map[string]any{"change_id": id, "confirmation_token": out["confirmation_token"]})
	tok, _ := app["undo_token"].(string)
	return id, tok
}

// rawCall calls a tool and returns everything its caller receives as one
// text (every content block and the structured result as JSON), the
// structured result, and whether it is a tool error.
func rawCall(t *testing.T, cs *mcp.ClientSession, name string, args map[string]any) (text string, out map[string]any, isErr bool) {
	t.Helper()
	res, err := cs.CallTool(context.Background(), &mcp.CallToolParams{Name: name, Arguments: args})
	if err != nil {
		t.Fatalf("%s: protocol error: %v", name, err)
	}
	raw, err := json.Marshal(res)
	if err != nil {
		t.Fatal(err)
	}
	if !res.IsError {
		sc, _ := json.Marshal(res.StructuredContent)
		if err := json.Unmarshal(sc, &out); err != nil {
			t.Fatalf("%s: structured content: %v", name, err)
		}
	}
	return string(raw), out, res.IsError
}

// noLeak fails t when text names any of secrets.
func noLeak(t *testing.T, what, text string, secrets []string) {
	t.Helper()
	for _, s := range secrets {
		if strings.Contains(text, s) {
			t.Fatalf("%s names %q, which belongs to another scope:\n%s", what, s, text)
		}
	}
}

// idsOf is ids for a report list that may be absent.
func idsOf(list any) []string {
	if list == nil {
		return nil
	}
	return ids(list)
}

// entryOf returns the entry of change id in a report list.
func entryOf(t *testing.T, list any, id string) map[string]any {
	t.Helper()
	l, _ := list.([]any)
	for _, e := range l {
		if m := e.(map[string]any); m["change_id"] == id {
			return m
		}
	}
	t.Fatalf("change %s is not among %v", id, list)
	return nil
}

// TestRunDeps_OtherScopeDependentNeitherHoldsBackNorShows proves that a
// change of another scope that depends on a resource a scope's change
// created neither holds back that scope's undo nor is named to it: scope
// A's undo_change of one create and the dry run and real undo of the run
// that made another go through, and nothing A receives names B's changes,
// their summaries or B's run.
//
// Verified against internal/runundo/hold.go, Engine.Hold: with both
// scope checks removed (the filter's "ScopeHash: c.ScopeHash" and the
// "|| d.ScopeHash != c.ScopeHash" of the loop; either one alone still
// keeps scopes apart), B's funnels hold back A's undos, whose refusal and
// skip reason name B's change, and the test fails.
func TestRunDeps_OtherScopeDependentNeitherHoldsBackNorShows(t *testing.T) {
	onEachBackend(t, func(t *testing.T, kit backendKit) {
		f := newPlanFixtureOn(t, kit, func(o *changeset.Options) { o.Scope = "tenant-a" })
		server := mcp.NewServer(&mcp.Implementation{Name: "tenant-b", Version: "1"}, nil)
		b, err := changeset.New(server, changeset.Options{Ledger: kit.Reopen(t, f.guard.Ledger()), WriteMode: changeset.WriteGuarded, Scope: "tenant-b", Clock: f.clock.Now})
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { b.Close() })
		var hookB func()
		registerPlanOps(b, f.store, f.objs, &hookB)
		bs := connect(t, server)

		run := f.startRun("Rules")
		rule1, _ := doTok(t, f.fixture, f.session, run, "create_obj", map[string]any{"name": "rule:1"})
		rule2, tok2 := doTok(t, f.fixture, f.session, "", "create_obj", map[string]any{"name": "rule:2"}) // outside the run

		runB := mustCall(t, bs, "start_run", map[string]any{"label": "B's funnels"})["run_id"].(string)
		funnel1, _ := doTok(t, f.fixture, bs, runB, "create_obj", map[string]any{"name": "funnel:secret-of-b-1", "uses": "rule:1"})
		funnel2, _ := doTok(t, f.fixture, bs, runB, "create_obj", map[string]any{"name": "funnel:secret-of-b-2", "uses": "rule:2"})
		secrets := []string{funnel1, funnel2, runB, "secret-of-b", "B's funnels", "tenant-b"}

		text, out, isErr := rawCall(t, f.session, "undo_change", map[string]any{"change_id": rule2, "undo_token": tok2})
		noLeak(t, "undo_change", text, secrets)
		if isErr || out["status"] != "undone" {
			t.Fatalf("undo_change of A's create was refused or failed: %s", text)
		}
		if _, ok := f.objs.get("rule:2"); ok || f.status(rule2) != ledger.Undone {
			t.Fatalf("rule:2 after its undo: present=%v, %s", ok, f.status(rule2))
		}

		text, dry, isErr := rawCall(t, f.session, "undo_run", map[string]any{"run_id": run})
		noLeak(t, "the dry run", text, secrets)
		if isErr || !slices.Equal(idsOf(dry["will_undo"]), []string{rule1}) || len(idsOf(dry["skipped"])) != 0 {
			t.Fatalf("dry run = %s, want the create planned and nothing skipped", text)
		}
		text, rep, isErr := rawCall(t, f.session, "undo_run", map[string]any{"run_id": run, "dry_run": false, "confirmation_token": dry["confirmation_token"]})
		noLeak(t, "the run's undo", text, secrets)
		if isErr || rep["status"] != "undone" || !slices.Equal(idsOf(rep["undone"]), []string{rule1}) {
			t.Fatalf("undo_run = %s, want the create undone", text)
		}
		if _, ok := f.objs.get("rule:1"); ok || f.status(rule1) != ledger.Undone {
			t.Fatalf("rule:1 after the run's undo: present=%v, %s", ok, f.status(rule1))
		}
		text, _, _ = rawCall(t, f.session, "get_run", map[string]any{"run_id": run})
		noLeak(t, "get_run", text, secrets)
		for _, id := range []string{funnel1, funnel2} {
			if f.status(id) != ledger.Applied {
				t.Fatalf("B's change %s: %s, want applied", id, f.status(id))
			}
		}
	})
}

// TestRunDeps_SameScopeDependentHoldsBackRunUndoAndUndoChange proves that
// a kept applied change of the same scope that depends on a resource a
// run created keeps it: the dry run and the real undo keep the create,
// naming the dependent change; undo_change of the create is refused (the
// agent's with the reason, the Guard's as ErrDependency), writes nothing
// and leaves the undo token unspent, so that once the dependent change is
// undone the same token undoes the create.
//
// Verified against apply.go, undoChange: with the hold check of its
// closure
//
//	if err != nil || reason == "" {
//
// made always true (… || true), so that no dependency refuses the claim,
// undo_change removes the rule the funnel uses and the test fails.
func TestRunDeps_SameScopeDependentHoldsBackRunUndoAndUndoChange(t *testing.T) {
	onEachBackend(t, func(t *testing.T, kit backendKit) {
		f := newPlanFixtureOn(t, kit, func(o *changeset.Options) { o.NoSessionRuns = true })
		ctx := context.Background()
		run := f.startRun("Rule")
		rule, ruleTok := doTok(t, f.fixture, f.session, run, "create_obj", map[string]any{"name": "rule:1"})
		funnel, funnelTok := doTok(t, f.fixture, f.session, "", "create_obj", map[string]any{"name": "funnel:1", "uses": "rule:1"})

		dry := f.dryRun(run)
		if len(idsOf(dry["will_undo"])) != 0 || !slices.Equal(idsOf(dry["skipped"]), []string{rule}) {
			t.Fatalf("dry run: will_undo %v, skipped %v; want the create kept", idsOf(dry["will_undo"]), idsOf(dry["skipped"]))
		}
		if r := entryOf(t, dry["skipped"], rule)["reason"].(string); !strings.Contains(r, funnel) || !strings.Contains(r, "rule:1") || !strings.Contains(r, "outside the run") {
			t.Fatalf("dry run reason = %q, want it to name the dependent change and the resource", r)
		}
		rep := undoNothing(t, f.session, run, dry)
		if len(idsOf(rep["undone"])) != 0 || rep["status"] != "open" {
			t.Fatalf("undo_run = %v, want nothing undone, the run still open", rep)
		}
		if r := entryOf(t, rep["skipped"], rule)["reason"].(string); !strings.Contains(r, funnel) {
			t.Fatalf("undo_run reason = %q, want it to name %s", r, funnel)
		}
		if _, ok := f.objs.get("rule:1"); !ok || f.status(rule) != ledger.Applied {
			t.Fatalf("the rule the funnel uses after the run's undo: present=%v, %s", ok, f.status(rule))
		}

		history, err := f.guard.Ledger().History(ctx, ledger.HistoryFilter{ChangeID: rule})
		if err != nil {
			t.Fatal(err)
		}
		msg := mustFail(t, f.session, "undo_change", map[string]any{"change_id": rule, "undo_token": ruleTok}, funnel)
		if !strings.Contains(msg, "rule:1") || !strings.Contains(msg, "not spent") {
			t.Fatalf("undo_change refusal = %q, want the resource and that the token was not spent", msg)
		}
		if _, err := f.guard.Undo(ctx, rule, ruleTok); !errors.Is(err, changeset.ErrDependency) {
			t.Fatalf("Guard.Undo = %v, want ErrDependency", err)
		}
		if _, ok := f.objs.get("rule:1"); !ok || f.status(rule) != ledger.Applied {
			t.Fatalf("a refused undo wrote: present=%v, %s", ok, f.status(rule))
		}
		if after, err := f.guard.Ledger().History(ctx, ledger.HistoryFilter{ChangeID: rule}); err != nil || len(after) != len(history) {
			t.Fatalf("history of the create grew from %d to %d entries (%v)", len(history), len(after), err)
		}

		mustCall(t, f.session, "undo_change", map[string]any{"change_id": funnel, "undo_token": funnelTok})
		if out := mustCall(t, f.session, "undo_change", map[string]any{"change_id": rule, "undo_token": ruleTok}); out["status"] != "undone" {
			t.Fatalf("undo_change with the unspent token = %v", out)
		}
		if _, ok := f.objs.get("rule:1"); ok || f.status(rule) != ledger.Undone {
			t.Fatalf("rule:1 after its undo: present=%v, %s", ok, f.status(rule))
		}
	})
}

// TestRunDeps_PersonsEditBetweenPlanAndExecutionKeepsOlderChange proves
// the intermediate-value case on the execution path: the run sets a
// rollout 10→50, then 50→100, and the dry run plans both undos; right
// when the real undo checks the newer change, a person sets the rollout
// back to 50. The newer change is kept (changed since the review) and so
// is the older one, although the rollout now equals its "after": the
// rollout stays 50, not 10.
//
// Verified against internal/undoplan/rules.go, Pass.Precheck: with the
// case
//
//	case p.keptBy(s) != "":
//
// dropped, the execution undoes the older change to 10 and the test
// fails.
func TestRunDeps_PersonsEditBetweenPlanAndExecutionKeepsOlderChange(t *testing.T) {
	onEachBackend(t, func(t *testing.T, kit backendKit) {
		f := newRunFixtureOn(t, kit)
		w := &watch{}
		registerWatchedSet(f.guard, f.store, w)
		f.store.set("rollout", "10")
		run := f.startRun("Rollout")
		c1 := f.do(run, "watched_set", map[string]any{"key": "rollout", "value": "50"})
		c2 := f.do(run, "watched_set", map[string]any{"key": "rollout", "value": "100"})

		w.reset(0, nil)
		dry := f.dryRun(run)
		planReads := w.count()
		if !slices.Equal(idsOf(dry["will_undo"]), []string{c2, c1}) || planReads == 0 {
			t.Fatalf("dry run: will_undo %v (%d reads); want both, newest first", idsOf(dry["will_undo"]), planReads)
		}

		// The real undo plans again (planReads reads); the next read is
		// the execution's check of c2, right before its inverse.
		w.reset(planReads+1, func() { f.store.set("rollout", "50") })
		rep := f.undoRun(run, dry["confirmation_token"])
		if w.count() <= planReads {
			t.Fatalf("the execution did not check the rollout again (%d reads, the plan makes %d)", w.count(), planReads)
		}
		if len(idsOf(rep["undone"])) != 0 || !slices.Equal(idsOf(rep["skipped"]), []string{c2, c1}) {
			t.Fatalf("undo_run: undone %v, skipped %v; want both kept", idsOf(rep["undone"]), idsOf(rep["skipped"]))
		}
		if r := entryOf(t, rep["skipped"], c2)["reason"].(string); !strings.Contains(r, "changed after the review") {
			t.Fatalf("reason for %s = %q, want changed since the review", c2, r)
		}
		if r := entryOf(t, rep["skipped"], c1)["reason"].(string); !strings.Contains(r, "change "+c2+" of the run") || !strings.Contains(r, "stays in place") {
			t.Fatalf("reason for %s = %q, want it to name %s, which stays in place", c1, r, c2)
		}
		if nco := idsFromStrings(rep["not_carried_out"]); !slices.Contains(nco, c1) || !slices.Contains(nco, c2) {
			t.Fatalf("not_carried_out = %v, want both", nco)
		}
		if got := f.store.get("rollout"); got != "50" {
			t.Fatalf("rollout = %q, want the person's 50", got)
		}
		if rep["status"] != "partially_undone" || f.status(c1) != ledger.Applied || f.status(c2) != ledger.Applied {
			t.Fatalf("status %v, changes %s and %s; want partially_undone, both applied", rep["status"], f.status(c1), f.status(c2))
		}
		mustBeStored(t, f.fixture, run, ledger.RunPartiallyUndone)
	})
}

// idsFromStrings reads a JSON list of strings.
func idsFromStrings(list any) []string {
	l, _ := list.([]any)
	var out []string
	for _, e := range l {
		out = append(out, e.(string))
	}
	return out
}

// rowStore holds rows "row:<key>" of two fields: "value", which the
// operations below write, and "note", which only people write.
type rowStore struct{ *objects }

func newRowStore() rowStore {
	return rowStore{&objects{m: map[string]map[string]any{
		"row:a": {"value": "1", "note": "first"},
		"row:b": {"value": "2", "note": "second"},
		"row:c": {"value": "3", "note": "third"},
	}}}
}

// state is what Observe reports of a row: the row, or nil when absent.
func (s rowStore) state(key string) any {
	if v, ok := s.get("row:" + key); ok {
		return v
	}
	return nil
}

// set writes one field of a row (a new map each time) and returns what
// it held.
func (s rowStore) set(key, field, value string) string {
	s.mu.Lock()
	defer s.mu.Unlock()
	old := s.m["row:"+key]
	row := maps.Clone(old)
	if row == nil {
		row = map[string]any{}
	}
	prev, _ := row[field].(string)
	row[field] = value
	s.m["row:"+key] = row
	return prev
}

func (s rowStore) dump() string {
	s.mu.Lock()
	defer s.mu.Unlock()
	b, _ := json.Marshal(s.m)
	return string(b)
}

type manyIn struct {
	Values map[string]string `json:"values"`
}

type manyOut struct {
	Previous map[string]string `json:"previous"`
}

// registerRowOps registers:
//   - set_many: sets the value of several rows as one change, naming one
//     resource per row (Proposal.Resources) and observed as States;
//   - set_row: sets the value of one row (Resource "row:<key>");
//   - many_plain, many_object, many_both, many_dup: set_many with a
//     proposal the Guard must refuse (observed as a plain value, or as
//     one row's object; Resource and Resources both set; a resource named
//     twice).
func registerRowOps(g *changeset.Guard, rows rowStore) {
	states := func(p manyIn) changeset.States {
		st := changeset.States{}
		for k := range p.Values {
			st["row:"+k] = rows.state(k)
		}
		return st
	}
	proposal := func(in manyIn) *changeset.Proposal[manyIn] {
		keys := slices.Sorted(maps.Keys(in.Values))
		before, after := map[string]any{}, map[string]any{}
		var res []string
		for _, k := range keys {
			res = append(res, "row:"+k)
			before[k], after[k] = rows.state(k), map[string]any{"value": in.Values[k]}
			if r, ok := before[k].(map[string]any); ok {
				before[k] = map[string]any{"value": r["value"]}
			}
		}
		return &changeset.Proposal[manyIn]{Payload: in, Summary: "Set rows " + strings.Join(keys, ", "), Resources: res,
			Diff: changeset.DiffFields(before, after)}
	}
	apply := func(ctx context.Context, p manyIn) (manyOut, error) {
		prev := map[string]string{}
		for _, k := range slices.Sorted(maps.Keys(p.Values)) {
			prev[k] = rows.set(k, "value", p.Values[k])
		}
		return manyOut{Previous: prev}, nil
	}
	undo := func(ctx context.Context, p manyIn, r manyOut) error {
		for k, v := range r.Previous {
			rows.set(k, "value", v)
		}
		return nil
	}
	changeset.Register(g, &mcp.Tool{Name: "set_many"}, changeset.Operation[manyIn, manyIn, manyOut]{
		Preview: func(ctx context.Context, in manyIn) (*changeset.Proposal[manyIn], error) { return proposal(in), nil },
		Apply:   apply,
		Undo:    undo,
		Observe: func(ctx context.Context, p manyIn) (any, error) { return states(p), nil },
	})
	changeset.Register(g, &mcp.Tool{Name: "set_row"}, changeset.Operation[setIn, setIn, setOut]{
		Preview: func(ctx context.Context, in setIn) (*changeset.Proposal[setIn], error) {
			return &changeset.Proposal[setIn]{Payload: in, Summary: "Set row " + in.Key, Resource: "row:" + in.Key,
				Diff: changeset.DiffFields(map[string]any{"value": rows.state(in.Key)}, map[string]any{"value": in.Value})}, nil
		},
		Apply: func(ctx context.Context, p setIn) (setOut, error) {
			return setOut{Previous: rows.set(p.Key, "value", p.Value)}, nil
		},
		Undo:    func(ctx context.Context, p setIn, r setOut) error { rows.set(p.Key, "value", r.Previous); return nil },
		Observe: func(ctx context.Context, p setIn) (any, error) { return rows.state(p.Key), nil },
	})
	bad := map[string]func(*changeset.Proposal[manyIn]){
		"many_plain":  func(*changeset.Proposal[manyIn]) {},
		"many_object": func(*changeset.Proposal[manyIn]) {},
		"many_both":   func(p *changeset.Proposal[manyIn]) { p.Resource = "row:a" },
		"many_dup":    func(p *changeset.Proposal[manyIn]) { p.Resources = append(p.Resources, p.Resources[0]) },
	}
	for name, edit := range bad {
		changeset.Register(g, &mcp.Tool{Name: name}, changeset.Operation[manyIn, manyIn, manyOut]{
			Preview: func(ctx context.Context, in manyIn) (*changeset.Proposal[manyIn], error) {
				p := proposal(in)
				edit(p)
				return p, nil
			},
			Apply: apply,
			Undo:  undo,
			Observe: func(ctx context.Context, p manyIn) (any, error) {
				switch name {
				case "many_plain":
					return "10", nil // a plain value, not a States
				case "many_object":
					return rows.state("a"), nil // one row's state, an object but not a States
				}
				return states(p), nil
			},
		})
	}
}

// newRowFixtureOn is a run fixture with the row operations.
func newRowFixtureOn(t *testing.T, kit backendKit) (*runFixture, rowStore) {
	f := &runFixture{fixture: newFixtureOn(t, kit)}
	rows := newRowStore()
	registerRowOps(f.guard, rows)
	return f, rows
}

// TestRunDeps_MultiResourceChangeIsRestoredExactly proves that a change
// that names several resources is undone exactly, every row, by
// undo_change and by a run's undo, also when the run changes some of its
// rows again, by another change of several resources and by a change of
// one; and that the report names its resources in `resources`.
//
// Verified against internal/undoplan/resources.go, Split:
//
//	out[KeyOf(r)] = orNull(m[r])
//
// changed to out[KeyOf(r)] = state (every resource given the whole
// States): the older changes then never match the state the newer undos
// leave, the run's undo skips them and the test fails.
func TestRunDeps_MultiResourceChangeIsRestoredExactly(t *testing.T) {
	onEachBackend(t, func(t *testing.T, kit backendKit) {
		f, rows := newRowFixtureOn(t, kit)
		before := rows.dump()

		id, tok := doTok(t, f.fixture, f.session, "", "set_many", map[string]any{"values": map[string]any{"a": "10", "b": "20", "c": "30"}})
		if rows.dump() == before {
			t.Fatal("set_many wrote nothing")
		}
		mustCall(t, f.session, "undo_change", map[string]any{"change_id": id, "undo_token": tok})
		if got := rows.dump(); got != before {
			t.Fatalf("rows after undo_change:\n%s\nwant:\n%s", got, before)
		}

		run := f.startRun("Rows")
		m1 := f.do(run, "set_many", map[string]any{"values": map[string]any{"a": "10", "b": "20", "c": "30"}})
		m2 := f.do(run, "set_many", map[string]any{"values": map[string]any{"a": "11", "b": "21"}})
		s1 := f.do(run, "set_row", map[string]any{"key": "a", "value": "12"})
		dry := f.dryRun(run)
		if !slices.Equal(idsOf(dry["will_undo"]), []string{s1, m2, m1}) {
			t.Fatalf("dry run: will_undo %v, skipped %v; want all three", idsOf(dry["will_undo"]), dry["skipped"])
		}
		step := entryOf(t, dry["will_undo"], m1)
		if res, _ := step["resources"].([]any); len(res) != 3 || res[0] != "row:a" || res[2] != "row:c" || step["resource"] != nil {
			t.Fatalf("will_undo entry of %s = %v, want resources row:a, row:b, row:c and no resource", m1, step)
		}
		rep := f.undoRun(run, dry["confirmation_token"])
		if rep["status"] != "undone" || !slices.Equal(idsOf(rep["undone"]), []string{s1, m2, m1}) {
			t.Fatalf("undo_run = %v, want all three undone", rep)
		}
		if got := rows.dump(); got != before {
			t.Fatalf("rows after the run's undo:\n%s\nwant:\n%s", got, before)
		}
	})
}

// TestRunDeps_MultiResourceChangeWithOneEditedRowIsKeptWhole proves that
// when a person edits one field of one row that a change of several rows
// wrote, the run's undo keeps that change whole (no row is restored), its
// skip entry names all its resources in `resources` and none in
// `resource`, its drift names only the edited row and only the edited
// field, and an older change of the run to another of its rows is kept
// too.
//
// Verified against internal/undoplan/rules.go, Pass.Check:
//
//	for _, k := range s.Keys {
//
// changed to range s.Keys[:1] (only the first resource compared): the
// edit of row:b goes unseen, the dry run plans the change's undo and the
// test fails.
func TestRunDeps_MultiResourceChangeWithOneEditedRowIsKeptWhole(t *testing.T) {
	onEachBackend(t, func(t *testing.T, kit backendKit) {
		f, rows := newRowFixtureOn(t, kit)
		run := f.startRun("Rows")
		s0 := f.do(run, "set_row", map[string]any{"key": "a", "value": "5"})
		m1 := f.do(run, "set_many", map[string]any{"values": map[string]any{"a": "10", "b": "20", "c": "30"}})
		rows.set("b", "value", "edited") // a person's edit of one row
		want := rows.dump()

		check := func(what string, rep map[string]any) {
			t.Helper()
			if len(idsOf(rep["will_undo"])) != 0 || len(idsOf(rep["undone"])) != 0 || !slices.Equal(idsOf(rep["skipped"]), []string{m1, s0}) {
				t.Fatalf("%s: will_undo %v, undone %v, skipped %v; want both kept", what, idsOf(rep["will_undo"]), idsOf(rep["undone"]), idsOf(rep["skipped"]))
			}
			e := entryOf(t, rep["skipped"], m1)
			if res, _ := e["resources"].([]any); len(res) != 3 || res[0] != "row:a" || res[1] != "row:b" || res[2] != "row:c" || e["resource"] != "" {
				t.Fatalf("%s: skip entry of %s = %v, want resources row:a, row:b, row:c and resource empty", what, m1, e)
			}
			drift, _ := e["drift"].([]any)
			if len(drift) != 1 {
				t.Fatalf("%s: drift = %v, want one entry", what, e["drift"])
			}
			if d := drift[0].(map[string]any); d["resource"] != "row:b" || d["field"] != "value" || d["expected"] != "20" || d["found"] != "edited" {
				t.Fatalf("%s: drift = %v, want row:b's value, 20 → edited", what, d)
			}
			if r := entryOf(t, rep["skipped"], s0)["reason"].(string); !strings.Contains(r, "change "+m1+" of the run") || !strings.Contains(r, "stays in place") {
				t.Fatalf("%s: reason for %s = %q, want it to name %s", what, s0, r, m1)
			}
		}
		dry := f.dryRun(run)
		check("dry run", dry)
		rep := undoNothing(t, f.session, run, dry)
		check("undo_run", rep)
		if rep["status"] != "open" || f.status(m1) != ledger.Applied || f.status(s0) != ledger.Applied {
			t.Fatalf("status %v, %s, %s; want open (nothing to undo), both applied", rep["status"], f.status(m1), f.status(s0))
		}
		if got := rows.dump(); got != want {
			t.Fatalf("rows after the run's undo:\n%s\nwant them untouched:\n%s", got, want)
		}
	})
}

// errChain is the text of err and of every error it wraps.
func errChain(err error) string {
	var b strings.Builder
	for e := err; e != nil; e = errors.Unwrap(e) {
		b.WriteString(e.Error())
		b.WriteString("\n")
	}
	return b.String()
}

// TestRunDeps_MultiResourceProposalsThatCannotBeCheckedAreRefused proves
// that a preview of several resources is refused, with nothing stored,
// when its Observe returns a plain value instead of a changeset.States
// (the error says so) or one resource's object (the error names the
// resource missing from it), when the proposal sets both Resource and
// Resources, and when it names a resource twice.
//
// Verified against preview.go, previewStep:
//
//	err = checkStates(p.resources, state)
//
// removed: the preview observed as a plain value is stored and the test
// fails.
func TestRunDeps_MultiResourceProposalsThatCannotBeCheckedAreRefused(t *testing.T) {
	onEachBackend(t, func(t *testing.T, kit backendKit) {
		f, rows := newRowFixtureOn(t, kit)
		ctx := context.Background()
		before := rows.dump()
		in := manyIn{Values: map[string]string{"a": "10", "b": "20"}}
		for _, c := range []struct{ op, want string }{
			{"many_plain", "changeset.States"},
			{"many_object", `the observed States has no state for resource "row:a"`},
			{"many_both", "Resource or Resources, not both"},
			{"many_dup", `"row:a" twice`},
		} {
			p, err := f.guard.Preview(ctx, c.op, in)
			if err == nil {
				t.Fatalf("%s: preview stored %s, want a refusal", c.op, p.ChangeID)
			}
			if !strings.Contains(errChain(err), c.want) {
				t.Fatalf("%s: refusal %q does not say %q", c.op, errChain(err), c.want)
			}
			mustFail(t, f.session, "preview_"+c.op, map[string]any{"values": map[string]any{"a": "10"}}, "preview of "+c.op+" failed")
		}
		if all, err := f.guard.Ledger().Changes(ctx, ledger.ChangeFilter{}); err != nil || len(all) != 0 {
			t.Fatalf("the refused previews stored %d changes (%v)", len(all), err)
		}
		if rows.dump() != before {
			t.Fatal("a refused preview wrote")
		}
	})
}

// TestRunDeps_DependentUndoneByTheSameRunDoesNotHoldBack proves that a
// change of the run that depends on a resource the run created does not
// hold back the create's undo when the same undo removes it first: both
// are undone, newest first.
//
// Verified against internal/runundo/hold.go, Engine.Hold:
//
//	if d.ID == c.ID || undoing[d.ID] || d.ScopeHash != c.ScopeHash {
//
// without "undoing[d.ID] ||", the funnel the run undoes holds the rule
// back and the test fails.
func TestRunDeps_DependentUndoneByTheSameRunDoesNotHoldBack(t *testing.T) {
	onEachBackend(t, func(t *testing.T, kit backendKit) {
		f := newPlanFixtureOn(t, kit)
		run := f.startRun("Funnel")
		rule := f.do(run, "create_obj", map[string]any{"name": "rule:1"})
		funnel := f.do(run, "create_obj", map[string]any{"name": "funnel:1", "uses": "rule:1"})

		dry := f.dryRun(run)
		if !slices.Equal(idsOf(dry["will_undo"]), []string{funnel, rule}) || len(idsOf(dry["skipped"])) != 0 {
			t.Fatalf("dry run: will_undo %v, skipped %v; want both undone, newest first", idsOf(dry["will_undo"]), dry["skipped"])
		}
		rep := f.undoRun(run, dry["confirmation_token"])
		if rep["status"] != "undone" || !slices.Equal(idsOf(rep["undone"]), []string{funnel, rule}) {
			t.Fatalf("undo_run = %v, want both undone, newest first", rep)
		}
		for _, name := range []string{"rule:1", "funnel:1"} {
			if _, ok := f.objs.get(name); ok {
				t.Fatalf("%s is still there", name)
			}
		}
		if f.status(rule) != ledger.Undone || f.status(funnel) != ledger.Undone {
			t.Fatalf("statuses %s, %s; want both undone", f.status(rule), f.status(funnel))
		}
	})
}
