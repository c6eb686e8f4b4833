package changeset_test

import (
	"context"
	"database/sql"
	"encoding/json"
	"errors"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"unicode/utf8"

	changeset "github.com/mcp-changeset/changeset-go"
	"github.com/mcp-changeset/changeset-go/ledger"
	"github.com/modelcontextprotocol/go-sdk/mcp"
)

// The tests in this file cover the failure paths of a run's undo: what
// keeps a change in place, what happens when the world moves between the
// plan and its execution, when the final report cannot be stored, when an
// operation's error text is not valid UTF-8, when a transactional undo
// fails halfway, and when a change has no "after" snapshot to check
// against. Each runs on every ledger backend (SQLite files in temporary
// directories; PostgreSQL when internal/pgtest can start it).
//
// Each test names, in the comment above it, the line of production code
// it was verified against: with that line removed (or negated), the test
// fails; with it in place, the test passes.

// record reads a change's full ledger row, failing the test on any error.
func (f *fixture) record(id string) *ledger.Change {
	f.t.Helper()
	c, err := f.guard.Record(context.Background(), id)
	if err != nil {
		f.t.Fatalf("Record(%s): %v", id, err)
	}
	return c
}

// storedRun reads a run's ledger row, failing the test on any error.
func (f *fixture) storedRun(id string) *ledger.Run {
	f.t.Helper()
	r, err := f.guard.Ledger().Run(context.Background(), id)
	if err != nil {
		f.t.Fatalf("Run(%s): %v", id, err)
	}
	return r
}

// lastHistory returns the newest history entry of a change.
func (f *fixture) lastHistory(id string) ledger.HistoryEntry {
	f.t.Helper()
	h, err := f.guard.Ledger().History(context.Background(), ledger.HistoryFilter{ChangeID: id})
	if err != nil || len(h) == 0 {
		f.t.Fatalf("History(%s) = %v, %v", id, h, err)
	}
	return h[len(h)-1]
}

// noteIDs returns the change IDs of report notes.
func noteIDs(notes []changeset.RunNote) []string {
	var out []string
	for _, n := range notes {
		out = append(out, n.ChangeID)
	}
	return out
}

// noteOf returns the note of change id in notes, failing the test if it
// is not there.
func noteOf(t *testing.T, notes []changeset.RunNote, id string) changeset.RunNote {
	t.Helper()
	for _, n := range notes {
		if n.ChangeID == id {
			return n
		}
	}
	t.Fatalf("change %s is not among %+v", id, notes)
	return changeset.RunNote{}
}

// mustBeStored checks that the run's final status and report are in the
// ledger: status want, and a report that decodes to that status.
func mustBeStored(t *testing.T, f *fixture, runID string, want ledger.RunStatus) {
	t.Helper()
	r := f.storedRun(runID)
	if r.Status != want {
		t.Fatalf("stored run status = %s, want %s", r.Status, want)
	}
	var rep changeset.RunReport
	if err := json.Unmarshal(r.Report, &rep); err != nil || rep.Status != string(want) {
		t.Fatalf("stored report = %s (%v), want one with status %s", r.Report, err, want)
	}
}

