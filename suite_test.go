package changeset_test

import (
	"context"
	"crypto/rand"
	"encoding/json"
	"errors"
	"fmt"
	"net/url"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"testing"

	changeset "github.com/mcp-changeset/changeset-go"
	"github.com/mcp-changeset/changeset-go/internal/pgtest"
	"github.com/mcp-changeset/changeset-go/ledger"
	_ "github.com/mcp-changeset/changeset-go/ledger/postgres" // registers postgres:// targets
	_ "github.com/mcp-changeset/changeset-go/ledger/sqlite"
	"github.com/modelcontextprotocol/go-sdk/mcp"
)

// The Guard-level suite: the apply, undo, run, approval and tool tests are
// top-level tests named by area (TestApply_…, TestUndo_…, TestPreview_…,
// TestRun_…, TestRunPlan_…, TestSessionRun_…, TestApproval_…), and each
// runs once per ledger backend through onEachBackend, as subtests named
// after the backend ("TestApply_ReplayOfSpentTokenRefused/postgres"). So
// `go test -run TestApply` runs the apply tests on every backend, and
// `go test -run /sqlite` the whole suite on one. A test that must look at
// or meddle with a SQLite file stays on SQLite and uses newFixture.

// A backendKit is one ledger backend the suite runs on.
type backendKit struct {
	Name string
	// target returns where a new, empty ledger lives for t (a file path
	// or a postgres:// URL).
	target func(t *testing.T) string
}

// kits are the backends the suite runs on. Each starts its kit for the
// test t that runs a test's part on the backend.
var kits = []struct {
	name  string
	start func(t *testing.T) backendKit
}{
	{"sqlite", sqliteKit},
	{"postgres", postgresKit},
}

// sqliteKit gives each test a ledger file in its temporary directory.
func sqliteKit(*testing.T) backendKit {
	return backendKit{Name: "sqlite", target: func(t *testing.T) string {
		return filepath.Join(t.TempDir(), "ledger.db")
	}}
}

// postgresKit gives each test a ledger of its own, in a schema of its own
// (changeset_schema) of one database that the whole test process shares
// (sharedPostgres). A schema costs milliseconds where a database costs a
// third of a second, and the ledger is as isolated: its tables, meta and
// transactional operations' tables (through the search_path the schema sets) are the
// schema's. t is skipped when PostgreSQL is missing, or fails when
// CHANGESET_REQUIRE_POSTGRES is set, as pgtest.DSN decides.
func postgresKit(t *testing.T) backendKit {
	dsn := sharedPostgres(t)
	return backendKit{Name: "postgres", target: func(t *testing.T) string {
		u, err := url.Parse(dsn)
		if err != nil {
			t.Fatal(err)
		}
		q := u.Query()
		q.Set("changeset_schema", "test_"+strings.ToLower(rand.Text()[:16]))
		u.RawQuery = q.Encode()
		return u.String()
	}}
}

// onEachBackend runs fn once per ledger backend, as parallel subtests
// named after the backends.
func onEachBackend(t *testing.T, fn func(t *testing.T, kit backendKit)) {
	for _, k := range kits {
		t.Run(k.name, func(t *testing.T) {
			t.Parallel()
			fn(t, k.start(t))
		})
	}
}

// onEachBackendInTurn is onEachBackend for a test that cannot run in
// parallel (one that calls t.Setenv): the backends take turns.
func onEachBackendInTurn(t *testing.T, fn func(t *testing.T, kit backendKit)) {
	for _, k := range kits {
		t.Run(k.name, func(t *testing.T) {
			fn(t, k.start(t))
		})
	}
}

// Ledger returns a new, empty ledger on the kit's backend, closed when t
// ends.
func (k backendKit) Ledger(t *testing.T) *ledger.Ledger {
	t.Helper()
	target := k.target(t)
	l := openLedger(t, target, true)
	targets.Store(l, target) // a PostgreSQL Location hides credentials: keep the URL
	t.Cleanup(func() { targets.Delete(l) })
	return l
}

