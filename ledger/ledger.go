package ledger

import (
	"context"
	"database/sql"
	"encoding/json"
	"errors"
	"fmt"
	"math/rand/v2"
	"strings"
	"sync"
	"time"
	"unicode/utf8"
)

// Ledger is an open ledger: a backend (see package ledger/driver) under
// the state machine that every backend shares. It is safe for concurrent use by many goroutines, and a
// ledger file or database may be shared by many processes.
//
// Times. A transition made in a [Tx] takes its time from the row its
// caller writes (UpdatedAt, or CreatedAt for a new row): the ledger
// records it in the history as it is, so many callers on one Ledger (two
// Guards, each with a clock of its own) each record their own times. The
// ledger's own clock, fixed when it is opened ([OpenOptions].Clock) and
// never changed after, is read only by what the ledger does on its own:
// [Ledger.ExpireStale], [Ledger.Prune], [Ledger.Reconcile],
// [Ledger.ReconcileRun] and [Ledger.Check], and the history entry of a row
// that carries no time.
type Ledger struct {
	b   backend
	now func() time.Time // fixed at Open; never reassigned

	redactMu  sync.Mutex
	redactKey []byte // loaded from the meta table on first use
}

// Now reads the ledger's clock: [OpenOptions].Clock, or time.Now. It is
// the "now" of ExpireStale, Prune, Reconcile and Check; see [Ledger] for
// the times of the transitions callers make.
func (l *Ledger) Now() time.Time { return l.now() }

// DB returns the ledger's database, so that an application can keep its own
// tables beside the ledger's (with migrations of its own). The ledger's
// tables belong to the ledger: never write them directly.
func (l *Ledger) DB() *sql.DB { return l.b.DB() }

// Location describes the ledger for messages (a path, or a URL without
// credentials).
func (l *Ledger) Location() string { return l.b.Location() }

// Close closes the ledger.
func (l *Ledger) Close() error { return l.b.Close() }

// Tx is a write transaction on the ledger. It holds the ledger's write lock
// (SQLite) or the locks of the rows it read (PostgreSQL) until it ends.
type Tx struct {
	ctx     context.Context
	l       *Ledger
	b       backend
	tx      *sql.Tx
	release func()                     // ends the write turn (driver.WriteQueue); nil without one
	done    func(committed bool) error // the backend's end of the transaction (driver.DurableWriter); nil without one

	// lazy: the transaction was begun by WithLazyTx and may not claim.
	lazy bool

	// override names who makes the next transition, for the moves an
	// operator makes (Reconcile), which the row cannot tell.
	override *actor

	// entries are the history entries of the transaction's transitions,
	// written by Commit (see seal).
	entries []HistoryEntry
}

// end gives back the write turn, then ends the backend's transaction,
// once, and returns what the backend's end returned.
func (tx *Tx) end(committed bool) error {
	if tx.release != nil {
		tx.release()
		tx.release = nil
	}
	if tx.done == nil {
		return nil
	}
	done := tx.done
	tx.done = nil
	return done(committed)
}

// SQL returns the underlying transaction, for operations whose own writes
// must commit or roll back together with the ledger's bookkeeping.
func (tx *Tx) SQL() *sql.Tx { return tx.tx }

// Change reads a change inside the transaction, locking its row where
// the database has row locks. It returns an error wrapping ErrNotFound
// when there is none. Like every method of Tx, it runs with the context
// the transaction began with.
func (tx *Tx) Change(id string) (*Change, error) { return tx.b.GetChange(tx.ctx, tx.tx, id) }

// InsertChange stores a new change, and its first history entry ("" →
// its status, normally pending, by c.PreviewedBy).
func (tx *Tx) InsertChange(c *Change) error {
	if tx.lazy && claims("", c.Status) {
		return lazyClaimError("change", c.ID, "", string(c.Status))
	}
	if err := tx.b.InsertChange(tx.ctx, tx.tx, c); err != nil {
		return err
	}
	return tx.appendHistory(changeEntry(c, "", nil))
}