// TestRunFail_UndoFailedChangeKeepsItsResourceFromClosingAsNoNetChange
// proves that a change whose undo failed earlier, and which therefore
// stays in place (undo_failed), stops the older changes of its resource
// from being closed as "no net change", even when the resource reads as
// the run found it: the older change stays applied and is reported as
// skipped, and the run ends partially_undone.
//
// Scenario: the run creates doc 3 and deletes it. A person recreates
// doc 3, so the single undo of the delete is refused (state changed) and
// the delete stays undo_failed; the person then removes doc 3 again. The
// resource's oldest before (absent), newest after (absent) and current
// state (absent) now agree.
//
// Verified against internal/undoplan/rules.go, NoNet:
//
//	if steps[i].C.Status != ledger.Applied || len(steps[i].Keys) != 1 {
//
// (with the status check dropped).
//
// With that check removed, the create is closed as no net change (status
// undone, listed in no_net_change) and the test fails.
func TestRunFail_UndoFailedChangeKeepsItsResourceFromClosingAsNoNetChange(t *testing.T) {
	onEachBackend(t, func(t *testing.T, kit backendKit) {
		f := newRunFixtureOn(t, kit)
		ctx := context.Background()
		run := f.startRun("Scratch doc")
		created := f.do(run, "create_doc", map[string]any{"title": "tmp"}) // doc 3
		deleted := f.do(run, "delete_doc", map[string]any{"id": 3})

		// The undo of the delete fails and stays in place.
		f.docs.put(doc{ID: 3, Title: "a person's doc", Created: "by hand"})
		if _, err := f.guard.UndoAs(ctx, deleted, changeset.Person("ana")); !errors.Is(err, changeset.ErrStateChanged) {
			t.Fatalf("single undo of the delete = %v, want a state-changed refusal", err)
		}
		if c := f.record(deleted); c.Status != ledger.UndoFailed || c.Failure != ledger.FailureStateChanged {
			t.Fatalf("delete after its refused undo: %s, failure %q", c.Status, c.Failure)
		}
		f.docs.del(3) // back to where the run found it

		dry, err := f.guard.UndoRun(ctx, run, true, changeset.Person("ana"))
		if err != nil {
			t.Fatal(err)
		}
		if len(dry.NoNetChange) != 0 || !slices.Equal(noteIDs(dry.Skipped), []string{deleted, created}) {
			t.Fatalf("dry run: no_net_change %v, skipped %v; want both changes skipped, none closed", stepIDs(dry.NoNetChange), noteIDs(dry.Skipped))
		}

		rep, err := f.guard.UndoRunReviewed(ctx, run, dry.Planned(), changeset.Person("ana"))
		if err != nil {
			t.Fatal(err)
		}
		if len(rep.NoNetChange) != 0 || len(rep.Undone) != 0 {
			t.Fatalf("undo closed or undid something: no_net_change %v, undone %v", stepIDs(rep.NoNetChange), stepIDs(rep.Undone))
		}
		if got := noteOf(t, rep.Skipped, deleted).Reason; !strings.Contains(got, "refused earlier because its resource had changed") {
			t.Fatalf("reason for the failed delete = %q", got)
		}
		if got := noteOf(t, rep.Skipped, created).Reason; !strings.Contains(got, "change "+deleted+" of the run") || !strings.Contains(got, "stays in place") {
			t.Fatalf("reason for the create = %q, want it to name the delete that stays in place", got)
		}
		if rep.Status != string(ledger.RunPartiallyUndone) {
			t.Fatalf("run status = %s, want partially_undone", rep.Status)
		}
		if f.status(created) != ledger.Applied || f.status(deleted) != ledger.UndoFailed {
			t.Fatalf("statuses after the undo: create %s, delete %s; want applied and undo_failed", f.status(created), f.status(deleted))
		}
		if _, ok := f.docs.get(3); ok {
			t.Fatal("doc 3 came back")
		}
		mustBeStored(t, f.fixture, run, ledger.RunPartiallyUndone)
	})
}

// watch counts the reads of an operation's Observe and runs fn, once, at
// the read numbered at (counted from the last reset).
type watch struct {
	mu        sync.Mutex
	reads, at int
	fn        func()
}

func (w *watch) read() {
	w.mu.Lock()
	w.reads++
	fire := w.fn != nil && w.reads == w.at
	fn := w.fn
	if fire {
		w.fn = nil
	}
	w.mu.Unlock()
	if fire {
		fn()
	}
}

// reset zeroes the count and arms fn for read number at (0: none).
func (w *watch) reset(at int, fn func()) {
	w.mu.Lock()
	defer w.mu.Unlock()
	w.reads, w.at, w.fn = 0, at, fn
}

func (w *watch) count() int {
	w.mu.Lock()
	defer w.mu.Unlock()
	return w.reads
}

// registerWatchedSet registers "watched_set": set of the test store, with
// Resource "watched:<key>", whose Observe reports every read to w.
func registerWatchedSet(g *changeset.Guard, s *kv, w *watch) {
	changeset.Register(g, &mcp.Tool{Name: "watched_set"}, changeset.Operation[setIn, setIn, setOut]{
		Preview: func(ctx context.Context, in setIn) (*changeset.Proposal[setIn], error) {
			return &changeset.Proposal[setIn]{Payload: in, Summary: "Set " + in.Key + " to " + in.Value, Resource: "watched:" + in.Key,
				Diff: changeset.DiffFields(map[string]any{in.Key: s.get(in.Key)}, map[string]any{in.Key: in.Value})}, nil
		},
		Apply: func(ctx context.Context, p setIn) (setOut, error) {
			return setOut{Previous: s.set(p.Key, p.Value)}, nil
		},
		Undo: func(ctx context.Context, p setIn, r setOut) error { s.set(p.Key, r.Previous); return nil },
		Observe: func(ctx context.Context, p setIn) (any, error) {
			w.read()
			return s.get(p.Key), nil
		},
	})
}

