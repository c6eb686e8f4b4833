package main

import (
	"encoding/json"
	"fmt"
	"math/rand"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/mcp-changeset/changeset-go/examples/internal/exampletest"
	"github.com/mcp-changeset/changeset-go/internal/pgtest"
)

// The tests in this file race a run's undo against applies of the same
// run's pending changes and against people editing the notes. A, B and C
// are clients of notes servers that share one directory and one ledger:
//
//   - A starts a run, applies some changes to notes and leaves some
//     previews of the run pending;
//   - B applies those pending changes with A's tokens while A does the
//     undo's dry run and confirms it, after random small delays;
//   - sometimes C confirms the same dry run at the same time;
//   - sometimes a person edits a note of the run, before the dry run or
//     between the dry run and its confirm.
//
// After each iteration the tests check the contract of a run's undo (see
// runrace_check_test.go): it carries out the reviewed plan or less, never
// more; a change applied after the plan was made is left alone and
// reported; a refusal says why; no run is left undoing; and the files on
// disk agree with the ledger. Then they undo the rest of the run and check
// that every note is back where it started, except what a person wrote.
//
// The tests run on each backend in two shapes:
//
//   - across processes: A, B and C talk to three server processes over
//     stdio. B's pending changes are to notes the run has not touched,
//     because the notes example cannot yet serialize two processes' writes
//     to one note (see TestRunRace_SameNoteAcrossProcesses);
//   - in one process: A, B and C are three sessions of one server over
//     Streamable HTTP, and half of B's pending changes are to notes the
//     run changed, so that an apply races the undo of the same note.
//
// CHANGESET_RACE_SEED fixes the first iteration's seed (iteration i uses
// seed+i) and CHANGESET_RACE_ITERATIONS the number of iterations, to
// replay a failure: the failure message names both.
func TestRunRace_AcrossProcesses_SQLite(t *testing.T) {
	raceRuns(t, filepath.Join(t.TempDir(), "ledger.db"), raceMode{})
}

func TestRunRace_AcrossProcesses_PostgreSQL(t *testing.T) {
	raceRuns(t, pgtest.DSN(t), raceMode{})
}

func TestRunRace_OneProcess_SQLite(t *testing.T) {
	raceRuns(t, filepath.Join(t.TempDir(), "ledger.db"), raceMode{oneProcess: true, sameNote: true})
}

func TestRunRace_OneProcess_PostgreSQL(t *testing.T) {
	raceRuns(t, pgtest.DSN(t), raceMode{oneProcess: true, sameNote: true})
}

// The races again on servers started with --durability claims, whose
// previews and outcomes commit without waiting for the disk: the contract
// of a run's undo holds the same, on both backends, across processes and
// in one.

func TestRunRace_AcrossProcesses_SQLite_DurabilityClaims(t *testing.T) {
	raceRuns(t, filepath.Join(t.TempDir(), "ledger.db"), raceMode{claims: true})
}

func TestRunRace_OneProcess_PostgreSQL_DurabilityClaims(t *testing.T) {
	raceRuns(t, pgtest.DSN(t), raceMode{oneProcess: true, sameNote: true, claims: true})
}

// TestRunRace_SameNoteAcrossProcesses races B's apply of a change to a
// note against A's undo of the run's earlier change to the same note, in
// two processes: the notes' lock file (flock) keeps one of them from
// writing over the other's check.
func TestRunRace_SameNoteAcrossProcesses(t *testing.T) {
	raceRuns(t, filepath.Join(t.TempDir(), "ledger.db"), raceMode{sameNote: true})
}

// raceMode is the shape of a race test.
type raceMode struct {
	oneProcess bool // A, B and C are sessions of one server over HTTP
	sameNote   bool // B's pending changes may be to notes the run changed
	claims     bool // the servers run with --durability claims
}

// Limits of one race test: it stops after raceIterations iterations or
// once raceBudget has passed, whichever comes first, but runs at least
// raceMinIterations.
const (
	raceIterations    = 400
	raceMinIterations = 20
	raceBudget        = 6 * time.Second
)