// UpdateChange writes c back if its status is still from. A move from
// from to c.Status that the state machine does not allow (see
// Status.CanMoveTo) is refused with an error wrapping ErrTransition before
// anything is read or written. A change that becomes terminal has its
// RedactFields redacted first (see Redact). A move to another status
// appends its entry to the history (see HistoryEntry) in the same
// transaction, and a move to ApplyFailed or UndoFailed a change.failed
// event to the outbox; a row rewritten in the same status appends
// nothing.
func (tx *Tx) UpdateChange(c *Change, from Status) error {
	override := tx.override // for this transition only, whatever happens
	tx.override = nil
	if !from.CanMoveTo(c.Status) {
		return transitionError("change", c.ID, string(from), string(c.Status))
	}
	if tx.lazy && claims(from, c.Status) {
		return lazyClaimError("change", c.ID, string(from), string(c.Status))
	}
	if c.Status.Terminal() && len(c.RedactFields) > 0 && c.RedactedAt.IsZero() {
		if err := tx.l.redact(tx, c); err != nil {
			return err
		}
	}
	if err := tx.b.UpdateChange(tx.ctx, tx.tx, c, from); err != nil {
		return err
	}
	if from == c.Status {
		return nil
	}
	if err := tx.appendHistory(changeEntry(c, from, override)); err != nil {
		return err
	}
	if c.Status == ApplyFailed || c.Status == UndoFailed {
		action := c.Action
		if c.Status == UndoFailed {
			action = "undo " + action
		}
		_, err := tx.AddEvent(EventBody{Event: EventChangeFailed, At: c.UpdatedAt, ChangeID: c.ID, RunID: c.RunID,
			Action: action, Summary: c.Summary, RequestedBy: c.PreviewedBy})
		return err
	}
	return nil
}

// Changes returns the changes that match f inside the transaction, newest
// first.
func (tx *Tx) Changes(f ChangeFilter) ([]*Change, error) {
	if err := f.check(); err != nil {
		return nil, err
	}
	return tx.b.ListChanges(tx.ctx, tx.tx, f)
}

// CountChanges counts the changes that match f inside the transaction
// (f's Limit and Before are ignored).
func (tx *Tx) CountChanges(f ChangeFilter) (int, error) {
	if err := f.check(); err != nil {
		return 0, err
	}
	return tx.b.CountChanges(tx.ctx, tx.tx, f)
}

// TallyChanges counts the changes that match f inside the transaction by
// action and status, sorted by action then status, without reading them
// (see Tally).
func (tx *Tx) TallyChanges(f ChangeFilter) ([]Tally, error) {
	if err := f.check(); err != nil {
		return nil, err
	}
	return tx.b.TallyChanges(tx.ctx, tx.tx, f)
}

// Run reads a run inside the transaction, locking its row where the
// database has row locks. It returns an error wrapping ErrNotFound when
// there is none.
func (tx *Tx) Run(id string) (*Run, error) { return tx.b.GetRun(tx.ctx, tx.tx, id) }

// Runs returns the runs that match f inside the transaction, newest first.
func (tx *Tx) Runs(f RunFilter) ([]*Run, error) { return tx.b.ListRuns(tx.ctx, tx.tx, f) }

// InsertRun stores a new run, and its first history entry ("" → open),
// made by nobody (the library). InsertRunBy names who started it.
func (tx *Tx) InsertRun(r *Run) error { return tx.InsertRunBy(r, "") }

// InsertRunBy stores a new run, and its first history entry ("" → open)
// made by by (e.g. "agent:alice", who called start_run or whose preview
// opened a session run), and records by as the run's StartedBy unless it
// is set already.
func (tx *Tx) InsertRunBy(r *Run, by string) error {
	if tx.lazy && claimsRun("", r.Status) {
		return lazyClaimError("run", r.ID, "", string(r.Status))
	}
	if r.StartedBy == "" {
		r.StartedBy = by
	}
	if err := tx.b.InsertRun(tx.ctx, tx.tx, r); err != nil {
		return err
	}
	var who *actor
	if by != "" {
		who = &actor{by: by}
	}
	return tx.appendHistory(runEntry(r, "", who))
}