// Reopen opens a second handle on the ledger l that Ledger returned, as
// another process or replica sharing it would, and closes it when t ends.
func (k backendKit) Reopen(t *testing.T, l *ledger.Ledger) *ledger.Ledger {
	t.Helper()
	target, ok := targets.Load(l)
	if !ok {
		t.Fatal("Reopen of a ledger that backendKit.Ledger did not open")
	}
	return openLedger(t, target.(string), false)
}

// targets maps each ledger a kit opened to its target.
var targets sync.Map

// openLedger opens the ledger at target as applications do and closes it
// when t ends.
func openLedger(t *testing.T, target string, create bool) *ledger.Ledger {
	t.Helper()
	l, err := ledger.Open(context.Background(), target, ledger.OpenOptions{Create: create, Durability: testDurability()})
	if err != nil {
		t.Fatalf("open ledger: %v", err)
	}
	t.Cleanup(func() {
		if err := l.Close(); err != nil {
			t.Errorf("close ledger: %v", err)
		}
	})
	return l
}

// sharedPostgres returns the URL of the PostgreSQL database that every
// test's postgresKit shares, creating it for the first test that asks: one
// database per test would cost each suite test a third of a second.
// pgtest.DSN makes it for processTB, so that runTests drops it after the
// last test; its skip or failure repeats for every test that asks.
func sharedPostgres(t *testing.T) string {
	t.Helper()
	pg.once.Do(func() {
		defer func() {
			if r := recover(); r != nil {
				stop, ok := r.(processTBStop)
				if !ok {
					panic(r)
				}
				pg.stop = &stop
			}
		}()
		pg.dsn = pgtest.DSN(&pg.tb)
	})
	switch {
	case pg.stop == nil:
		return pg.dsn
	case pg.stop.skip:
		t.Skip(pg.stop.msg)
	default:
		t.Fatal(pg.stop.msg)
	}
	return ""
}

// pg is the database sharedPostgres made, or why it could not.
var pg struct {
	once sync.Once
	tb   processTB
	dsn  string
	stop *processTBStop
}

// processTB is the testing.TB that sharedPostgres hands pgtest.DSN, for a
// database that must outlive every test: it keeps the cleanups for
// runTests, and turns Fatalf and Skipf into a panic that sharedPostgres
// recovers. It implements only what pgtest.DSN calls; any other method is
// the nil embedded TB's and panics.
type processTB struct {
	testing.TB
	mu       sync.Mutex
	cleanups []func()
	errs     []string
}

// processTBStop is the panic of processTB's Fatalf and Skipf.
type processTBStop struct {
	skip bool
	msg  string
}

func (*processTB) Helper() {}

func (p *processTB) Cleanup(f func()) {
	p.mu.Lock()
	defer p.mu.Unlock()
	p.cleanups = append(p.cleanups, f)
}

func (p *processTB) Errorf(format string, args ...any) {
	p.mu.Lock()
	defer p.mu.Unlock()
	p.errs = append(p.errs, fmt.Sprintf(format, args...))
}

func (*processTB) Fatalf(format string, args ...any) {
	panic(processTBStop{msg: fmt.Sprintf(format, args...)})
}

func (*processTB) Skipf(format string, args ...any) {
	panic(processTBStop{skip: true, msg: fmt.Sprintf(format, args...)})
}

// finish runs p's cleanups, newest first as testing does, and reports
// whether none of them failed (printing the failures to stderr).
func (p *processTB) finish() bool {
	for i := len(p.cleanups) - 1; i >= 0; i-- {
		p.cleanups[i]()
	}
	for _, e := range p.errs {
		fmt.Fprintln(os.Stderr, e)
	}
	return len(p.errs) == 0
}

// runTests runs the package's tests, drops the shared PostgreSQL database,
// then stops the cluster that pgtest may have started. TestMain
// (process_test.go) calls it.
func runTests(m *testing.M) int {
	code := m.Run()
	if !pg.tb.finish() && code == 0 {
		code = 1
	}
	pgtest.Stop()
	return code
}

// The Racing cases send requests that race for one claim at the same
// moment, from two Guards on their own handles of one ledger, as two
// processes or replicas would. On SQLite the database's write lock orders
// them; on PostgreSQL the rows' locks do, so each backend must show that
// exactly one request wins.

