package changeset_test

import (
	"context"
	"encoding/json"
	"fmt"
	"maps"
	"slices"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	changeset "github.com/mcp-changeset/changeset-go"
	"github.com/mcp-changeset/changeset-go/ledger"
	"github.com/modelcontextprotocol/go-sdk/mcp"
)

// docs is a store of documents with IDs, to test runs of creates, renames
// and deletes. IDs are reserved at preview from a counter that only grows.
type docs struct {
	mu     sync.Mutex
	next   int
	m      map[int]doc
	writes atomic.Int64 // every Apply and Undo that wrote
}

type doc struct {
	ID      int    `json:"id"`
	Title   string `json:"title"`
	Created string `json:"created"`
}

func (d *docs) get(id int) (doc, bool) {
	d.mu.Lock()
	defer d.mu.Unlock()
	v, ok := d.m[id]
	return v, ok
}

func (d *docs) put(v doc) {
	d.mu.Lock()
	defer d.mu.Unlock()
	d.writes.Add(1)
	d.m[v.ID] = v
}

func (d *docs) del(id int) {
	d.mu.Lock()
	defer d.mu.Unlock()
	d.writes.Add(1)
	delete(d.m, id)
}

// dump is the whole store as bytes, for byte-for-byte comparisons.
func (d *docs) dump() string {
	d.mu.Lock()
	defer d.mu.Unlock()
	var b strings.Builder
	for _, id := range slices.Sorted(maps.Keys(d.m)) {
		j, _ := json.Marshal(d.m[id])
		b.Write(j)
		b.WriteByte('\n')
	}
	return b.String()
}

type docIn struct {
	ID    int    `json:"id,omitempty"`
	Title string `json:"title,omitempty"`
}

// registerDocOps registers create_doc, rename_doc and delete_doc, each with
// undo and an Observe of the one document it touches, and lossy_rename,
// whose proposal warns that its undo is not exact.
func registerDocOps(g *changeset.Guard, d *docs) {
	observe := func(ctx context.Context, p docIn) (any, error) {
		if v, ok := d.get(p.ID); ok {
			return v, nil
		}
		return nil, nil
	}
	proposal := func(p docIn, before, after any, summary string, warnings ...string) *changeset.Proposal[docIn] {
		return &changeset.Proposal[docIn]{Payload: p, Summary: summary, Resource: "doc:" + strconv.Itoa(p.ID), Warnings: warnings,
			Diff: []changeset.DiffEntry{{Field: "title", Before: before, After: after}}}
	}
	changeset.Register(g, &mcp.Tool{Name: "create_doc"}, changeset.Operation[docIn, docIn, doc]{
		Preview: func(ctx context.Context, in docIn) (*changeset.Proposal[docIn], error) {
			d.mu.Lock()
			d.next++
			in.ID = d.next
			d.mu.Unlock()
			return proposal(in, nil, in.Title, "create "+in.Title), nil
		},
		Apply: func(ctx context.Context, p docIn) (doc, error) {
			v := doc{ID: p.ID, Title: p.Title, Created: fmt.Sprintf("t%d", p.ID)}
			d.put(v)
			return v, nil
		},
		Undo:    func(ctx context.Context, p docIn, r doc) error { d.del(p.ID); return nil },
		Observe: observe,
	})
	rename := func(warnings ...string) changeset.Operation[docIn, docIn, doc] {
		return changeset.Operation[docIn, docIn, doc]{
			Preview: func(ctx context.Context, in docIn) (*changeset.Proposal[docIn], error) {
				v, ok := d.get(in.ID)
				if !ok {
					return nil, changeset.Refuse("no doc %d", in.ID)
				}
				return proposal(in, v.Title, in.Title, "rename "+v.Title, warnings...), nil
			},
			Apply: func(ctx context.Context, p docIn) (doc, error) {
				v, _ := d.get(p.ID)
				old := v
				v.Title = p.Title
				d.put(v)
				return old, nil
			},
			Undo:    func(ctx context.Context, p docIn, old doc) error { d.put(old); return nil },
			Observe: observe,
		}
	}
	changeset.Register(g, &mcp.Tool{Name: "rename_doc"}, rename())
	changeset.Register(g, &mcp.Tool{Name: "lossy_rename"}, rename("the rename history before this change cannot be restored"))
	changeset.Register(g, &mcp.Tool{Name: "delete_doc"}, changeset.Operation[docIn, docIn, doc]{
		Preview: func(ctx context.Context, in docIn) (*changeset.Proposal[docIn], error) {
			v, ok := d.get(in.ID)
			if !ok {
				return nil, changeset.Refuse("no doc %d", in.ID)
			}
			return proposal(in, v.Title, nil, "delete "+v.Title), nil
		},
		Apply: func(ctx context.Context, p docIn) (doc, error) {
			v, _ := d.get(p.ID)
			d.del(p.ID)
			return v, nil
		},
		Undo:    func(ctx context.Context, p docIn, old doc) error { d.put(old); return nil },
		Observe: observe,
	})
	changeset.Register(g, &mcp.Tool{Name: "forget_doc"}, changeset.Operation[docIn, docIn, doc]{ // no undo
		Preview: func(ctx context.Context, in docIn) (*changeset.Proposal[docIn], error) {
			return proposal(in, nil, nil, "forget"), nil
		},
		Apply:   func(ctx context.Context, p docIn) (doc, error) { d.del(p.ID); return doc{}, nil },
		Observe: observe,
	})
}

