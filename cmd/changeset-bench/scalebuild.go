package main

import (
	"container/heap"
	"context"
	"encoding/json"
	"fmt"
	"math/rand/v2"
	"time"

	changeset "github.com/mcp-changeset/changeset-go"
	"github.com/mcp-changeset/changeset-go/ledger"
)

// buildResult describes a ledger buildLedger wrote, and the rows the
// measurements start from.
type buildResult struct {
	Changes  int                   `json:"changes"`
	Runs     int                   `json:"runs"`
	History  int                   `json:"history_entries"`
	ByStatus map[ledger.Status]int `json:"by_status"`
	// RunsByStatus counts the runs by their final status.
	RunsByStatus map[ledger.RunStatus]int `json:"runs_by_status"`
	// Transactions is how many write transactions the build committed.
	Transactions int           `json:"transactions"`
	Elapsed      time.Duration `json:"elapsed_ns"`
	PerSecond    float64       `json:"changes_per_second"`

	// Middle is the change created halfway through the ledger's history
	// (a cursor there pages from the middle); MiddleRun the first run
	// started after it; TypicalRun a run of scaleRunSize changes started
	// after it. Lookups are changes spread evenly over the ledger.
	Middle     ledger.ChangeKey `json:"middle"`
	MiddleRun  ledger.ChangeKey `json:"middle_run"`
	TypicalRun string           `json:"typical_run"`
	Lookups    []string         `json:"-"`
}

// scaleBatch is how many statements one transaction of the build writes
// at most: the build's commits are few and large, as a bulk load's are.
const scaleBatch = 4000

// buildLedger writes a ledger of n changes into l (which should be empty)
// through the ledger's API: runs, changes and every transition, each with
// its history entry, in time order, scaleBatch statements to a
// transaction. end is the ledger's "now": the newest change is created a
// day before it. progress, if not nil, is told how many changes are done.
func buildLedger(ctx context.Context, l *ledger.Ledger, n int, seed uint64, end time.Time, progress func(done int)) (*buildResult, error) {
	if n < scaleMinChanges {
		return nil, fmt.Errorf("a ledger of %d changes is too small to hold the rare values; build at least %d", n, scaleMinChanges)
	}
	rng := rand.New(rand.NewPCG(seed, 0x5ca1e))
	b := &builder{
		ctx: ctx, l: l, rng: rng, text: newScaleText(rng),
		res: &buildResult{ByStatus: map[ledger.Status]int{}, RunsByStatus: map[ledger.RunStatus]int{}},
	}
	b.fates = make([]ledger.Status, 0, n)
	for _, m := range scaleMix {
		for range scaleCounts(n)[m.Status] {
			b.fates = append(b.fates, m.Status)
		}
	}
	rng.Shuffle(n, func(i, j int) { b.fates[i], b.fates[j] = b.fates[j], b.fates[i] })
	b.agents = make([]*scaleAgentState, len(scaleAgents))
	for i, a := range scaleAgents {
		b.agents[i] = &scaleAgentState{scaleAgent: a}
	}
	rare := map[int]string{} // change index → which rare value it carries
	for k := range scaleRare {
		at := (2*k + 1) * n / (2 * scaleRare)
		rare[at], rare[at+1], rare[at+2] = "by", "action", "text"
	}
	start := time.Now()
	first := end.Add(-scaleQuiet - scaleSpan)
	step := scaleSpan / time.Duration(n)
	lookupEvery := max(1, n/200)
	var last time.Time
	for i := range n {
		// The ledger keeps microseconds: so do the keys measured from.
		at := first.Add(time.Duration(i)*step + time.Duration(rng.Int64N(int64(step)))).Truncate(time.Microsecond)
		last = at
		if err := b.until(at); err != nil {
			return nil, err
		}
		c, err := b.preview(i, at, rare[i])
		if err != nil {
			return nil, err
		}
		if i == n/2 {
			b.res.Middle = ledger.ChangeKey{CreatedAt: c.CreatedAt, ID: c.ID}
			b.afterMiddle = true
		}
		if i%lookupEvery == 0 {
			b.res.Lookups = append(b.res.Lookups, c.ID)
		}
		if progress != nil && i%1000 == 0 {
			progress(i)
		}
	}
	// Runs still going when the agents stopped are undone too, after the
	// last change of the ledger.
	for _, a := range b.agents {
		if r := a.run; r != nil && r.undoWhole && r.left > 0 {
			b.schedule(last.Add(10*time.Minute+b.between(20*time.Minute, 12*time.Hour)), func() error { return b.undoRun(r) })
		}
	}
	if err := b.until(end); err != nil {
		return nil, err
	}
	if b.events.Len() > 0 {
		return nil, fmt.Errorf("scale: %d events scheduled after the ledger's end", b.events.Len())
	}
	if err := b.commit(); err != nil {
		return nil, err
	}
	if b.res.TypicalRun == "" {
		return nil, fmt.Errorf("scale: %s started no run in the second half of the ledger", scaleAgents[0].Name)
	}
	b.res.Elapsed = time.Since(start)
	b.res.PerSecond = float64(n) / b.res.Elapsed.Seconds()
	return b.res, nil
}