// raceNote is what a name holds: nothing, or a file with content.
type raceNote struct {
	exists  bool
	content string
}

func (n raceNote) String() string {
	if !n.exists {
		return "(no file)"
	}
	return strconv.Quote(n.content)
}

// raceChange is a change an iteration made: applied by A, or left pending
// for B.
type raceChange struct {
	id, note string
	after    raceNote
	pending  exampletest.Preview // set for a change left for B
	forB     bool
}

// timed is a tool call's outcome and when it was made.
type timed struct {
	exampletest.Outcome
	start, end time.Time
	made       bool
}

func call(c *exampletest.Client, name string, args map[string]any) timed {
	start := time.Now()
	o := c.Try(name, args)
	return timed{Outcome: o, start: start, end: time.Now(), made: true}
}

// raceStats counts what the iterations ran into, for the log.
type raceStats map[string]int

func (s raceStats) String() string {
	keys := make([]string, 0, len(s))
	for k := range s {
		keys = append(keys, k)
	}
	slices.Sort(keys)
	var b strings.Builder
	for _, k := range keys {
		fmt.Fprintf(&b, " %s=%d", k, s[k])
	}
	return strings.TrimSpace(b.String())
}

func raceConfig(t *testing.T) (seed int64, iterations int, budget time.Duration) {
	seed, iterations, budget = time.Now().UnixNano()%1_000_000_000, raceIterations, raceBudget
	if testing.Short() {
		iterations = raceMinIterations
	}
	if v := os.Getenv("CHANGESET_RACE_SEED"); v != "" {
		n, err := strconv.ParseInt(v, 10, 64)
		if err != nil {
			t.Fatalf("CHANGESET_RACE_SEED=%q: %v", v, err)
		}
		seed = n
	}
	if v := os.Getenv("CHANGESET_RACE_ITERATIONS"); v != "" {
		n, err := strconv.Atoi(v)
		if err != nil || n < 1 {
			t.Fatalf("CHANGESET_RACE_ITERATIONS=%q: want a positive number", v)
		}
		iterations, budget = n, 24*time.Hour
	}
	return seed, iterations, budget
}

// raceRuns runs the iterations on one ledger: a SQLite file or a
// PostgreSQL URL.
func raceRuns(t *testing.T, ledgerURL string, mode raceMode) {
	dir := t.TempDir()
	args := []string{"--ledger", ledgerURL, "--root", dir}
	if mode.claims {
		args = append(args, "--durability", "claims")
	}
	var a, b, c *exampletest.Client
	if mode.oneProcess {
		const token = "alice-0123456789abcdef0123456789ab"
		tokens := filepath.Join(t.TempDir(), "tokens")
		writeFile(t, tokens, token+" alice\n")
		p := exampletest.StartHTTP(t, "notes", append(args, "--http", "127.0.0.1:0", "--auth-token-file", tokens), exampletest.Guarded)
		a, b, c = p.Connect(t, token), p.Connect(t, token), p.Connect(t, token)
	} else {
		// One after the other: the first creates the ledger's schema.
		a = exampletest.Start(t, "notes", args, exampletest.Guarded)
		b = exampletest.Start(t, "notes", args, exampletest.Guarded)
		c = exampletest.Start(t, "notes", args, exampletest.Guarded)
	}

	base, iterations, budget := raceConfig(t)
	stats := raceStats{}
	bugs := map[string][]int64{}
	var current int64
	t.Cleanup(func() {
		if t.Failed() {
			t.Logf("failed in the iteration with seed %d; replay it with CHANGESET_RACE_SEED=%d CHANGESET_RACE_ITERATIONS=1", current, current)
		}
	})
	start := time.Now()
	n := 0
	for ; n < iterations && (n < raceMinIterations || time.Since(start) < budget); n++ {
		current = base + int64(n)
		it := &iteration{t: t, seed: current, n: n, rng: rand.New(rand.NewSource(current)), dir: dir,
			a: a, b: b, c: c, stats: stats, sameNote: mode.sameNote,
			initial: map[string]raceNote{}, cur: map[string]raceNote{}, person: map[string]string{}, pendingOn: map[string]bool{}}
		if bug := it.run(); bug != "" {
			if len(bugs[bug]) == 0 {
				t.Logf("seed %d ran into a known bug; what the iteration did:\n  %s", current, strings.Join(it.events, "\n  "))
			}
			bugs[bug] = append(bugs[bug], current)
			stats["known_bug"]++
		}
	}
	t.Logf("%d iterations in %v (seeds %d to %d); outcomes: %s", n, time.Since(start).Round(time.Millisecond), base, base+int64(n)-1, stats)
	for bug, seeds := range bugs {
		msg := fmt.Sprintf("bug: %s. Seen in %d of %d iterations (seeds %v).", bug, len(seeds), n, seeds)
		t.Error(msg)
	}
}