// runFixture is a fixture with the doc operations and two existing docs.
type runFixture struct {
	*fixture
	docs *docs
}

// newRunFixtureOn builds a run fixture on a ledger of kit's backend.
func newRunFixtureOn(t *testing.T, kit backendKit) *runFixture {
	f := newFixtureOn(t, kit)
	d := &docs{next: 2, m: map[int]doc{1: {1, "alpha", "t1"}, 2: {2, "beta", "t2"}}}
	registerDocOps(f.guard, d)
	return &runFixture{fixture: f, docs: d}
}

// do previews and applies one change in the run and returns its ID.
func (f *runFixture) do(runID, op string, args map[string]any) string {
	f.t.Helper()
	f.clock.Advance(time.Second) // one step of an agent's task after another
	args["run_id"] = runID
	out := mustCall(f.t, f.session, "preview_"+op, args)
	if out["run_id"] != runID {
		f.t.Fatalf("preview did not join the run: %v", out)
	}
	id := out["change_id"].(string)
	f.apply(id, out["confirmation_token"].(string))
	return id
}

func (f *runFixture) startRun(label string) string {
	f.t.Helper()
	out := mustCall(f.t, f.session, "start_run", map[string]any{"label": label})
	if out["status"] != "open" || out["label"] != label {
		f.t.Fatalf("start_run = %v", out)
	}
	return out["run_id"].(string)
}

func (f *runFixture) dryRun(runID string) map[string]any {
	f.t.Helper()
	return mustCall(f.t, f.session, "undo_run", map[string]any{"run_id": runID})
}

// undoRun calls the real undo with token, the dry run's confirmation
// token; nil (the dry run had nothing to undo and gave none) sends none.
func (f *runFixture) undoRun(runID string, token any) map[string]any {
	f.t.Helper()
	args := map[string]any{"run_id": runID, "dry_run": false}
	if token != nil {
		args["confirmation_token"] = token
	}
	return mustCall(f.t, f.session, "undo_run", args)
}

func ids(list any) []string {
	var out []string
	for _, e := range list.([]any) {
		out = append(out, e.(map[string]any)["change_id"].(string))
	}
	return out
}