// builder is the state of one build: the agents' open runs, the
// transitions scheduled for later, and the open transaction.
type builder struct {
	ctx    context.Context
	l      *ledger.Ledger
	rng    *rand.Rand
	text   *scaleText
	fates  []ledger.Status
	agents []*scaleAgentState
	events eventQueue
	seq    int
	tx     *ledger.Tx
	writes int
	res    *buildResult

	afterMiddle bool      // the middle change was created
	clock       time.Time // the time of the event being run
}

// scaleAgentState is an agent and the run it is working in.
type scaleAgentState struct {
	scaleAgent
	run *scaleRun
}

// scaleRun is a run being built.
type scaleRun struct {
	*ledger.Run
	server    *scaleServer
	agent     string
	size      int // how many changes it will hold
	left      int
	last      time.Time // when its latest change was created
	undoWhole bool      // undone as a run, after its last change
	changes   []*scaleChange
}

// scaleChange is a change being built, and what will become of it.
type scaleChange struct {
	*ledger.Change
	fate    ledger.Status
	action  scaleAction
	content scaleContent
}

// between draws a duration in [lo, hi).
func (b *builder) between(lo, hi time.Duration) time.Duration {
	return lo + time.Duration(b.rng.Int64N(int64(hi-lo)))
}

// write is called before each statement: it begins a transaction when
// none is open and commits the open one when it holds scaleBatch
// statements.
func (b *builder) write() error {
	if b.tx != nil && b.writes >= scaleBatch {
		if err := b.commit(); err != nil {
			return err
		}
	}
	if b.tx == nil {
		tx, err := b.l.Begin(b.ctx)
		if err != nil {
			return err
		}
		b.tx, b.writes = tx, 0
	}
	b.writes++
	return nil
}

func (b *builder) commit() error {
	if b.tx == nil {
		return nil
	}
	tx := b.tx
	b.tx = nil
	b.res.Transactions++
	return tx.Commit()
}

// fail rolls the open transaction back and returns err.
func (b *builder) fail(err error) error {
	if b.tx != nil {
		b.tx.Rollback()
		b.tx = nil
	}
	return err
}

// insertRun stores r, started by by.
func (b *builder) insertRun(r *scaleRun, by string) error {
	if err := b.write(); err != nil {
		return err
	}
	if err := b.tx.InsertRunBy(r.Run, by); err != nil {
		return b.fail(fmt.Errorf("insert run %s: %w", r.ID, err))
	}
	b.res.Runs++
	b.res.RunsByStatus[r.Status]++
	b.res.History++
	return nil
}

// moveRun writes r, moved from from to r.Status at at.
func (b *builder) moveRun(r *scaleRun, to ledger.RunStatus, at time.Time) error {
	if err := b.write(); err != nil {
		return err
	}
	from := r.Status
	r.Status, r.UpdatedAt = to, at
	if err := b.tx.UpdateRun(r.Run, from); err != nil {
		return b.fail(fmt.Errorf("run %s %s → %s: %w", r.ID, from, to, err))
	}
	b.res.RunsByStatus[from]--
	b.res.RunsByStatus[to]++
	b.res.History++
	return nil
}