func TestApply_RacingAppliesOfOneTokenApplyExactlyOnce(t *testing.T) {
	t.Parallel()
	onEachBackend(t, func(t *testing.T, kit backendKit) {
		f := newFixtureOn(t, kit)
		guards := []*changeset.Guard{f.guard, f.replica(kit), f.guard, f.replica(kit)}
		ctx := context.Background()
		const changes = 8
		var previews []*changeset.PreviewResult
		for i := range changes {
			p, err := f.guard.Preview(ctx, "set", setIn{Key: fmt.Sprint("k", i), Value: fmt.Sprint("v", i)})
			if err != nil {
				t.Fatal(err)
			}
			previews = append(previews, p)
		}
		var mu sync.Mutex
		wins := map[string]int{}
		var refusals []string
		var fns []func()
		for _, p := range previews {
			for _, g := range guards {
				fns = append(fns, func() {
					_, err := g.Apply(ctx, p.ChangeID, p.ConfirmationToken)
					mu.Lock()
					defer mu.Unlock()
					if err == nil {
						wins[p.ChangeID]++
					} else if !lostClaim(err.Error()) {
						refusals = append(refusals, err.Error())
					}
				})
			}
		}
		race(fns...)
		for _, r := range refusals {
			t.Errorf("a losing apply was refused with %q, want a lost claim", r)
		}
		for i, p := range previews {
			if wins[p.ChangeID] != 1 {
				t.Errorf("change %s: %d requests were told it applied", p.ChangeID, wins[p.ChangeID])
			}
			if f.status(p.ChangeID) != ledger.Applied || f.store.get(fmt.Sprint("k", i)) != fmt.Sprint("v", i) {
				t.Errorf("change %s: status %s, value %q", p.ChangeID, f.status(p.ChangeID), f.store.get(fmt.Sprint("k", i)))
			}
		}
		if n := f.store.applies.Load(); n != changes {
			t.Fatalf("%d applies for %d changes", n, changes)
		}
	})
}

func TestUndo_RacingUndosOfOneTokenUndoExactlyOnce(t *testing.T) {
	t.Parallel()
	onEachBackend(t, func(t *testing.T, kit backendKit) {
		f := newFixtureOn(t, kit)
		guards := []*changeset.Guard{f.guard, f.replica(kit), f.guard, f.replica(kit)}
		ctx := context.Background()
		const changes = 8
		ids, undoTokens := make([]string, changes), make([]string, changes)
		for i := range changes {
			ids[i], undoTokens[i] = f.preview("set", fmt.Sprint("k", i), "new")
			undoTokens[i] = f.apply(ids[i], undoTokens[i])
		}
		var mu sync.Mutex
		wins := map[string]int{}
		var refusals []string
		var fns []func()
		for i, id := range ids {
			for _, g := range guards {
				fns = append(fns, func() {
					_, err := g.Undo(ctx, id, undoTokens[i])
					mu.Lock()
					defer mu.Unlock()
					if err == nil {
						wins[id]++
					} else if !lostClaim(err.Error()) {
						refusals = append(refusals, err.Error())
					}
				})
			}
		}
		race(fns...)
		for _, r := range refusals {
			t.Errorf("a losing undo was refused with %q, want a lost claim", r)
		}
		for i, id := range ids {
			if wins[id] != 1 {
				t.Errorf("change %s: %d requests were told it was undone", id, wins[id])
			}
			if f.status(id) != ledger.Undone || f.store.get(fmt.Sprint("k", i)) != "" {
				t.Errorf("change %s: status %s, value %q", id, f.status(id), f.store.get(fmt.Sprint("k", i)))
			}
		}
		if n := f.store.undos.Load(); n != changes {
			t.Fatalf("%d undos for %d changes", n, changes)
		}
	})
}