func TestRun_UndoRestoresStateByteForByteNewestFirst(t *testing.T) {
	t.Parallel()
	onEachBackend(t, func(t *testing.T, kit backendKit) {
		f := newRunFixtureOn(t, kit)
		before := f.docs.dump()
		run := f.startRun("Reorganise docs")
		c1 := f.do(run, "create_doc", map[string]any{"title": "gamma"})           // doc 3
		c2 := f.do(run, "rename_doc", map[string]any{"id": 3, "title": "gamma2"}) // rename what the run created
		c3 := f.do(run, "rename_doc", map[string]any{"id": 1, "title": "ALPHA"})
		c4 := f.do(run, "delete_doc", map[string]any{"id": 2})
		if f.docs.dump() == before {
			t.Fatal("the run changed nothing")
		}

		detail := mustCall(t, f.session, "get_run", map[string]any{"run_id": run})
		if got := ids(detail["changes"]); !slices.Equal(got, []string{c4, c3, c2, c1}) {
			t.Fatalf("get_run changes = %v, want newest first", got)
		}

		dry := f.dryRun(run)
		if dry["dry_run"] != true || dry["confirmation_token"] == nil || !strings.Contains(dry["next_step"].(string), "Nothing has been changed") {
			t.Fatalf("dry run = %v", dry)
		}
		if got := ids(dry["will_undo"]); !slices.Equal(got, []string{c4, c3, c2, c1}) {
			t.Fatalf("will_undo = %v, want newest first", got)
		}
		if len(dry["skipped"].([]any)) != 0 || len(dry["irreversible"].([]any)) != 0 {
			t.Fatalf("dry run skipped or irreversible: %v", dry)
		}

		rep := f.undoRun(run, dry["confirmation_token"])
		if rep["dry_run"] != false || rep["status"] != "undone" || rep["undone_by"] != "agent:test-client" {
			t.Fatalf("undo = %v", rep)
		}
		if got := ids(rep["undone"]); !slices.Equal(got, []string{c4, c3, c2, c1}) {
			t.Fatalf("undone = %v", got)
		}
		if after := f.docs.dump(); after != before {
			t.Fatalf("state after undo:\n%s\nwant:\n%s", after, before)
		}
		for _, id := range []string{c1, c2, c3, c4} {
			if f.status(id) != ledger.Undone {
				t.Errorf("%s: %s", id, f.status(id))
			}
		}
		if v, _ := f.docs.get(2); v.Created != "t2" {
			t.Fatalf("deleted doc restored with another identity: %+v", v)
		}
	})
}

// On a clock that does not move between steps (a coarse clock, or a fast
// agent), every change of a run is applied in the same instant: the run's
// undo must still go newest first, in the order the applies committed, or
// undoing an older rename first would find the newer title and refuse.
func TestRun_UndoOnAFrozenClockFollowsTheCommitOrder(t *testing.T) {
	t.Parallel()
	onEachBackend(t, func(t *testing.T, kit backendKit) {
		f := newRunFixtureOn(t, kit)
		before := f.docs.dump()
		run := f.startRun("Many renames in one instant")
		var applied []string
		for i := range 8 {
			args := map[string]any{"id": 1, "title": fmt.Sprintf("title %d", i), "run_id": run}
			out := mustCall(t, f.session, "preview_rename_doc", args) // no clock.Advance: one instant
			id := out["change_id"].(string)
			f.apply(id, out["confirmation_token"].(string))
			applied = append(applied, id)
		}
		slices.Reverse(applied)
		dry := f.dryRun(run)
		if got := ids(dry["will_undo"]); !slices.Equal(got, applied) {
			t.Fatalf("will_undo = %v, want the reverse of the applies %v", got, applied)
		}
		rep := f.undoRun(run, dry["confirmation_token"])
		if rep["status"] != "undone" || !slices.Equal(ids(rep["undone"]), applied) {
			t.Fatalf("undo = %v", rep)
		}
		if after := f.docs.dump(); after != before {
			t.Fatalf("state after undo:\n%s\nwant:\n%s", after, before)
		}
	})
}

func TestRun_ChangeEditedOutsideIsSkippedAndOlderChangesToItToo(t *testing.T) {
	t.Parallel()
	onEachBackend(t, func(t *testing.T, kit backendKit) {
		f := newRunFixtureOn(t, kit)
		run := f.startRun("Titles")
		r1 := f.do(run, "rename_doc", map[string]any{"id": 1, "title": "one"})
		r2 := f.do(run, "rename_doc", map[string]any{"id": 1, "title": "two"})
		r3 := f.do(run, "rename_doc", map[string]any{"id": 2, "title": "B"})
		f.docs.put(doc{ID: 1, Title: "a person's title", Created: "t1"}) // a person's later edit

		dry := f.dryRun(run)
		if got := ids(dry["will_undo"]); !slices.Equal(got, []string{r3}) {
			t.Fatalf("will_undo = %v", got)
		}
		skipped := dry["skipped"].([]any)
		if got := ids(skipped); !slices.Equal(got, []string{r2, r1}) {
			t.Fatalf("skipped = %v", got)
		}
		if reason := skipped[0].(map[string]any)["reason"].(string); !strings.Contains(reason, "changed after") {
			t.Fatalf("reason = %q", reason)
		}
		rep := f.undoRun(run, dry["confirmation_token"])
		if rep["status"] != "partially_undone" || !slices.Equal(ids(rep["skipped"]), []string{r2, r1}) {
			t.Fatalf("undo = %v", rep)
		}
		if v, _ := f.docs.get(1); v.Title != "a person's title" {
			t.Fatalf("the person's edit was destroyed: %+v", v)
		}
		if v, _ := f.docs.get(2); v.Title != "beta" {
			t.Fatalf("doc 2 not undone: %+v", v)
		}
		if f.status(r1) != ledger.Applied || f.status(r2) != ledger.Applied || f.status(r3) != ledger.Undone {
			t.Fatal("statuses wrong after a partial undo")
		}
	})
}

