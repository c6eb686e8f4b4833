// Package ledgertest is the conformance suite that every ledger backend
// must pass: one set of tests of the promises in [driver.Backend] (whose
// methods it calls through [driver.BackendOf]) and of the state machine in
// package ledger above it, run against each backend from a single test
// file (backends_test.go in this directory).
//
// A backend is tested by handing [Exercise] a [Harness] that opens fresh,
// empty ledgers:
//
//	func TestSQLite(t *testing.T) {
//		ledgertest.Exercise(t, ledgertest.Harness{Open: openSQLite, OpenSecond: reopenSQLite})
//	}
//
// The suite is split by area: changes.go (rows of changes), runs.go,
// meta.go (values kept beside the rows), transitions.go (transactions,
// expiry, reconcile), history.go (the history of transitions), prune.go
// (retention), concurrency.go (races between goroutines and between
// independent handles, as between processes), durability.go (lazy
// transactions), approvals.go (approvals by people) and outbox.go (events
// and their senders' leases). [Benchmark] times full
// preview → apply → undo cycles at several numbers of clients.
//
// Every subtest opens a ledger of its own, runs in parallel with the
// others, and drives time through the clock its ledgers are opened with
// ([ledger.OpenOptions].Clock), never through sleeps.
package ledgertest

import (
	"context"
	"encoding/json"
	"reflect"
	"slices"
	"sync"
	"testing"
	"time"

	"github.com/mcp-changeset/changeset-go/ledger"
	"github.com/mcp-changeset/changeset-go/ledger/driver"
)

// Harness tells the suite how to make ledgers of the backend under test.
type Harness struct {
	// Open returns a new, empty, migrated ledger that no other test
	// uses, whose clock is clock (time.Now when nil; see
	// [ledger.OpenOptions].Clock), and closes it (and removes its
	// database) when t ends.
	Open func(t testing.TB, clock func() time.Time) *ledger.Ledger
	// OpenSecond, if set, opens another handle on the database behind l
	// with a connection pool of its own, as a second process would, whose
	// clock is clock, and closes it when t ends. Tests of races between
	// handles are skipped without it.
	OpenSecond func(t testing.TB, l *ledger.Ledger, clock func() time.Time) *ledger.Ledger
}

// Exercise runs the whole conformance suite against the backend that h
// opens.
func Exercise(t *testing.T, h Harness) {
	if h.Open == nil {
		t.Fatal("ledgertest: Harness.Open is required")
	}
	t.Run("Changes", func(t *testing.T) { exerciseChanges(t, h) })
	t.Run("Runs", func(t *testing.T) { exerciseRuns(t, h) })
	t.Run("Meta", func(t *testing.T) { exerciseMeta(t, h) })
	t.Run("Transitions", func(t *testing.T) { exerciseTransitions(t, h) })
	t.Run("Prune", func(t *testing.T) { exercisePrune(t, h) })
	t.Run("History", func(t *testing.T) { exerciseHistory(t, h) })
	t.Run("Concurrency", func(t *testing.T) { exerciseConcurrency(t, h) })
	t.Run("Durability", func(t *testing.T) { ExerciseDurability(t, h) })
	t.Run("Approvals", func(t *testing.T) { exerciseApprovals(t, h) })
	t.Run("Outbox", func(t *testing.T) { exerciseOutbox(t, h) })
	t.Run("Chain", func(t *testing.T) { exerciseChain(t, h) })
}

// test is one subtest of the suite.
type test struct {
	name string
	fn   func(t *testing.T, h Harness)
}

// runAll runs tests as parallel subtests of t.
func runAll(t *testing.T, h Harness, tests []test) {
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			tc.fn(t, h)
		})
	}
}

// t0 is the suite's "now": a time with microseconds, in UTC.
var t0 = time.Date(2025, 3, 4, 5, 6, 7, 123456000, time.UTC)

// clock is a controllable clock for ledger.OpenOptions.Clock.
type clock struct {
	mu  sync.Mutex
	now time.Time
}

func (c *clock) Now() time.Time {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.now
}

func (c *clock) Set(t time.Time) {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.now = t
}

// open returns a fresh ledger whose clock reads t0 until told otherwise.
func open(t *testing.T, h Harness) (*ledger.Ledger, *clock) {
	t.Helper()
	clk := &clock{now: t0}
	return h.Open(t, clk.Now), clk
}

// second opens a second handle on l's database (see Harness.OpenSecond)
// that reads the same clock as l.
func second(t *testing.T, h Harness, l *ledger.Ledger) *ledger.Ledger {
	t.Helper()
	return h.OpenSecond(t, l, l.Now)
}

// ctxFor returns a context that ends with the test, with a deadline that
// turns a deadlock into a failure instead of a hung test run.
func ctxFor(t *testing.T) context.Context {
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	t.Cleanup(cancel)
	return ctx
}

// sec is t0 plus n seconds.
func sec(n int) time.Time { return t0.Add(time.Duration(n) * time.Second) }