// iteration is one race.
type iteration struct {
	t        *testing.T
	seed     int64
	n        int
	rng      *rand.Rand
	dir      string
	a, b, c  *exampletest.Client
	stats    raceStats
	sameNote bool // B's pending changes may be to notes the run changed

	runID     string
	initial   map[string]raceNote // every name the iteration touches, as it started
	cur       map[string]raceNote // as A's applied changes left it
	changes   []*raceChange       // per note in the order they apply
	pendingOn map[string]bool     // notes with a change left for B
	names     int

	// A person's edit: the note, its content, and whether it lands between
	// the dry run and its confirm (else before the dry run).
	personNote, personContent string
	personLate                bool
	person                    map[string]string // edits that were made

	// What the race did.
	dry         *exampletest.RunReport
	dryRefusals []string
	confirmA    timed
	confirmC    timed
	bResults    []timed // by index into changes
	personErr   error
	useC        bool
	events      []string
	undo        *exampletest.RunReport // the race's executed undo, if any
	// statusAfterRace is each change's status once the race is over.
	statusAfterRace map[string]string
	executed        []*exampletest.RunReport // every executed report, this round and later
}

func (it *iteration) fatalf(format string, args ...any) {
	it.t.Helper()
	it.t.Fatalf("seed %d: "+format+"\nwhat the iteration did:\n  %s", append(append([]any{it.seed}, args...), strings.Join(it.events, "\n  "))...)
}

// logf records what the iteration did, for a failure's message.
func (it *iteration) logf(format string, args ...any) {
	it.events = append(it.events, fmt.Sprintf(format, args...))
}

func brief(v any) string {
	b, _ := json.Marshal(v)
	return string(b)
}

func (it *iteration) run() (knownBug string) {
	it.seedNotes()
	it.runID = it.a.StartRun(fmt.Sprintf("race %d", it.seed))
	for range 1 + it.rng.Intn(4) {
		it.applyOne()
	}
	for range 1 + it.rng.Intn(3) {
		it.leavePending()
	}
	it.choosePersonEdit()
	it.race()
	it.checkRace()
	if bug := it.knownBug(); bug != "" {
		return bug
	}
	it.settle()
	return ""
}

func (it *iteration) newName() string {
	it.names++
	name := fmt.Sprintf("i%03d-n%d.txt", it.n, it.names)
	it.initial[name] = raceNote{}
	return name
}

func (it *iteration) path(name string) string { return filepath.Join(it.dir, name) }

// seedNotes writes up to two notes a person made before the run.
func (it *iteration) seedNotes() {
	for k := range it.rng.Intn(3) {
		name := fmt.Sprintf("i%03d-s%d.txt", it.n, k)
		note := raceNote{exists: true, content: fmt.Sprintf("seed %d of %d", k, it.seed)}
		it.logf("a person wrote %s before the run: %v", name, note)
		writeFile(it.t, it.path(name), note.content)
		it.initial[name], it.cur[name] = note, note
	}
}