// TestRunFail_NoNetChangeGroupThatMovedBeforeItsCloseIsKept proves that a
// group of changes the plan found to have no net effect is kept, whole,
// when its resource moved between the plan and the execution's re-check:
// both changes stay applied and are reported skipped (and not carried
// out) with the drift, the person's edit survives, the other change of
// the run is still undone, and the run is partially_undone, not undone.
//
// The move happens in process: a dry run counts how many times planning
// reads the resource (N); the real undo plans the same way, and the read
// after those N (the execution's re-check in closeNoNetGroups) first
// edits the store, as a person would at that moment.
//
// Verified against internal/runundo/execute.go, closeNoNetGroups:
//
//	if err != nil || string(cur) != string(first.NetState) {
//
// With it reduced to "if err != nil {", the group is closed over the
// person's edit (both undone, status undone) and the test fails.
func TestRunFail_NoNetChangeGroupThatMovedBeforeItsCloseIsKept(t *testing.T) {
	onEachBackend(t, func(t *testing.T, kit backendKit) {
		f := newRunFixtureOn(t, kit)
		ctx := context.Background()
		w := &watch{}
		registerWatchedSet(f.guard, f.store, w)
		run := f.startRun("Theme round trip")
		dark := f.do(run, "watched_set", map[string]any{"key": "theme", "value": "dark"})
		light := f.do(run, "watched_set", map[string]any{"key": "theme", "value": "light"}) // back to where it was
		lang := f.do(run, "set", map[string]any{"key": "language", "value": "fr"})

		w.reset(0, nil)
		dry, err := f.guard.UndoRun(ctx, run, true, changeset.Person("ana"))
		if err != nil {
			t.Fatal(err)
		}
		planReads := w.count()
		if !slices.Equal(stepIDs(dry.NoNetChange), []string{light, dark}) || !slices.Equal(stepIDs(dry.WillUndo), []string{lang}) || planReads == 0 {
			t.Fatalf("dry run: no_net_change %v, will_undo %v, %d reads; want the theme pair closed and the language undone",
				stepIDs(dry.NoNetChange), stepIDs(dry.WillUndo), planReads)
		}

		w.reset(planReads+1, func() { f.store.set("theme", "blue") }) // a person's edit, right at the re-check
		rep, err := f.guard.UndoRunReviewed(ctx, run, dry.Planned(), changeset.Person("ana"))
		if err != nil {
			t.Fatal(err)
		}
		if w.count() <= planReads {
			t.Fatalf("the execution did not read the resource again (%d reads, the plan makes %d)", w.count(), planReads)
		}
		if len(rep.NoNetChange) != 0 {
			t.Fatalf("no_net_change = %v, want the moved group kept", stepIDs(rep.NoNetChange))
		}
		for _, id := range []string{light, dark} {
			n := noteOf(t, rep.Skipped, id)
			if !strings.Contains(n.Reason, "changed after the review") || len(n.Drift) != 1 || string(n.Drift[0].Found) != `"blue"` {
				t.Fatalf("skipped %s: reason %q, drift %+v; want the change since the review, found \"blue\"", id, n.Reason, n.Drift)
			}
			if f.status(id) != ledger.Applied {
				t.Fatalf("%s: %s, want applied", id, f.status(id))
			}
		}
		if nco := rep.NotCarriedOut; !slices.Contains(nco, light) || !slices.Contains(nco, dark) {
			t.Fatalf("not_carried_out = %v, want both changes of the group", nco)
		}
		if !slices.Equal(stepIDs(rep.Undone), []string{lang}) || f.status(lang) != ledger.Undone || f.store.get("language") != "en" {
			t.Fatalf("the rest of the run: undone %v, %s, language %q", stepIDs(rep.Undone), f.status(lang), f.store.get("language"))
		}
		if f.store.get("theme") != "blue" {
			t.Fatalf("theme = %q, want the person's blue", f.store.get("theme"))
		}
		if rep.Status != string(ledger.RunPartiallyUndone) {
			t.Fatalf("run status = %s, want partially_undone", rep.Status)
		}
		mustBeStored(t, f.fixture, run, ledger.RunPartiallyUndone)
	})
}