func TestRun_CreatedThenDeletedNeedsNoWrite(t *testing.T) {
	t.Parallel()
	onEachBackend(t, func(t *testing.T, kit backendKit) {
		f := newRunFixtureOn(t, kit)
		run := f.startRun("Scratch")
		c1 := f.do(run, "create_doc", map[string]any{"title": "tmp"})
		c2 := f.do(run, "rename_doc", map[string]any{"id": 3, "title": "tmp2"})
		c3 := f.do(run, "delete_doc", map[string]any{"id": 3})
		c4 := f.do(run, "rename_doc", map[string]any{"id": 1, "title": "x"})

		dry := f.dryRun(run)
		if got := ids(dry["no_net_change"]); !slices.Equal(got, []string{c3, c2, c1}) {
			t.Fatalf("no_net_change = %v", got)
		}
		writes := f.docs.writes.Load()
		rep := f.undoRun(run, dry["confirmation_token"])
		if got := f.docs.writes.Load() - writes; got != 1 {
			t.Fatalf("undo wrote %d times, want 1 (only the rename of doc 1)", got)
		}
		if rep["status"] != "undone" || !slices.Equal(ids(rep["undone"]), []string{c4}) {
			t.Fatalf("undo = %v", rep)
		}
		for _, id := range []string{c1, c2, c3} {
			rec, _ := f.guard.Record(context.Background(), id)
			if rec.Status != ledger.Undone || !strings.Contains(rec.Note, "no net change") {
				t.Errorf("%s: %s %q", id, rec.Status, rec.Note)
			}
		}
	})
}

func TestRun_DryRunWritesNothingAndItsTokenIsSingleUseAndPlanBound(t *testing.T) {
	t.Parallel()
	onEachBackend(t, func(t *testing.T, kit backendKit) {
		f := newRunFixtureOn(t, kit)
		run := f.startRun("Dry")
		c1 := f.do(run, "rename_doc", map[string]any{"id": 1, "title": "one"})
		c2 := f.do(run, "rename_doc", map[string]any{"id": 2, "title": "two"})

		state, writes := f.docs.dump(), f.docs.writes.Load()
		dry1 := f.dryRun(run)
		dry2 := f.dryRun(run)
		if f.docs.dump() != state || f.docs.writes.Load() != writes || f.status(c1) != ledger.Applied || f.status(c2) != ledger.Applied {
			t.Fatal("a dry run wrote")
		}
		// Only the newest dry run's token counts; a wrong or missing one is
		// refused and spends nothing.
		for _, tok := range []any{dry1["confirmation_token"], "confirm_AAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAA", ""} {
			mustFail(t, f.session, "undo_run", map[string]any{"run_id": run, "dry_run": false, "confirmation_token": tok}, "confirmation")
		}
		// The plan changes: a person edits doc 2. The token no longer fits.
		f.docs.put(doc{ID: 2, Title: "edited", Created: "t2"})
		mustFail(t, f.session, "undo_run", map[string]any{"run_id": run, "dry_run": false, "confirmation_token": dry2["confirmation_token"]}, "changed since the dry run")
		if f.status(c1) != ledger.Applied {
			t.Fatal("a refused undo wrote")
		}
		dry3 := f.dryRun(run)
		rep := f.undoRun(run, dry3["confirmation_token"])
		if !slices.Equal(ids(rep["undone"]), []string{c1}) || !slices.Equal(ids(rep["skipped"]), []string{c2}) {
			t.Fatalf("undo = %v", rep)
		}
		// Asking again returns the stored report, whatever the token, and
		// writes nothing.
		writes = f.docs.writes.Load()
		again := f.undoRun(run, "confirm_AAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAA")
		againDry := f.dryRun(run)
		for _, r := range []map[string]any{again, againDry} {
			note, _ := r["replay_note"].(string)
			if r["replayed"] != true || !strings.Contains(note, "already undone") || !strings.Contains(note, "agent:test-client") ||
				r["next_step"] != nil || r["confirmation_token"] != nil {
				t.Fatalf("asking again: %v\nwant the stored report marked replayed, with a note of when and by whom", r)
			}
			delete(r, "replayed")
			delete(r, "replay_note")
		}
		if fmt.Sprint(again) != fmt.Sprint(rep) || fmt.Sprint(againDry) != fmt.Sprint(rep) {
			t.Fatalf("asking again: %v\nwant the stored %v", again, rep)
		}
		if f.docs.writes.Load() != writes {
			t.Fatal("asking again wrote")
		}
		detail := mustCall(t, f.session, "get_run", map[string]any{"run_id": run})
		if detail["status"] != "partially_undone" || detail["report"] == nil {
			t.Fatalf("get_run = %v", detail)
		}
	})
}