// existing returns the notes that exist now, as A's changes left them,
// that no change is left pending on and no person edits.
func (it *iteration) existing() []string {
	var names []string
	for name, n := range it.cur {
		if n.exists && !it.pendingOn[name] {
			names = append(names, name)
		}
	}
	slices.Sort(names)
	return names
}

// touched returns the notes A's applied changes touched.
func (it *iteration) touched() []string {
	var names []string
	for _, c := range it.changes {
		if !c.forB && !slices.Contains(names, c.note) {
			names = append(names, c.note)
		}
	}
	return names
}

// preview previews a write (content set) or a delete of name in the run.
func (it *iteration) preview(name string, write bool) (exampletest.Preview, raceNote) {
	args := map[string]any{"name": name, "run_id": it.runID}
	op, after := "delete_note", raceNote{}
	if write {
		after = raceNote{exists: true, content: fmt.Sprintf("%s written in %d, change %d", name, it.seed, len(it.changes))}
		op, args["content"] = "write_note", after.content
	}
	p, joined := it.a.PreviewRun(op, args)
	if joined != it.runID {
		it.fatalf("a preview with run_id %s joined run %q", it.runID, joined)
	}
	return p, after
}

// applyOne makes A create, replace or delete a note in the run.
func (it *iteration) applyOne() {
	existing := it.existing()
	name, write := "", true
	switch r := it.rng.Intn(3); {
	case r == 1 && len(existing) > 0:
		name = existing[it.rng.Intn(len(existing))]
	case r == 2 && len(existing) > 0:
		name, write = existing[it.rng.Intn(len(existing))], false
	default:
		name = it.newName()
	}
	p, after := it.preview(name, write)
	it.a.Apply(p)
	it.logf("A applied %s: %s → %v", p.ChangeID, name, after)
	it.changes = append(it.changes, &raceChange{id: p.ChangeID, note: name, after: after})
	it.cur[name] = after
}

// leavePending makes A preview a change of the run that B applies: to a
// note the run already changed (half the time, in the sameNote mode),
// else to a new note.
func (it *iteration) leavePending() {
	var candidates []string
	for _, name := range it.touched() {
		if !it.pendingOn[name] {
			candidates = append(candidates, name)
		}
	}
	var name string
	write := true
	if it.sameNote && len(candidates) > 0 && it.rng.Intn(2) == 0 {
		name = candidates[it.rng.Intn(len(candidates))]
		write = !it.cur[name].exists || it.rng.Intn(2) == 0
		it.stats["pending_on_a_changed_note"]++
	} else {
		name = it.newName()
	}
	p, after := it.preview(name, write)
	it.logf("A left %s pending for B: %s → %v", p.ChangeID, name, after)
	it.changes = append(it.changes, &raceChange{id: p.ChangeID, note: name, after: after, pending: p, forB: true})
	it.pendingOn[name] = true
}

// choosePersonEdit picks, three times in ten, a note of the run that a
// person overwrites: now, or between the dry run and its confirm.
func (it *iteration) choosePersonEdit() {
	if it.rng.Intn(10) >= 3 {
		return
	}
	var candidates []string
	for _, name := range it.touched() {
		if !it.pendingOn[name] {
			candidates = append(candidates, name)
		}
	}
	if len(candidates) == 0 {
		return
	}
	it.personNote = candidates[it.rng.Intn(len(candidates))]
	it.personContent = fmt.Sprintf("a person's edit in %d", it.seed)
	it.personLate = it.rng.Intn(2) == 0
	if !it.personLate {
		writeFile(it.t, it.path(it.personNote), it.personContent)
		it.person[it.personNote] = it.personContent
		it.stats["person_edit_before_dry_run"]++
	}
}

func (it *iteration) delay(max int) time.Duration {
	return time.Duration(it.rng.Intn(max*1000)) * time.Microsecond
}