// refuseFinalReport installs, in the ledger's own database, a trigger
// that makes every write of a run's final status (undone or
// partially_undone) fail, as a full or failing disk would at that
// moment; the function it returns removes the trigger.
func refuseFinalReport(t *testing.T, kit backendKit, db *sql.DB) func() {
	t.Helper()
	var install, remove []string
	switch kit.Name {
	case "sqlite":
		install = []string{`CREATE TRIGGER refuse_final_report BEFORE UPDATE ON runs
			WHEN NEW.status IN ('undone', 'partially_undone')
			BEGIN SELECT RAISE(ABORT, 'the final report cannot be stored'); END`}
		remove = []string{`DROP TRIGGER refuse_final_report`}
	case "postgres":
		install = []string{`CREATE FUNCTION refuse_final_report() RETURNS trigger LANGUAGE plpgsql AS $$
			BEGIN RAISE EXCEPTION 'the final report cannot be stored'; END $$`,
			`CREATE TRIGGER refuse_final_report BEFORE UPDATE ON runs FOR EACH ROW
			WHEN (NEW.status IN ('undone', 'partially_undone')) EXECUTE FUNCTION refuse_final_report()`}
		remove = []string{`DROP TRIGGER refuse_final_report ON runs`, `DROP FUNCTION refuse_final_report()`}
	default:
		t.Fatalf("no trigger for backend %s", kit.Name)
	}
	exec := func(stmts []string) {
		for _, s := range stmts {
			if _, err := db.Exec(s); err != nil {
				t.Fatalf("%s: %v", s, err)
			}
		}
	}
	exec(install)
	return func() { exec(remove) }
}

// TestRunFail_RunWhoseReportCannotBeStoredIsReleased proves that when the
// last write of a run's undo (its final status and report) fails, the
// undo returns the error and the run is released: its status is open
// again, with nobody recorded as undoing it, never left undoing. A retry
// then plans afresh and finishes it.
//
// Verified against runundo.go, executeRun, the release after the final
// write:
//
//	if err != nil {
//		g.releaseRun(ctx, r.ID, err)   // ← this line
//		return nil, err
//	}
//
// Without it the run stays undoing, refuses the retry as busy, and the
// test fails.
func TestRunFail_RunWhoseReportCannotBeStoredIsReleased(t *testing.T) {
	onEachBackend(t, func(t *testing.T, kit backendKit) {
		f := newRunFixtureOn(t, kit)
		ctx := context.Background()
		run := f.startRun("Rename")
		c := f.do(run, "rename_doc", map[string]any{"id": 1, "title": "one"})
		allow := refuseFinalReport(t, kit, f.guard.Ledger().DB())

		rep, err := f.guard.UndoRun(ctx, run, false, changeset.Person("ana"))
		if err == nil {
			t.Fatalf("undo with a report that cannot be stored = %+v, want an error", rep)
		}
		r := f.storedRun(run)
		if r.Status != ledger.RunOpen || r.UndoneBy != "" || r.Report != nil {
			t.Fatalf("run after the failed final write: status %s, undone by %q, report %s; want it open again", r.Status, r.UndoneBy, r.Report)
		}
		// The change's own undo had already run, and is recorded.
		if f.status(c) != ledger.Undone {
			t.Fatalf("change %s: %s, want undone", c, f.status(c))
		}
		h, err := f.guard.Ledger().History(ctx, ledger.HistoryFilter{RunID: run})
		if err != nil {
			t.Fatal(err)
		}
		var moves []string
		for _, e := range h {
			if e.ChangeID == "" {
				moves = append(moves, e.From+"→"+e.To)
			}
		}
		if !slices.Equal(moves, []string{"→open", "open→undoing", "undoing→open"}) {
			t.Fatalf("the run's history = %v, want it claimed and released", moves)
		}

		allow()
		rep, err = f.guard.UndoRun(ctx, run, false, changeset.Person("ana"))
		if err != nil || rep.Status != string(ledger.RunUndone) {
			t.Fatalf("retry = %+v, %v; want the run undone", rep, err)
		}
		mustBeStored(t, f.fixture, run, ledger.RunUndone)
	})
}