// Racing undos of one run: agents on two Guards, each on its own handle
// of the ledger, confirm the same dry run while a person undoes the run
// from a dashboard. One request undoes it, once; every other one is
// refused while it is being undone or gets the stored report.
func TestRun_RacingUndosOfOneRunUndoItOnce(t *testing.T) {
	t.Parallel()
	onEachBackend(t, func(t *testing.T, kit backendKit) {
		f := newRunFixtureOn(t, kit)
		server := mcp.NewServer(&mcp.Implementation{Name: "replica", Version: "1"}, nil)
		replica, err := changeset.New(server, changeset.Options{Ledger: kit.Reopen(t, f.guard.Ledger()), WriteMode: changeset.WriteGuarded, Clock: f.clock.Now})
		if err != nil {
			t.Fatal(err)
		}
		defer replica.Close()
		registerDocOps(replica, f.docs)
		sessions := []*mcp.ClientSession{f.session, connect(t, server), f.session, connect(t, server)}

		before := f.docs.dump()
		run := f.startRun("Race")
		changes := []string{
			f.do(run, "create_doc", map[string]any{"title": "gamma"}),
			f.do(run, "rename_doc", map[string]any{"id": 1, "title": "ALPHA"}),
			f.do(run, "delete_doc", map[string]any{"id": 2}),
			f.do(run, "create_doc", map[string]any{"title": "delta"}),
		}
		slices.Reverse(changes) // newest first, as reports list them
		token := f.dryRun(run)["confirmation_token"]
		writes := f.docs.writes.Load()

		var mu sync.Mutex
		var results []callResult
		var fns []func()
		for _, cs := range sessions {
			fns = append(fns, func() {
				r := tryCall(cs, &mcp.CallToolParams{Name: "undo_run", Arguments: map[string]any{"run_id": run, "dry_run": false, "confirmation_token": token}})
				mu.Lock()
				defer mu.Unlock()
				results = append(results, r)
			})
		}
		fns = append(fns, func() {
			var r callResult
			rep, err := replica.UndoRun(context.Background(), run, false, changeset.Person("ana"))
			if err != nil {
				r.errText = err.Error() // a refusal, as the tool would give it
			} else {
				raw, _ := json.Marshal(rep)
				r.err = json.Unmarshal(raw, &r.out)
			}
			mu.Lock()
			defer mu.Unlock()
			results = append(results, r)
		})
		race(fns...)

		var reports []string
		replays := 0
		for _, r := range results {
			switch {
			case r.err != nil:
				t.Errorf("an undo failed: %v", r.err)
			case r.errText != "":
				// The loser sees the run claimed, or one of its changes
				// being undone while it walks the run.
				if !strings.Contains(r.errText, "being undone by another request") && !strings.Contains(r.errText, "is undoing; try again") {
					t.Errorf("an undo was refused with %q, want being undone", r.errText)
				}
			default:
				if r.out["status"] != "undone" || !slices.Equal(ids(r.out["undone"]), changes) {
					t.Errorf("report = %v, want all of %v undone", r.out, changes)
				}
				delete(r.out, "dry_run") // the person's report omits it when false
				if r.out["replayed"] == true {
					replays++ // a request that found the run undone gets the stored report
					delete(r.out, "replayed")
					delete(r.out, "replay_note")
				}
				reports = append(reports, fmt.Sprint(r.out))
			}
		}
		if len(reports) == 0 || replays != len(reports)-1 {
			t.Fatalf("%d reports, %d of them replayed; want exactly one request to undo the run", len(reports), replays)
		}
		for _, rep := range reports[1:] {
			if rep != reports[0] {
				t.Errorf("reports differ:\n%s\n%s", rep, reports[0])
			}
		}
		if got := f.docs.writes.Load() - writes; got != int64(len(changes)) {
			t.Errorf("the undos wrote %d times, want %d: the run was undone twice or not at all", got, len(changes))
		}
		if after := f.docs.dump(); after != before {
			t.Errorf("state after undo:\n%s\nwant:\n%s", after, before)
		}
		for _, id := range changes {
			if f.status(id) != ledger.Undone {
				t.Errorf("%s: %s", id, f.status(id))
			}
		}
		if detail := mustCall(t, f.session, "get_run", map[string]any{"run_id": run}); detail["status"] != "undone" {
			t.Fatalf("get_run = %v", detail)
		}
	})
}