// race lets B apply the pending changes while A (and sometimes C) undo
// the run. The random choices are drawn here, on the test's goroutine.
func (it *iteration) race() {
	var forB []int
	for i, c := range it.changes {
		if c.forB {
			forB = append(forB, i)
		}
	}
	it.rng.Shuffle(len(forB), func(i, j int) { forB[i], forB[j] = forB[j], forB[i] })
	bDelays := make([]time.Duration, len(forB))
	for i := range bDelays {
		bDelays[i] = it.delay(6)
	}
	aBefore, aBetween, cDelay := it.delay(8), it.delay(6), it.delay(6)
	if it.rng.Intn(2) == 0 {
		aBetween = 0 // confirm at once: B's applies then tend to land in the undo itself
	}
	it.useC = it.rng.Intn(10) < 3
	useC := it.useC
	if useC {
		it.stats["second_confirm_from_C"]++
	}
	it.bResults = make([]timed, len(it.changes))

	var wg sync.WaitGroup
	tokens := make(chan string, 1)
	wg.Go(func() {
		for k, i := range forB {
			time.Sleep(bDelays[k])
			p := it.changes[i].pending
			it.bResults[i] = call(it.b, "apply_change", map[string]any{"change_id": p.ChangeID, "confirmation_token": p.ConfirmationToken})
		}
	})
	wg.Go(func() {
		defer close(tokens)
		time.Sleep(aBefore)
		for attempt := 0; ; attempt++ {
			o := call(it.a, "undo_run", map[string]any{"run_id": it.runID})
			if o.Err != nil || o.Refusal == "" {
				if o.Err == nil {
					var rep exampletest.RunReport
					o.Err = o.Into(&rep)
					it.dry = &rep
				}
				if o.Err != nil {
					it.dryRefusals = append(it.dryRefusals, "error: "+o.Err.Error())
				}
				break
			}
			it.dryRefusals = append(it.dryRefusals, o.Refusal)
			if !strings.Contains(o.Refusal, " is applying;") || attempt == 2000 {
				return
			}
			time.Sleep(time.Millisecond)
		}
		if it.dry == nil {
			return
		}
		if it.personLate {
			it.personErr = os.WriteFile(it.path(it.personNote), []byte(it.personContent), 0o644)
		}
		if useC {
			tokens <- it.dry.ConfirmationToken
		}
		time.Sleep(aBetween)
		it.confirmA = call(it.a, "undo_run", map[string]any{"run_id": it.runID, "dry_run": false, "confirmation_token": it.dry.ConfirmationToken})
	})
	if useC {
		wg.Go(func() {
			token, ok := <-tokens
			if !ok {
				return
			}
			time.Sleep(cDelay)
			it.confirmC = call(it.c, "undo_run", map[string]any{"run_id": it.runID, "dry_run": false, "confirmation_token": token})
		})
	}
	wg.Wait()
	it.logRace()
	if it.personLate && it.dry != nil {
		if it.personErr != nil {
			it.fatalf("the person's edit: %v", it.personErr)
		}
		it.person[it.personNote] = it.personContent
		it.stats["person_edit_after_dry_run"]++
	}
}

// logRace records the outcomes of the race's calls, in the order they
// started.
func (it *iteration) logRace() {
	type entry struct {
		at   time.Time
		text string
	}
	var es []entry
	show := func(who string, o timed) {
		if !o.made {
			return
		}
		what := brief(o.Out)
		if o.Refusal != "" {
			what = "refused: " + o.Refusal
		}
		es = append(es, entry{o.start, fmt.Sprintf("%s %s–%s: %s", who, o.start.Format("05.000000"), o.end.Format("05.000000"), what)})
	}
	for i, o := range it.bResults {
		show("B applies "+it.changes[i].id, o)
	}
	show("A confirms", it.confirmA)
	show("C confirms", it.confirmC)
	slices.SortFunc(es, func(a, b entry) int { return a.at.Compare(b.at) })
	if it.personNote != "" {
		it.logf("a person edits %s (after the dry run: %v)", it.personNote, it.personLate)
	}
	it.logf("dry run refusals %q; dry run: %s", it.dryRefusals, brief(it.dry))
	for _, e := range es {
		it.logf("%s", e.text)
	}
}