// registerGarbled registers "garbled": set of the test store whose Undo
// fails with err (Resource "garbled:<key>", no Observe), and
// "garbled_tx", a transactional operation that writes nothing and whose Undo fails
// with err.
func registerGarbled(g *changeset.Guard, s *kv, err error) {
	preview := func(ctx context.Context, in setIn) (*changeset.Proposal[setIn], error) {
		return &changeset.Proposal[setIn]{Payload: in, Summary: "Set " + in.Key, Resource: "garbled:" + in.Key}, nil
	}
	changeset.Register(g, &mcp.Tool{Name: "garbled"}, changeset.Operation[setIn, setIn, setOut]{
		AllowEmptyDiff: true, // its diff is not what the test is about
		Preview:        preview,
		Apply: func(ctx context.Context, p setIn) (setOut, error) {
			return setOut{Previous: s.set(p.Key, p.Value)}, nil
		},
		Undo: func(ctx context.Context, p setIn, r setOut) error { return err },
	})
	changeset.Register(g, &mcp.Tool{Name: "garbled_tx"}, changeset.Operation[setIn, setIn, setOut]{
		AllowEmptyDiff: true, // its diff is not what the test is about
		Preview:        preview,
		ApplyTx:        func(ctx context.Context, tx *sql.Tx, p setIn) (setOut, error) { return setOut{}, nil },
		UndoTx:         func(ctx context.Context, tx *sql.Tx, p setIn, r setOut) error { return err },
	})
}

// invalidUTF8 holds bytes that are not UTF-8 (and a NUL, which PostgreSQL
// refuses in text too).
const invalidUTF8 = "the remote said \xff\xfe\x00 and hung up"

// TestRunFail_InvalidUTF8InAnUndoErrorCannotFailTheRun proves that the
// text of an operation's undo error that is not valid UTF-8 is cleaned
// before it is stored, so that it cannot fail the run after its other
// changes were undone: the failing change is undo_failed with its stored
// error text valid UTF-8, the other change of the run is undone, the
// report lists the failure with a valid reason, and the run ends
// partially_undone with its report stored.
//
// The cases:
//   - "error": an ordinary operation's Undo returns a plain error. The
//     agent (and the report) sees its type name; the ledger keeps its full
//     text, the bad bytes replaced. Verified against
//     internal/pipeline/finish.go, markFailed:
//     c.ErrorType, c.Error = f.Type, StorableText(cause.Error())
//     With StorableText removed the stored text keeps the bad bytes
//     (SQLite) or cannot be stored at all (PostgreSQL) and the test fails;
//     and against errors.go, agentText's last line, return typeName(err):
//     with err.Error() instead the report cannot be stored and the test
//     fails.
//   - "error_tx": the same from a transactional operation's Undo, recorded by
//     the pipeline's runHost.RecordFailure (which stores the report's reason, built from
//     agentText, not the full text).
//   - "refusal" and "refusal_tx": the Undo returns changeset.Refuse, whose
//     message is meant for the agent: agentText cleans it, so the report
//     stores, and the pipeline's runHost.RecordFailure stores it cleaned
//     (verified against errors.go agentText's pipeline.StorableText and
//     internal/pipeline/finish.go markFailed's StorableText(cause.Error())).
func TestRunFail_InvalidUTF8InAnUndoErrorCannotFailTheRun(t *testing.T) {
	cases := []struct {
		name, op string
		err      error
		fullText bool // the ledger keeps the operation's own text
	}{
		{name: "error", op: "garbled", err: errors.New(invalidUTF8), fullText: true},
		{name: "error_tx", op: "garbled_tx", err: errors.New(invalidUTF8)},
		{name: "refusal", op: "garbled", err: changeset.Refuse("%s", invalidUTF8), fullText: true},
		{name: "refusal_tx", op: "garbled_tx", err: changeset.Refuse("%s", invalidUTF8), fullText: true},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			onEachBackend(t, func(t *testing.T, kit backendKit) {
				f := newRunFixtureOn(t, kit)
				ctx := context.Background()
				registerGarbled(f.guard, f.store, tc.err)
				run := f.startRun("Garbled")
				ok := f.do(run, "rename_doc", map[string]any{"id": 1, "title": "one"})
				bad := f.do(run, tc.op, map[string]any{"key": "theme", "value": "dark"})

				rep, err := f.guard.UndoRun(ctx, run, false, changeset.Person("ana"))
				if err != nil {
					t.Fatalf("undo failed as a whole: %v; want the run partially undone", err)
				}
				if rep.Status != string(ledger.RunPartiallyUndone) || !slices.Equal(stepIDs(rep.Undone), []string{ok}) {
					t.Fatalf("report: status %s, undone %v; want partially_undone with %s undone", rep.Status, stepIDs(rep.Undone), ok)
				}
				if reason := noteOf(t, rep.Failed, bad).Reason; !utf8.ValidString(reason) || !strings.HasPrefix(reason, "undo failed: ") {
					t.Fatalf("failed reason = %q, want valid UTF-8", reason)
				}
				if v, _ := f.docs.get(1); v.Title != "alpha" || f.status(ok) != ledger.Undone {
					t.Fatalf("the other change: %s, doc 1 %+v; want it undone", f.status(ok), v)
				}
				c := f.record(bad)
				if c.Status != ledger.UndoFailed || c.Failure != ledger.FailureError {
					t.Fatalf("failing change: %s, failure %q; want undo_failed, error", c.Status, c.Failure)
				}
				if !utf8.ValidString(c.Error) || strings.ContainsRune(c.Error, 0) {
					t.Fatalf("stored error text = %q, want valid UTF-8 without NUL", c.Error)
				}
				if tc.fullText && (!strings.Contains(c.Error, "the remote said \uFFFD") || !strings.Contains(c.Error, "and hung up")) {
					t.Fatalf("stored error text = %q, want the full text with the bad bytes replaced", c.Error)
				}
				mustBeStored(t, f.fixture, run, ledger.RunPartiallyUndone)
			})
		})
	}
}