func TestRun_RefusesNewChangesOnceUndoneAndUnknownRuns(t *testing.T) {
	t.Parallel()
	onEachBackend(t, func(t *testing.T, kit backendKit) {
		f := newRunFixtureOn(t, kit)
		run := f.startRun("Closed")
		f.do(run, "rename_doc", map[string]any{"id": 1, "title": "one"})
		pending := mustCall(t, f.session, "preview_rename_doc", map[string]any{"id": 2, "title": "late", "run_id": run})
		f.undoRun(run, f.dryRun(run)["confirmation_token"])

		mustFail(t, f.session, "preview_rename_doc", map[string]any{"id": 2, "title": "x", "run_id": run}, "cannot take new changes (status: undone)")
		mustFail(t, f.session, "apply_change", map[string]any{"change_id": pending["change_id"], "confirmation_token": pending["confirmation_token"]}, "its run "+run+" is undone")
		mustFail(t, f.session, "preview_rename_doc", map[string]any{"id": 2, "title": "x", "run_id": "run_0123456789abcdef0123"}, "not found")
		mustFail(t, f.session, "get_run", map[string]any{"run_id": "run_0123456789abcdef0123"}, "not found")
		mustFail(t, f.session, "undo_run", map[string]any{"run_id": "nope"}, "not found")
	})
}

func TestRun_OtherScopeCannotSeeJoinOrUndo(t *testing.T) {
	t.Parallel()
	onEachBackend(t, func(t *testing.T, kit backendKit) {
		f := newRunFixtureOn(t, kit)
		run := f.startRun("Mine")
		f.do(run, "rename_doc", map[string]any{"id": 1, "title": "one"})

		server := mcp.NewServer(&mcp.Implementation{Name: "other", Version: "1"}, nil)
		other, err := changeset.New(server, changeset.Options{Ledger: kit.Reopen(t, f.guard.Ledger()), WriteMode: changeset.WriteGuarded, Scope: "someone-else", Clock: f.clock.Now})
		if err != nil {
			t.Fatal(err)
		}
		defer other.Close()
		registerDocOps(other, f.docs)
		cs := connect(t, server)
		mustFail(t, cs, "get_run", map[string]any{"run_id": run}, "not found")
		mustFail(t, cs, "undo_run", map[string]any{"run_id": run}, "not found")
		mustFail(t, cs, "preview_rename_doc", map[string]any{"id": 2, "title": "x", "run_id": run}, "not found")
		if out := mustCall(t, cs, "list_runs", map[string]any{}); len(out["runs"].([]any)) != 0 {
			t.Fatalf("list_runs shows another scope's runs: %v", out)
		}
		if out := mustCall(t, f.session, "list_runs", map[string]any{"status": "open"}); len(out["runs"].([]any)) != 1 {
			t.Fatalf("list_runs = %v", out)
		}
	})
}

func TestRun_ReportsWhatCannotBeUndoneExactly(t *testing.T) {
	t.Parallel()
	onEachBackend(t, func(t *testing.T, kit backendKit) {
		f := newRunFixtureOn(t, kit)
		run := f.startRun("Lossy")
		lossy := f.do(run, "lossy_rename", map[string]any{"id": 1, "title": "one"})
		forget := f.do(run, "forget_doc", map[string]any{"id": 2})
		dry := f.dryRun(run)
		irr := dry["irreversible"].([]any)
		if len(irr) != 2 {
			t.Fatalf("irreversible = %v", irr)
		}
		reasons := map[string]string{}
		for _, e := range irr {
			m := e.(map[string]any)
			reasons[m["change_id"].(string)] = m["reason"].(string)
		}
		if !strings.Contains(reasons[lossy], "cannot be restored") || !strings.Contains(reasons[forget], "no undo") {
			t.Fatalf("reasons = %v", reasons)
		}
		if !slices.Equal(ids(dry["will_undo"]), []string{lossy}) {
			t.Fatalf("will_undo = %v", dry["will_undo"])
		}
		rep := f.undoRun(run, dry["confirmation_token"])
		if rep["status"] != "partially_undone" {
			t.Fatalf("status = %v", rep["status"])
		}
	})
}