// move writes c, moved to to at at (set is called first to fill the
// fields the move sets).
func (b *builder) move(c *scaleChange, to ledger.Status, at time.Time, set func(c *ledger.Change)) error {
	if err := b.write(); err != nil {
		return err
	}
	from := c.Status
	c.Status, c.UpdatedAt = to, at
	if set != nil {
		set(c.Change)
	}
	if err := b.tx.UpdateChange(c.Change, from); err != nil {
		return b.fail(fmt.Errorf("change %s %s → %s: %w", c.ID, from, to, err))
	}
	b.res.ByStatus[from]--
	b.res.ByStatus[to]++
	b.res.History++
	return nil
}

// preview stores the i-th change, created at at, and schedules what
// becomes of it. rare names the rare value it carries, if any.
func (b *builder) preview(i int, at time.Time, rare string) (*scaleChange, error) {
	agent := pick(b.rng, b.agents, func(a *scaleAgentState) int { return a.Weight })
	r := agent.run
	if r == nil || r.left == 0 {
		var err error
		if r, err = b.startRun(agent, at); err != nil {
			return nil, err
		}
	}
	r.left--
	r.last = at
	if r.left == 0 && r.undoWhole { // its last change: undone as a run later
		b.schedule(at.Add(10*time.Minute+b.between(20*time.Minute, 12*time.Hour)), func() error { return b.undoRun(r) })
	}
	fate := b.fates[i]
	undo := fate == ledger.Undone || fate == ledger.UndoFailed
	action := r.server.action(b.rng, undo)
	textRare := 0
	switch rare {
	case "action":
		action = scaleRareAction
	case "text":
		action, textRare = scaleServers[0].Actions[0], rareText
	}
	content := b.text.content(b.rng, action, textRare)
	by := agent.Name
	if rare == "by" {
		by = scaleProbes.ByRare
	}
	c := &scaleChange{fate: fate, action: action, content: content, Change: &ledger.Change{
		ID: randomID(b.rng, "chg_"), Action: action.Name, Status: ledger.Pending,
		ScopeHash: r.server.Scope, RunID: r.ID, Resource: content.Resource, Resources: content.Resources,
		DependsOn: content.DependsOn, Payload: content.Payload, PayloadHash: digestOf(content.Payload),
		Diff: content.Diff, Summary: content.Summary, Warnings: content.Warnings,
		ConfirmHash: randomDigest(b.rng), Undoable: action.Undoable, Transactional: action.Transactional,
		PreviewedBy: by, RedactFields: content.Redact,
		CreatedAt: at, UpdatedAt: at, ExpiresAt: at.Add(scalePreviewTTL),
	}}
	if content.Before != nil {
		c.StateHash = digestOf(content.Before)
	}
	if err := b.write(); err != nil {
		return nil, err
	}
	if err := b.tx.InsertChange(c.Change); err != nil {
		return nil, b.fail(fmt.Errorf("insert change %s: %w", c.ID, err))
	}
	b.res.Changes++
	b.res.ByStatus[ledger.Pending]++
	b.res.History++

	switch fate {
	case ledger.Pending: // a preview nobody applied: stale once its token expires
	case ledger.Expired: // expired by expire, or by a late claim
		b.schedule(c.ExpiresAt.Add(b.between(time.Second, 6*time.Hour)), func() error {
			return b.move(c, ledger.Expired, b.now(), func(c *ledger.Change) { c.ConfirmHash = "" })
		})
	default:
		applier := by
		if b.rng.IntN(10) == 0 {
			applier = scalePeople[b.rng.IntN(len(scalePeople))] // approved by a person
		}
		b.schedule(at.Add(b.between(3*time.Second, 10*time.Minute)), func() error { return b.apply(c, applier) })
		if undo && r.undoWhole {
			r.changes = append(r.changes, c)
		} else if undo {
			undoer := agent.Name
			if b.rng.IntN(10) < 3 {
				undoer = scalePeople[b.rng.IntN(len(scalePeople))] // from the dashboard
			}
			b.schedule(at.Add(10*time.Minute+b.between(5*time.Minute, 20*time.Hour)), func() error { return b.undo(c, undoer) })
		}
	}
	return c, nil
}