// registerTxHalf registers "txhalf", a transactional operation on the kvt table of
// registerTxSet (which must run first) whose Undo writes "half-undone"
// and then fails.
func registerTxHalf(g *changeset.Guard) {
	read, write := kvtRead, kvtWrite
	changeset.Register(g, &mcp.Tool{Name: "txhalf"}, changeset.Operation[setIn, setIn, setOut]{
		Preview: func(ctx context.Context, in setIn) (*changeset.Proposal[setIn], error) {
			return &changeset.Proposal[setIn]{Payload: in, Summary: "Set " + in.Key, Resource: "kvt:" + in.Key,
				Diff: changeset.DiffFields(nil, map[string]any{in.Key: in.Value})}, nil
		},
		ApplyTx: func(ctx context.Context, tx *sql.Tx, p setIn) (setOut, error) {
			prev, err := read(ctx, tx, p.Key)
			if err != nil {
				return setOut{}, err
			}
			return setOut{Previous: prev}, write(ctx, tx, p.Key, p.Value)
		},
		UndoTx: func(ctx context.Context, tx *sql.Tx, p setIn, r setOut) error {
			if err := write(ctx, tx, p.Key, "half-undone"); err != nil {
				return err
			}
			return errors.New("the second half of the undo failed")
		},
		ObserveTx: func(ctx context.Context, tx *sql.Tx, p setIn) (any, error) { return read(ctx, tx, p.Key) },
	})
}