// UpdateRun writes r back if its status is still from. A move from from
// to r.Status that the state machine does not allow (see
// RunStatus.CanMoveTo) is refused with an error wrapping ErrTransition
// before anything is written. A move to another status appends its entry
// to the history in the same transaction, and a move to undone or
// partially_undone a run.undone event to the outbox; a rewrite in the
// same status (a dry run storing its token) appends nothing.
func (tx *Tx) UpdateRun(r *Run, from RunStatus) error {
	override := tx.override // for this transition only, whatever happens
	tx.override = nil
	if !from.CanMoveTo(r.Status) {
		return transitionError("run", r.ID, string(from), string(r.Status))
	}
	if tx.lazy && claimsRun(from, r.Status) {
		return lazyClaimError("run", r.ID, string(from), string(r.Status))
	}
	if err := tx.b.UpdateRun(tx.ctx, tx.tx, r, from); err != nil {
		return err
	}
	if from == r.Status {
		return nil
	}
	if err := tx.appendHistory(runEntry(r, from, override)); err != nil {
		return err
	}
	if r.Status == RunUndone || r.Status == RunPartiallyUndone {
		_, err := tx.AddEvent(EventBody{Event: EventRunUndone, At: r.UpdatedAt, RunID: r.ID,
			Action: "undo_run", Summary: r.Label, DecidedBy: r.UndoneBy})
		return err
	}
	return nil
}

// WithTx runs fn inside one write transaction and commits it if fn returns
// nil; otherwise it rolls back and returns fn's error. To record a refusal
// (e.g. mark a change expired) and still report it, fn should make the
// write, remember the refusal in a variable and return nil.
//
// When the database aborts the transaction to resolve a conflict
// (ErrRetry), WithTx runs fn again in a new transaction, a few times, so fn
// must set everything it reports afresh on each call.
//
// Its commit waits for the disk whatever the ledger's [Durability]; a
// transaction that claims nothing may use [Ledger.WithLazyTx] instead.
func (l *Ledger) WithTx(ctx context.Context, fn func(tx *Tx) error) error {
	return l.retry(ctx, l.Begin, fn)
}

// retry runs fn in a transaction from begin, again after ErrRetry, a few
// times (see WithTx).
func (l *Ledger) retry(ctx context.Context, begin func(context.Context) (*Tx, error), fn func(tx *Tx) error) error {
	const attempts = 4
	var err error
	for attempt := 1; attempt <= attempts; attempt++ {
		if err = withTx(ctx, begin, fn); !errors.Is(err, ErrRetry) || ctx.Err() != nil {
			return err
		}
		if attempt < attempts {
			time.Sleep(time.Duration(attempt*(5+rand.IntN(10))) * time.Millisecond)
		}
	}
	return err
}

// withTx is one attempt of retry.
func withTx(ctx context.Context, begin func(context.Context) (*Tx, error), fn func(tx *Tx) error) error {
	tx, err := begin(ctx)
	if err != nil {
		return err
	}
	if err := fn(tx); err != nil {
		_ = tx.Rollback()
		return err
	}
	return tx.Commit()
}

// Begin starts a write transaction for callers whose transaction spans more
// than one function (WithTx is simpler for the rest). The caller must end it
// with Commit or Rollback. Its commit waits for the disk whatever the
// ledger's [Durability].
func (l *Ledger) Begin(ctx context.Context) (*Tx, error) {
	return l.begin(ctx, false)
}