// The same answer sent at the same moment to two replicas (a client
// retrying on another connection, or replaying one) approves one apply.
func TestApproval_RacingAnswersWithOneStateApplyOnce(t *testing.T) {
	t.Parallel()
	onEachBackend(t, func(t *testing.T, kit backendKit) {
		a := newApprovalFixtureOn(t, kit)
		replica := buildApprovalFixture(t, changeset.Options{Ledger: kit.Reopen(t, a.guard.Ledger())}, nil)
		var sessions []*mcp.ClientSession
		for _, f := range []*approvalFixture{a, replica, a, replica} {
			sessions = append(sessions, f.connect(clientOptions{protocol: protoMRTR, user: says(yes), manual: true}))
		}
		const changes = 4
		type asked struct{ id, state string }
		var questions []asked
		for i := range changes {
			id := a.preview(sessions[0], fmt.Sprint("k", i), "v")
			state, _ := question(t, sessions[0], "apply_change", map[string]any{"change_id": id})
			questions = append(questions, asked{id, state})
		}
		var mu sync.Mutex
		wins := map[string]int{}
		var refusals []string
		var fns []func()
		for _, q := range questions {
			for _, cs := range sessions {
				fns = append(fns, func() {
					r := tryCall(cs, &mcp.CallToolParams{Name: "apply_change", Arguments: map[string]any{"change_id": q.id},
						RequestState: q.state, InputResponses: mcp.InputResponseMap{"approve": yes}})
					mu.Lock()
					defer mu.Unlock()
					switch {
					case r.err != nil:
						refusals = append(refusals, r.err.Error())
					case r.errText == "" && r.out["status"] == "applied":
						wins[q.id]++
					case !lostClaim(r.errText):
						refusals = append(refusals, fmt.Sprintf("%q %v", r.errText, r.out))
					}
				})
			}
		}
		race(fns...)
		for _, r := range refusals {
			t.Errorf("a losing answer got %s, want a lost claim", r)
		}
		for _, q := range questions {
			if wins[q.id] != 1 || a.status(q.id) != "applied" {
				t.Errorf("change %s: applied for %d answers, status %s", q.id, wins[q.id], a.status(q.id))
			}
		}
		if n := a.store.applies.Load() + replica.store.applies.Load(); n != changes {
			t.Fatalf("%d applies for %d changes", n, changes)
		}
	})
}

// replica is a second Guard with the test operations on f's ledger, through
// a handle of its own (as another process or replica of the server would
// open it), over f's store and clock.
func (f *fixture) replica(kit backendKit) *changeset.Guard {
	f.t.Helper()
	g, err := changeset.New(nil, changeset.Options{Ledger: kit.Reopen(f.t, f.guard.Ledger()), WriteMode: changeset.WriteGuarded, Clock: f.clock.Now})
	if err != nil {
		f.t.Fatalf("New: %v", err)
	}
	f.t.Cleanup(func() { g.Close() })
	registerTestOps(g, f.store)
	return g
}

// race calls each of fns at the same moment, each from its own goroutine,
// and waits for all of them. The functions must not call t.Fatal.
func race(fns ...func()) {
	var start, done sync.WaitGroup
	start.Add(1)
	for _, fn := range fns {
		done.Add(1)
		go func() {
			defer done.Done()
			start.Wait()
			fn()
		}()
	}
	start.Done()
	done.Wait()
}

// callResult is what a tool call returned, for calls made off the test's
// goroutine: the structured result, or the tool error's text, or a
// protocol error.
type callResult struct {
	out     map[string]any
	errText string
	err     error
}

// tryCall is call without the test: safe on any goroutine.
func tryCall(cs *mcp.ClientSession, params *mcp.CallToolParams) callResult {
	res, err := cs.CallTool(context.Background(), params)
	switch {
	case err != nil:
		return callResult{err: err}
	case res.NeedsInput():
		return callResult{err: errors.New("asked for input again")}
	case res.IsError:
		var text []string
		for _, c := range res.Content {
			if tc, ok := c.(*mcp.TextContent); ok {
				text = append(text, tc.Text)
			}
		}
		return callResult{errText: strings.Join(text, "\n")}
	}
	var out map[string]any
	raw, _ := json.Marshal(res.StructuredContent)
	if err := json.Unmarshal(raw, &out); err != nil {
		return callResult{err: err}
	}
	return callResult{out: out}
}

// lostClaim reports whether msg is how a request that lost the race for a
// change's claim is refused.
func lostClaim(msg string) bool {
	return strings.Contains(msg, "cannot be applied (status: ") || strings.Contains(msg, "cannot be undone (status: ") ||
		strings.Contains(msg, "claimed by another request")
}