// TestRunFail_TransactionalUndoThatWritesThenFailsRollsBackToItsSavepoint
// proves that a transactional operation's undo that writes and then fails inside a
// run's transaction rolls back to its own savepoint: its write is gone
// while the other transactional undo of the same transaction is kept;
// the change is recorded as failed (undo_failed, failure error, nothing
// written, and a history entry applied → undo_failed that says "error");
// the report lists it as failed and the run is partially_undone, not
// undone.
//
// Verified against internal/runundo/tx.go, Engine.undoIn:
//
//	_, _ = sql.ExecContext(ctx, "ROLLBACK TO SAVEPOINT changeset_step")
//
// (without it "half-undone" is committed) and internal/runundo/execute.go,
// execution.txSegment:
//
//	x.e.Host.RecordFailure(x.ctx, s.C, x.by, s.Failed)
//
// (without it the change stays applied with no history entry); either
// removal fails the test.
func TestRunFail_TransactionalUndoThatWritesThenFailsRollsBackToItsSavepoint(t *testing.T) {
	onEachBackend(t, func(t *testing.T, kit backendKit) {
		f := newRunFixtureOn(t, kit)
		ctx := context.Background()
		registerTxSet(t, f.guard)
		registerTxHalf(f.guard)
		if _, err := f.guard.Ledger().DB().Exec(`INSERT INTO kvt (k, v) VALUES ('a', '0')`); err != nil {
			t.Fatal(err)
		}
		run := f.startRun("Rows")
		good := f.do(run, "txset", map[string]any{"key": "a", "value": "1"})
		bad := f.do(run, "txhalf", map[string]any{"key": "b", "value": "2"})

		dry, err := f.guard.UndoRun(ctx, run, true, changeset.Person("ana"))
		if err != nil {
			t.Fatal(err)
		}
		if !slices.Equal(stepIDs(dry.WillUndo), []string{good}) || !slices.Equal(noteIDs(dry.Failed), []string{bad}) {
			t.Fatalf("dry run: will_undo %v, failed %v; the dry run really runs transactional undos", stepIDs(dry.WillUndo), noteIDs(dry.Failed))
		}
		if kvtValue(t, f.guard, "a") != "1" || kvtValue(t, f.guard, "b") != "2" || f.status(bad) != ledger.Applied {
			t.Fatal("the dry run wrote")
		}

		// The dry run's Planned lists what it will undo or close, not the
		// failure it foresaw, so the undo that tries the failing change
		// again is the one without a review (as the agent's token undo).
		rep, err := f.guard.UndoRun(ctx, run, false, changeset.Person("ana"))
		if err != nil {
			t.Fatal(err)
		}
		if got := kvtValue(t, f.guard, "b"); got != "2" {
			t.Fatalf("b = %q: the failed undo's write was not rolled back to its savepoint", got)
		}
		if got := kvtValue(t, f.guard, "a"); got != "0" || f.status(good) != ledger.Undone {
			t.Fatalf("a = %q, %s: the other undo of the transaction was lost", got, f.status(good))
		}
		if !slices.Equal(stepIDs(rep.Undone), []string{good}) {
			t.Fatalf("undone = %v", stepIDs(rep.Undone))
		}
		if n := noteOf(t, rep.Failed, bad); !strings.Contains(n.Reason, "undo failed") {
			t.Fatalf("failed reason = %q", n.Reason)
		}
		if rep.Status != string(ledger.RunPartiallyUndone) {
			t.Fatalf("run status = %s, want partially_undone", rep.Status)
		}
		c := f.record(bad)
		if c.Status != ledger.UndoFailed || c.Failure != ledger.FailureError || !c.NothingWritten || c.UndoneBy != changeset.Person("ana") {
			t.Fatalf("failed change: %s, failure %q, nothing written %v, by %q", c.Status, c.Failure, c.NothingWritten, c.UndoneBy)
		}
		if e := f.lastHistory(bad); e.From != string(ledger.Applied) || e.To != string(ledger.UndoFailed) || e.Note != string(ledger.FailureError) || e.By != changeset.Person("ana") || e.RunID != run {
			t.Fatalf("last history entry of the failed change = %+v", e)
		}
		mustBeStored(t, f.fixture, run, ledger.RunPartiallyUndone)
	})
}

// blind is a store operation whose Observe fails once right after each
// Apply, so that its changes are applied without an "after" snapshot.
type blind struct {
	armed atomic.Bool  // the next Observe fails
	undos atomic.Int64 // how many times its Undo ran
}

// registerBlindSet registers "blind_set": set of the test store, with
// Resource "blind:<key>", whose Observe fails right after an Apply.
func registerBlindSet(g *changeset.Guard, s *kv, b *blind) {
	changeset.Register(g, &mcp.Tool{Name: "blind_set"}, changeset.Operation[setIn, setIn, setOut]{
		Preview: func(ctx context.Context, in setIn) (*changeset.Proposal[setIn], error) {
			return &changeset.Proposal[setIn]{Payload: in, Summary: "Set " + in.Key, Resource: "blind:" + in.Key,
				Diff: changeset.DiffFields(map[string]any{in.Key: s.get(in.Key)}, map[string]any{in.Key: in.Value})}, nil
		},
		Apply: func(ctx context.Context, p setIn) (setOut, error) {
			prev := s.set(p.Key, p.Value)
			b.armed.Store(true)
			return setOut{Previous: prev}, nil
		},
		Undo: func(ctx context.Context, p setIn, r setOut) error {
			b.undos.Add(1)
			s.set(p.Key, r.Previous)
			return nil
		},
		Observe: func(ctx context.Context, p setIn) (any, error) {
			if b.armed.CompareAndSwap(true, false) {
				return nil, errors.New("the store did not answer")
			}
			return s.get(p.Key), nil
		},
	})
}