// begin takes this process's write turn (driver.WriteQueue) and starts a
// transaction, lazy or not (driver.DurableWriter).
func (l *Ledger) begin(ctx context.Context, lazy bool) (*Tx, error) {
	var release func()
	if q, ok := l.b.(writeQueue); ok {
		r, err := q.TakeWriteTurn(ctx)
		if err != nil {
			return nil, err
		}
		release = r
	}
	var (
		sqlTx *sql.Tx
		done  func(bool) error
		err   error
	)
	if dw, ok := l.b.(durableWriter); ok {
		sqlTx, done, err = dw.BeginDurableWrite(ctx, lazy)
	} else {
		sqlTx, err = l.b.BeginWrite(ctx)
	}
	if err != nil {
		if release != nil {
			release()
		}
		return nil, l.interpret("begin transaction on", err)
	}
	return &Tx{ctx: ctx, l: l, b: l.b, tx: sqlTx, release: release, done: done, lazy: lazy}, nil
}

// Commit commits a transaction from Begin. It returns once the commit is
// as durable as the ledger's [Durability] asks.
func (tx *Tx) Commit() error {
	if err := tx.seal(); err != nil {
		_ = tx.Rollback()
		return err
	}
	err := tx.tx.Commit()
	if err != nil {
		_ = tx.end(false)
		return tx.l.interpret("commit to", err)
	}
	if err := tx.end(true); err != nil {
		return tx.l.interpret("sync the commit to", err)
	}
	return nil
}

// interpret wraps an error of the database for operation op: through the
// backend's driver.ErrorInterpreter when it has one, which maps the errors
// of BEGIN and COMMIT (database/sql returns them directly) to the
// sentinel causes (busy, full, …).
func (l *Ledger) interpret(op string, err error) error {
	if i, ok := l.b.(errorInterpreter); ok {
		return i.InterpretError(op, err)
	}
	return Errorf(op, l.b.Location(), err)
}

// Rollback rolls back a transaction from Begin. It does nothing after
// Commit.
func (tx *Tx) Rollback() error {
	err := tx.tx.Rollback()
	_ = tx.end(false)
	return err
}

// Change reads one change. It returns an error wrapping ErrNotFound when
// there is none.
func (l *Ledger) Change(ctx context.Context, id string) (*Change, error) {
	return l.b.GetChange(ctx, l.b.DB(), id)
}

// Changes returns the changes that match f, newest first. The zero
// filter selects every change; a filter over MaxDependsOnAny or
// MaxFilterText is refused.
func (l *Ledger) Changes(ctx context.Context, f ChangeFilter) ([]*Change, error) {
	if err := f.check(); err != nil {
		return nil, err
	}
	return l.b.ListChanges(ctx, l.b.DB(), f)
}

// CountChanges counts the changes that match f (f's Limit and Before are
// ignored), without reading them.
func (l *Ledger) CountChanges(ctx context.Context, f ChangeFilter) (int, error) {
	if err := f.check(); err != nil {
		return 0, err
	}
	return l.b.CountChanges(ctx, l.b.DB(), f)
}

// TallyChanges counts the changes that match f by action and status,
// sorted by action then status, without reading them (see Tally).
func (l *Ledger) TallyChanges(ctx context.Context, f ChangeFilter) ([]Tally, error) {
	if err := f.check(); err != nil {
		return nil, err
	}
	return l.b.TallyChanges(ctx, l.b.DB(), f)
}

// Run reads one run. It returns an error wrapping ErrNotFound when there
// is none.
func (l *Ledger) Run(ctx context.Context, id string) (*Run, error) {
	return l.b.GetRun(ctx, l.b.DB(), id)
}

// Runs returns the runs that match f, newest first.
func (l *Ledger) Runs(ctx context.Context, f RunFilter) ([]*Run, error) {
	return l.b.ListRuns(ctx, l.b.DB(), f)
}

// Meta reads a value that trusted code keeps beside the ledger's rows
// under key (the server's approval key, for one); ok is false when the
// key is unset. Keys are the caller's to namespace ("changeset.…" is the
// library's).
func (l *Ledger) Meta(ctx context.Context, key string) (value []byte, ok bool, err error) {
	return l.b.GetMeta(ctx, l.b.DB(), key)
}