// startRun starts agent's next run at at.
func (b *builder) startRun(agent *scaleAgentState, at time.Time) (*scaleRun, error) {
	server := pick(b.rng, scaleServers, func(s *scaleServer) int { return s.Weight })
	size := min(1+int(b.rng.ExpFloat64()*9), 400)
	undoWhole := b.rng.IntN(100) < 6
	// The run whose page is measured: the busiest agent's first run
	// after the middle, of the same size at every scale, left open.
	typical := b.afterMiddle && b.res.TypicalRun == "" && agent.Name == scaleAgents[0].Name
	if typical {
		size, undoWhole = scaleRunSize, false
	}
	r := &scaleRun{server: server, agent: agent.Name, size: size, left: size, undoWhole: undoWhole,
		Run: &ledger.Run{ID: randomID(b.rng, "run_"), ScopeHash: server.Scope, Status: ledger.RunOpen, CreatedAt: at, UpdatedAt: at}}
	if b.rng.IntN(10) < 6 {
		r.Kind, r.SessionKey = ledger.RunSession, randomDigest(b.rng)
		r.Label = fmt.Sprintf("session of %s at %s", agent.Name, at.UTC().Format("2006-01-02 15:04"))
	} else {
		r.Kind = ledger.RunTask
		r.Label = fmt.Sprintf("%s: %s", []string{"Roll out", "Clean up", "Triage", "Migrate", "Fix"}[b.rng.IntN(5)], b.text.of(b.rng, 12+b.rng.IntN(30)))
	}
	if err := b.insertRun(r, agent.Name); err != nil {
		return nil, err
	}
	if b.afterMiddle && b.res.MiddleRun.ID == "" {
		b.res.MiddleRun = ledger.ChangeKey{CreatedAt: r.CreatedAt, ID: r.ID}
	}
	if typical {
		b.res.TypicalRun = r.ID
	}
	agent.run = r
	return r, nil
}

// apply claims c and records the outcome its fate says, by applier.
func (b *builder) apply(c *scaleChange, applier string) error {
	at := b.now()
	failed := c.fate == ledger.ApplyFailed
	done := func(c2 *ledger.Change) {
		c2.ConfirmHash, c2.AppliedBy = "", applier
		if failed && c.content.Before != nil && b.rng.IntN(3) > 0 {
			// The state check refused: the resource had moved.
			c2.Failure, c2.NothingWritten, c2.Before = ledger.FailureStateChanged, true, c.content.Before
			return
		}
		if failed { // the operation failed; a transactional one rolled back
			c2.Failure, c2.NothingWritten = ledger.FailureError, c2.Transactional
			c2.ErrorType, c2.Error = "*url.Error", "Post \"https://api.internal/v2/"+c.Action+"\": context deadline exceeded"
			return
		}
		c2.AppliedAt, c2.Result = c2.UpdatedAt, c.content.Result
		c2.Before, c2.After = c.content.Before, c.content.After
		if c2.Undoable {
			c2.UndoHash = randomDigest(b.rng)
		}
	}
	to := ledger.Applied
	if failed {
		to = ledger.ApplyFailed
	}
	if c.Transactional { // applied inside the claim's transaction
		return b.move(c, to, at, done)
	}
	if err := b.move(c, ledger.Applying, at, func(c2 *ledger.Change) { c2.ConfirmHash, c2.AppliedBy = "", applier }); err != nil {
		return err
	}
	return b.move(c, to, at.Add(b.between(20*time.Millisecond, 2*time.Second)), done)
}

// undo claims c's undo and records the outcome its fate says, by undoer.
func (b *builder) undo(c *scaleChange, undoer string) error {
	return b.undoAt(c, undoer, b.now())
}