// TestRunFail_UndoWithoutAfterSnapshotIsRefused proves that a change
// applied without an "after" snapshot (its Observe failed right after the
// apply, so Change.After is nil) is never undone without a check, even
// when its resource still holds exactly what the apply wrote:
//   - the run's undo skips it, with the reason that no state was recorded
//     after it, and undoes the rest of the run (partially_undone);
//   - a single undo (Guard.Undo, as undo_change) is refused: its Undo
//     never runs, and the change is undo_failed with failure
//     state_changed, nothing written, and a history entry saying so.
//
// Verified, for the run, against internal/undoplan/rules.go, Precheck:
//
//	case s.Op.Observes && c.After == nil:
//
// Without it the change is still skipped (no state equals a missing
// snapshot), but for a reason that blames an edit outside the run, and
// the test fails on the reason. For the single undo, against apply.go,
// performUndo:
//
//	if c.After == nil || string(current) != string(c.After) {
//
// Removing only "c.After == nil ||" leaves the behaviour unchanged (an
// observed state is never empty, so it never equals a missing snapshot):
// that mutant is equivalent. Removing the whole check runs the Undo and
// fails the test.
func TestRunFail_UndoWithoutAfterSnapshotIsRefused(t *testing.T) {
	onEachBackend(t, func(t *testing.T, kit backendKit) {
		t.Run("run", func(t *testing.T) {
			f := newRunFixtureOn(t, kit)
			ctx := context.Background()
			b := &blind{}
			registerBlindSet(f.guard, f.store, b)
			run := f.startRun("Blind")
			x := f.do(run, "blind_set", map[string]any{"key": "theme", "value": "dark"})
			y := f.do(run, "set", map[string]any{"key": "language", "value": "fr"})
			if c := f.record(x); c.Status != ledger.Applied || c.After != nil || c.Before == nil {
				t.Fatalf("blind change: %s, before %s, after %s; want applied with no after snapshot", c.Status, c.Before, c.After)
			}

			rep, err := f.guard.UndoRun(ctx, run, false, changeset.Person("ana"))
			if err != nil {
				t.Fatal(err)
			}
			if got := noteOf(t, rep.Skipped, x).Reason; !strings.Contains(got, "no state was recorded after it was applied") {
				t.Fatalf("reason = %q, want that no state was recorded after the apply", got)
			}
			if !slices.Equal(stepIDs(rep.Undone), []string{y}) || rep.Status != string(ledger.RunPartiallyUndone) {
				t.Fatalf("report: undone %v, status %s", stepIDs(rep.Undone), rep.Status)
			}
			if b.undos.Load() != 0 || f.store.get("theme") != "dark" || f.status(x) != ledger.Applied {
				t.Fatalf("the blind change was undone: %d undos, theme %q, %s", b.undos.Load(), f.store.get("theme"), f.status(x))
			}
			if f.store.get("language") != "en" || f.status(y) != ledger.Undone {
				t.Fatalf("the other change: %s, language %q", f.status(y), f.store.get("language"))
			}
			mustBeStored(t, f.fixture, run, ledger.RunPartiallyUndone)
		})
		t.Run("single", func(t *testing.T) {
			f := newRunFixtureOn(t, kit)
			ctx := context.Background()
			b := &blind{}
			registerBlindSet(f.guard, f.store, b)
			id, token := f.preview("blind_set", "theme", "dark")
			undoToken := f.apply(id, token)
			if c := f.record(id); c.After != nil || undoToken == "" {
				t.Fatalf("after %s, undo token %q; want no after snapshot and a token", c.After, undoToken)
			}

			_, err := f.guard.Undo(ctx, id, undoToken)
			if !errors.Is(err, changeset.ErrStateChanged) {
				t.Fatalf("Undo = %v, want a state-changed refusal", err)
			}
			if b.undos.Load() != 0 || f.store.get("theme") != "dark" {
				t.Fatalf("the undo ran without a check: %d undos, theme %q", b.undos.Load(), f.store.get("theme"))
			}
			c := f.record(id)
			if c.Status != ledger.UndoFailed || c.Failure != ledger.FailureStateChanged || !c.NothingWritten {
				t.Fatalf("refused change: %s, failure %q, nothing written %v", c.Status, c.Failure, c.NothingWritten)
			}
			if e := f.lastHistory(id); e.From != string(ledger.Undoing) || e.To != string(ledger.UndoFailed) || e.Note != string(ledger.FailureStateChanged) {
				t.Fatalf("last history entry = %+v", e)
			}
		})
	})
}