// SetMetaIfAbsent stores value under key unless the key is already set,
// and returns the value now stored: of several processes setting one key
// at once, all get the value stored first. A stored value is never
// replaced.
func (l *Ledger) SetMetaIfAbsent(ctx context.Context, key string, value []byte) ([]byte, error) {
	return l.b.SetMetaIfAbsent(ctx, l.b.DB(), key, value)
}

// ExpireStale moves every pending change whose confirmation token has
// expired by the ledger's clock (see [Ledger.Now]) to Expired, at that
// time, and returns the IDs it moved. A pending row otherwise stays
// pending until someone tries to apply it, and pending rows are never
// pruned, so run this before pruning.
func (l *Ledger) ExpireStale(ctx context.Context) ([]string, error) {
	return l.expireStale(ctx, false)
}

// StaleChanges returns the IDs ExpireStale would move, changing nothing.
func (l *Ledger) StaleChanges(ctx context.Context) ([]string, error) {
	return l.expireStale(ctx, true)
}

func (l *Ledger) expireStale(ctx context.Context, dryRun bool) ([]string, error) {
	now := l.now()
	if sf, ok := l.b.(staleFinder); ok {
		return l.expireFound(ctx, sf, now, dryRun)
	}
	var ids []string
	// A page of pending changes at a time: those it expires leave the
	// filter behind the cursor, which the next page starts from.
	for page, err := range l.changePages(ctx, l.b.DB(), ChangeFilter{Statuses: []Status{Pending}}) {
		if err != nil {
			return ids, err
		}
		var due []string
		for _, c := range page {
			if !now.Before(c.ExpiresAt) {
				due = append(due, c.ID)
			}
		}
		moved, err := l.expireIDs(ctx, due, now, dryRun)
		ids = append(ids, moved...)
		if err != nil {
			return ids, err
		}
	}
	return ids, nil
}

// staleFinder is a backend that finds the pending changes whose token has
// expired by a time (ExpiresAt at or before it, or unset) from an index
// alone, newest first, at most limit of them after the key after (nil:
// from the newest), without reading their rows. Both of this module's
// backends are; expiry then costs one index entry per pending change
// however large their rows, where reading each row (the payload, the diff
// and the states) would cost a page or more per change.
type staleFinder interface {
	StaleChanges(ctx context.Context, q querier, now time.Time, after *ChangeKey, limit int) ([]ChangeKey, error)
}

// expireFound expires (or on a dry run lists) the changes sf finds stale
// at now, a page at a time.
func (l *Ledger) expireFound(ctx context.Context, sf staleFinder, now time.Time, dryRun bool) ([]string, error) {
	var ids []string
	var after *ChangeKey
	for {
		keys, err := sf.StaleChanges(ctx, l.b.DB(), now, after, scanPage)
		if err != nil {
			return ids, err
		}
		due := make([]string, len(keys))
		for i, k := range keys {
			due[i] = k.ID
		}
		moved, err := l.expireIDs(ctx, due, now, dryRun)
		ids = append(ids, moved...)
		if err != nil || len(keys) < scanPage {
			return ids, err
		}
		after = &keys[len(keys)-1]
	}
}

// expireBatch is how many changes one expiry transaction moves, so that
// a live server's claims wait at most one short batch.
const expireBatch = 100

// expireIDs expires the changes due whose token has expired at now (or,
// on a dry run, only returns due) and returns the IDs it moved. It moves
// them expireBatch to a transaction, reading each again inside it: a
// change claimed, expired or pruned meanwhile is left as it is.
func (l *Ledger) expireIDs(ctx context.Context, due []string, now time.Time, dryRun bool) ([]string, error) {
	var ids []string
	if dryRun {
		return due, nil
	}
	for start := 0; start < len(due); start += expireBatch {
		batch := due[start:min(start+expireBatch, len(due))]
		var moved []string
		err := l.WithTx(ctx, func(tx *Tx) error {
			moved = moved[:0] // WithTx may run this again
			for _, id := range batch {
				c, err := tx.Change(id)
				if errors.Is(err, ErrNotFound) {
					continue
				}
				if err != nil {
					return err
				}
				if c.Status != Pending || now.Before(c.ExpiresAt) {
					continue
				}
				c.Status, c.ConfirmHash, c.UpdatedAt = Expired, "", now
				c.Failure, c.NothingWritten = "", false // expiry is not a failure
				if err := tx.UpdateChange(c, Pending); err != nil {
					return err
				}
				moved = append(moved, c.ID)
			}
			return nil
		})
		if err != nil {
			return ids, err
		}
		ids = append(ids, moved...)
	}
	return ids, nil
}