func (b *builder) undoAt(c *scaleChange, undoer string, at time.Time) error {
	failed := c.fate == ledger.UndoFailed
	to := ledger.Undone
	if failed {
		to = ledger.UndoFailed
	}
	done := func(c2 *ledger.Change) {
		c2.UndoHash, c2.UndoneBy = "", undoer
		if failed {
			c2.Failure, c2.NothingWritten = ledger.FailureStateChanged, true
			c2.UndoFound = mustJSON(map[string]any{"edited_by": "a person", "value": b.text.of(b.rng, 20)})
			return
		}
		c2.UndoneAt = c2.UpdatedAt
	}
	if c.Transactional {
		return b.move(c, to, at, done)
	}
	if err := b.move(c, ledger.Undoing, at, func(c2 *ledger.Change) { c2.UndoHash, c2.UndoneBy = "", undoer }); err != nil {
		return err
	}
	return b.move(c, to, at.Add(b.between(20*time.Millisecond, 2*time.Second)), done)
}

// undoRun undoes r as a run, from the dashboard or by its agent: its
// changes fated to be undone, newest first; the others stay as they are.
func (b *builder) undoRun(r *scaleRun) error {
	at := b.now()
	undoer := r.agent
	if b.rng.IntN(2) == 0 {
		undoer = scalePeople[b.rng.IntN(len(scalePeople))]
	}
	r.UndoneBy = undoer
	if err := b.moveRun(r, ledger.RunUndoing, at); err != nil {
		return err
	}
	rep := changeset.RunReport{RunID: r.ID, Status: string(ledger.RunUndone), UndoneBy: undoer,
		NoNetChange: []changeset.RunStep{}, Skipped: []changeset.RunNote{}, Irreversible: []changeset.RunNote{}}
	for i := len(r.changes) - 1; i >= 0; i-- {
		c := r.changes[i]
		at = at.Add(b.between(5*time.Millisecond, 300*time.Millisecond))
		if err := b.undoAt(c, undoer, at); err != nil {
			return err
		}
		if c.Status == ledger.UndoFailed {
			rep.Status = string(ledger.RunPartiallyUndone)
			rep.Failed = append(rep.Failed, changeset.RunNote{ChangeID: c.ID, Action: c.Action, Resource: c.Resource,
				Resources: c.Resources, Summary: c.Summary, Reason: "its resource changed since the run", Drift: []changeset.Drift{}})
			continue
		}
		rep.Undone = append(rep.Undone, changeset.RunStep{ChangeID: c.ID, Action: c.Action, Summary: c.Summary,
			Resource: c.Resource, Resources: c.Resources, Transactional: c.Transactional})
	}
	report, err := json.Marshal(rep)
	if err != nil {
		return err
	}
	r.Report = report
	r.changes = nil
	return b.moveRun(r, ledger.RunStatus(rep.Status), at.Add(time.Millisecond))
}

// The scheduled transitions, in time order.

type event struct {
	at  time.Time
	seq int
	do  func() error
}

type eventQueue []*event

func (q eventQueue) Len() int { return len(q) }
func (q eventQueue) Less(i, j int) bool {
	if !q[i].at.Equal(q[j].at) {
		return q[i].at.Before(q[j].at)
	}
	return q[i].seq < q[j].seq
}
func (q eventQueue) Swap(i, j int) { q[i], q[j] = q[j], q[i] }
func (q *eventQueue) Push(x any)   { *q = append(*q, x.(*event)) }
func (q *eventQueue) Pop() any {
	old := *q
	e := old[len(old)-1]
	*q = old[:len(old)-1]
	return e
}

// schedule runs do at at, in time order with the changes created.
func (b *builder) schedule(at time.Time, do func() error) {
	b.seq++
	heap.Push(&b.events, &event{at: at, seq: b.seq, do: do})
}

// until runs every event scheduled before t.
func (b *builder) until(t time.Time) error {
	for b.events.Len() > 0 && b.events[0].at.Before(t) {
		e := heap.Pop(&b.events).(*event)
		b.clock = e.at
		if err := e.do(); err != nil {
			return err
		}
	}
	b.clock = time.Time{}
	return nil
}

// now is the time of the event being run.
func (b *builder) now() time.Time { return b.clock }