func TestRun_RefusedWhileAChangeIsInFlight(t *testing.T) {
	t.Parallel()
	onEachBackend(t, func(t *testing.T, kit backendKit) {
		f := newRunFixtureOn(t, kit)
		run := f.startRun("Busy")
		id := f.do(run, "rename_doc", map[string]any{"id": 1, "title": "one"})
		// Simulate a process that died mid-undo: the row stays undoing.
		l := f.guard.Ledger()
		err := l.WithTx(context.Background(), func(tx *ledger.Tx) error {
			c, err := tx.Change(id)
			if err != nil {
				return err
			}
			c.Status = ledger.Undoing
			return tx.UpdateChange(c, ledger.Applied)
		})
		if err != nil {
			t.Fatal(err)
		}
		mustFail(t, f.session, "undo_run", map[string]any{"run_id": run}, "is undoing")
	})
}

func TestUndoRun_PersonNeedsNoTokenAndIsRecorded(t *testing.T) {
	t.Parallel()
	onEachBackend(t, func(t *testing.T, kit backendKit) {
		f := newRunFixtureOn(t, kit)
		before := f.docs.dump()
		run := f.startRun("Person")
		c1 := f.do(run, "rename_doc", map[string]any{"id": 1, "title": "one"})
		ctx := context.Background()
		dry, err := f.guard.UndoRun(ctx, run, true, changeset.Person("ana"))
		if err != nil || dry.ConfirmationToken != "" || len(dry.WillUndo) != 1 {
			t.Fatalf("person's dry run = %+v, %v", dry, err)
		}
		rep, err := f.guard.UndoRun(ctx, run, false, changeset.Person("ana"))
		if err != nil || rep.Status != "undone" || rep.UndoneBy != "person:ana" {
			t.Fatalf("person's undo = %+v, %v", rep, err)
		}
		rec, _ := f.guard.Record(ctx, c1)
		if rec.UndoneBy != "person:ana" || f.docs.dump() != before {
			t.Fatalf("undone by %q", rec.UndoneBy)
		}
		// The agent now gets the same stored report.
		agent := f.undoRun(run, "")
		if agent["undone_by"] != "person:ana" {
			t.Fatalf("agent sees %v", agent)
		}
	})
}

func TestRun_InterruptedUndoIsReconciledByAnOperator(t *testing.T) {
	t.Parallel()
	onEachBackend(t, func(t *testing.T, kit backendKit) {
		f := newRunFixtureOn(t, kit)
		run := f.startRun("Crashed")
		f.do(run, "rename_doc", map[string]any{"id": 1, "title": "one"})
		ctx := context.Background()
		l := f.guard.Ledger()
		// A process claimed the run's undo and died.
		err := l.WithTx(ctx, func(tx *ledger.Tx) error {
			r, err := tx.Run(run)
			if err != nil {
				return err
			}
			r.Status = ledger.RunUndoing
			return tx.UpdateRun(r, ledger.RunOpen)
		})
		if err != nil {
			t.Fatal(err)
		}
		mustFail(t, f.session, "undo_run", map[string]any{"run_id": run}, "being undone")
		if _, err := l.ReconcileRun(ctx, run, "", "operator:ops"); err == nil {
			t.Fatal("reconciled without a note")
		}
		r, err := l.ReconcileRun(ctx, run, "checked: the rename was not undone", "operator:ops")
		if err != nil || r.Status != ledger.RunPartiallyUndone {
			t.Fatalf("ReconcileRun = %+v, %v", r, err)
		}
		rep := mustCall(t, f.session, "undo_run", map[string]any{"run_id": run})
		if rep["status"] != "partially_undone" || !strings.Contains(rep["note"].(string), "checked: the rename") {
			t.Fatalf("report after reconcile = %v", rep)
		}
		if _, err := l.ReconcileRun(ctx, run, "again", "operator:ops"); err == nil {
			t.Fatal("reconciled twice")
		}
	})
}