// Reconcile closes a change that a process left in flight (it died or was
// cancelled while applying or undoing): Applying becomes ApplyFailed and
// Undoing becomes UndoFailed, with note stored beside it, at the time the
// ledger's clock reads. Call it only after checking what actually happened
// to the resource: the ledger cannot know whether the write took place.
// Any other status is refused.
func (l *Ledger) Reconcile(ctx context.Context, id, note, by string) (*Change, error) {
	if note == "" {
		return nil, fmt.Errorf("reconcile %s: a note saying what you checked is required", id)
	}
	if !utf8.ValidString(note) || strings.ContainsRune(note, 0) {
		return nil, fmt.Errorf("reconcile %s: the note must be valid UTF-8 without NUL bytes", id)
	}
	var out *Change
	err := l.WithTx(ctx, func(tx *Tx) error {
		c, err := tx.Change(id)
		if err != nil {
			return err
		}
		from := c.Status
		switch from {
		case Applying:
			c.Status = ApplyFailed
		case Undoing:
			c.Status = UndoFailed
		default:
			return fmt.Errorf("change %s cannot be reconciled (status: %s): only applying and undoing changes can", id, from)
		}
		c.Note = note
		if by != "" {
			c.Note = note + " (" + by + ")"
		}
		c.ErrorType, c.Error = "Reconciled", "reconciled by an operator: "+note
		// Whether the write happened is what the operator checked, not
		// what the ledger knows.
		c.Failure, c.NothingWritten = FailureInterrupted, false
		c.ConfirmHash, c.UndoHash, c.UpdatedAt = "", "", l.now()
		tx.override = &actor{by: by, note: "reconciled: " + note}
		if err := tx.UpdateChange(c, from); err != nil {
			return err
		}
		out = c
		return nil
	})
	return out, err
}

// ReconcileRun closes a run whose undo was interrupted (the process died
// while undoing it, leaving the run undoing): it becomes partially_undone,
// with a stored report that carries note and says so. The run's changes
// keep their own statuses: reconcile any change left undoing first, and
// check them with Changes. Any status other than undoing is refused.
func (l *Ledger) ReconcileRun(ctx context.Context, id, note, by string) (*Run, error) {
	if note == "" {
		return nil, fmt.Errorf("reconcile %s: a note saying what you checked is required", id)
	}
	var out *Run
	err := l.WithTx(ctx, func(tx *Tx) error {
		r, err := tx.Run(id)
		if err != nil {
			return err
		}
		if r.Status != RunUndoing {
			return fmt.Errorf("run %s cannot be reconciled (status: %s): only a run left undoing can", id, r.Status)
		}
		report, err := json.Marshal(map[string]any{
			"run_id": id, "dry_run": false, "status": RunPartiallyUndone,
			"no_net_change": []any{}, "skipped": []any{}, "irreversible": []any{},
			"undone_by": by, "note": "the undo was interrupted and reconciled by an operator: " + note,
		})
		if err != nil {
			return err
		}
		r.Status, r.Report, r.UpdatedAt = RunPartiallyUndone, report, l.now()
		if by != "" {
			r.UndoneBy = by
		}
		tx.override = &actor{by: by, note: "reconciled: " + note}
		if err := tx.UpdateRun(r, RunUndoing); err != nil {
			return err
		}
		out = r
		return nil
	})
	return out, err
}