// fullChange returns a change with every field set, times with
// nanoseconds in a zone other than UTC.
func fullChange(id string, created time.Time) *ledger.Change {
	created = created.In(time.FixedZone("X", 5400)).Add(789 * time.Nanosecond)
	return &ledger.Change{
		ID: id, Action: "set_setting", Status: ledger.Applied,
		ScopeHash: "scope-hash", Resource: "setting:x",
		Payload: json.RawMessage(`{"key":"x","value":1}`), PayloadHash: "payload-hash",
		Diff: json.RawMessage(`[{"after":1,"before":0,"field":"x"}]`), Summary: "set x to 1 – ünïcode",
		Warnings:  []string{"one", "two \"quoted\""},
		StateHash: "state-hash", Before: json.RawMessage(`{"x":0}`), After: json.RawMessage(`{"x":1}`), UndoFound: json.RawMessage(`{"x":2}`),
		ConfirmHash: "confirm-hash", UndoHash: "undo-hash", Undoable: true, Transactional: true,
		Result: json.RawMessage(`{"ok":true}`), ErrorType: "*fs.PathError", Error: "open x: denied",
		Failure: ledger.FailureResultTooLarge, NothingWritten: true, DependsOn: []string{"rule:42", "funnel:7"}, Resources: []string{"row:1", "row:2"},
		Note: "checked", PreviewedBy: "agent:alice", AppliedBy: "agent", UndoneBy: "person:ann",
		RedactFields: []string{"value", "key"}, RedactedAt: created.Add(4 * time.Second),
		CreatedAt: created, UpdatedAt: created.Add(time.Second), ExpiresAt: created.Add(15 * time.Minute),
		AppliedAt: created.Add(2 * time.Second), UndoExpiresAt: created.Add(24 * time.Hour), UndoneAt: created.Add(3 * time.Second),
	}
}

// pendingChange returns a pending change that expires a minute after it
// was created.
func pendingChange(id string, created time.Time) *ledger.Change {
	return &ledger.Change{ID: id, Action: "a", Status: ledger.Pending, ScopeHash: "s",
		Payload: json.RawMessage(`{}`), ConfirmHash: ledger.Digest("confirm-" + id),
		CreatedAt: created, UpdatedAt: created, ExpiresAt: created.Add(time.Minute)}
}

// stored is what reading c back must return: every time in UTC,
// truncated to the microsecond.
func stored(c *ledger.Change) *ledger.Change {
	d := *c // not c.Clone(), which turns empty JSON values into nil
	d.Warnings, d.RedactFields, d.DependsOn, d.Resources = slices.Clone(c.Warnings), slices.Clone(c.RedactFields), slices.Clone(c.DependsOn), slices.Clone(c.Resources)
	for _, p := range []*json.RawMessage{&d.Payload, &d.Diff, &d.Before, &d.After, &d.UndoFound, &d.Result} {
		*p = slices.Clone(*p)
	}
	for _, p := range []*time.Time{&d.CreatedAt, &d.UpdatedAt, &d.ExpiresAt, &d.AppliedAt, &d.UndoExpiresAt, &d.UndoneAt, &d.RedactedAt} {
		*p = storedTime(*p)
	}
	return &d
}

func storedTime(t time.Time) time.Time {
	if t.IsZero() {
		return t
	}
	return time.UnixMicro(t.UnixMicro()).UTC()
}

// insertChanges stores cs, failing the test on any error.
func insertChanges(t *testing.T, l *ledger.Ledger, cs ...*ledger.Change) {
	t.Helper()
	ctx := context.Background()
	for _, c := range cs {
		if err := driver.BackendOf(l).InsertChange(ctx, l.DB(), c); err != nil {
			t.Fatalf("insert %s: %v", c.ID, err)
		}
	}
}

// insertRuns stores open runs with the given IDs, created at t0.
func insertRuns(t *testing.T, l *ledger.Ledger, ids ...string) {
	t.Helper()
	for _, id := range ids {
		r := &ledger.Run{ID: id, Status: ledger.RunOpen, CreatedAt: t0, UpdatedAt: t0}
		if err := driver.BackendOf(l).InsertRun(context.Background(), l.DB(), r); err != nil {
			t.Fatalf("insert run %s: %v", id, err)
		}
	}
}

// mustGet reads a change, failing the test on any error.
func mustGet(t *testing.T, l *ledger.Ledger, id string) *ledger.Change {
	t.Helper()
	c, err := l.Change(context.Background(), id)
	if err != nil {
		t.Fatalf("get %s: %v", id, err)
	}
	return c
}

// changeIDs lists the IDs of the changes f selects, in the order the
// backend returns them.
func changeIDs(t *testing.T, l *ledger.Ledger, f ledger.ChangeFilter) []string {
	t.Helper()
	cs, err := l.Changes(context.Background(), f)
	if err != nil {
		t.Fatalf("Changes(%+v): %v", f, err)
	}
	ids := []string{}
	for _, c := range cs {
		ids = append(ids, c.ID)
	}
	return ids
}

// checkEveryFieldSet reports each field of the struct v that is zero.
func checkEveryFieldSet(t *testing.T, v any, fixture string) {
	t.Helper()
	rv := reflect.ValueOf(v)
	for i := range rv.NumField() {
		if rv.Field(i).IsZero() {
			t.Errorf("%s.%s is zero in the suite's %s: set it there, so that every backend must store it", rv.Type(), rv.Type().Field(i).Name, fixture)
		}
	}
}
