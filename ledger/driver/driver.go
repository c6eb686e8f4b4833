// Package driver is what a ledger backend implements: the contract between
// package ledger, which holds the state machine and every rule of it once,
// and a database that stores the rows. Operators and trusted code never
// need it; they call package ledger. Write a backend against it as a
// database/sql driver is written against database/sql/driver.
//
// A backend is a package of its own that owns its SQL and its migrations
// (ledger/sqlite and ledger/postgres are the two of this module). It
// implements [Backend], and optionally [WriteQueue], [Compactor], [DurableWriter] and
// [ErrorInterpreter], and calls [Register] from its init so that
// [ledger.Open] reaches it by the scheme of a target:
//
//	func init() {
//		driver.Register("mydb", func(ctx context.Context, target string, opts ledger.OpenOptions) (driver.Backend, error) {
//			b, err := Open(ctx, target, opts)
//			if err != nil {
//				return nil, err // never a typed nil in the interface
//			}
//			return b, nil
//		})
//	}
//
//	var _ driver.Backend = (*Backend)(nil)
//
// Every backend must pass the conformance suite of package
// ledger/ledgertest, which drives it both directly (through [BackendOf])
// and through the Ledger above it.
//
// This package imports package ledger, whose rows (ledger.Change,
// ledger.Run, ledger.HistoryEntry) and filters the methods of a backend
// take and return; so package ledger, which must hold a backend, cannot
// import this one. It keeps an unexported copy of [Backend] instead, with
// the same methods (a test holds the two together), and finds the openers
// of [Register] through an internal package that imports neither.
// docs/design.md ("The backend seam") says why it is built so.
package driver

import (
	"context"
	"database/sql"
	"time"

	"github.com/mcp-changeset/changeset-go/ledger"
	"github.com/mcp-changeset/changeset-go/ledger/internal/seam"
)

// Querier is what a [Backend] runs its statements on: the database itself
// (*sql.DB) or a write transaction (*sql.Tx, from [Backend.BeginWrite]).
//
// It is an alias of an interface literal, not a type of its own, so that
// package ledger, which cannot import this package, names the very same
// type (see the package doc).
type Querier = interface {
	ExecContext(ctx context.Context, query string, args ...any) (sql.Result, error)
	QueryContext(ctx context.Context, query string, args ...any) (*sql.Rows, error)
	QueryRowContext(ctx context.Context, query string, args ...any) *sql.Row
}

// Backend is the contract of a ledger backend: one implementation per
// database, each owning its SQL and its migrations. The state machine
// lives in package ledger, above the Backend, so it is written once: a
// Backend stores and reads rows and checks only what a compare-and-set
// needs. Every backend passes the same conformance suite in package
// ledger/ledgertest. A Backend must be safe for concurrent use.
//
// Methods that write take a [Querier] so that they can run inside a
// transaction from [Backend.BeginWrite]. Methods report a missing row as
// [ledger.ErrNotFound] and a compare-and-set that matched no row as
// [ledger.ErrConflict]. Any other failure should be a *[ledger.Error] (see
// [ledger.Errorf]), wrapping one of package ledger's sentinels where one
// applies ([ledger.ErrBusy], [ledger.ErrFull], …).
//
// What the suite holds every backend to, beyond the methods' own
// promises: times are stored to the microsecond and read back in UTC; nil
// and empty JSON values and lists are kept apart; text and JSON are stored
// byte for byte (text that is not valid UTF-8 is refused or kept exactly).
// Each field of a row has a column of its own.
type Backend interface {
	// DB returns the database handle, for applications that keep their own
	// tables beside the ledger's.
	DB() *sql.DB
	// BeginWrite starts a transaction that holds the ledger's write lock
	// from its first statement (BEGIN IMMEDIATE on SQLite), so that a row
	// read inside it cannot change before the transaction ends. Reads of a
	// change inside it lock that row where the database has row locks.
	BeginWrite(ctx context.Context) (*sql.Tx, error)
	// Close releases the database.
	Close() error
	// Location describes the database for messages, without credentials.
	Location() string

	// InsertChange stores a new change. It fails if the ID exists.
	InsertChange(ctx context.Context, q Querier, c *ledger.Change) error
	// GetChange reads one change by ID.
	GetChange(ctx context.Context, q Querier, id string) (*ledger.Change, error)
	// UpdateChange writes every mutable column of c back, provided the
	// row's status is still from (compare-and-set). It sets nothing else.
	UpdateChange(ctx context.Context, q Querier, c *ledger.Change, from ledger.Status) error
	// ListChanges returns the changes that match f, newest first.
	ListChanges(ctx context.Context, q Querier, f ledger.ChangeFilter) ([]*ledger.Change, error)
	// CountChanges returns how many changes match f (its Limit and Before
	// are ignored).
	CountChanges(ctx context.Context, q Querier, f ledger.ChangeFilter) (int, error)
	// TallyChanges counts the changes that match f (its Limit and Before
	// are ignored) by action and status, without reading them.
	TallyChanges(ctx context.Context, q Querier, f ledger.ChangeFilter) ([]ledger.Tally, error)
	// DeleteChanges deletes the changes with the given IDs whose status is
	// still one of statuses, with their history entries, and reports how
	// many changes and entries it deleted. It keeps the link (Seq and
	// Hash) of each entry it deletes, for ListPrunedLinks.
	DeleteChanges(ctx context.Context, q Querier, ids []string, statuses []ledger.Status) (rows, entries int, err error)

	// InsertRun stores a new run. It fails if the ID exists.
	InsertRun(ctx context.Context, q Querier, r *ledger.Run) error
	// GetRun reads one run by ID.
	GetRun(ctx context.Context, q Querier, id string) (*ledger.Run, error)
	// UpdateRun writes every mutable column of r back, provided the run's
	// status is still from (compare-and-set).
	UpdateRun(ctx context.Context, q Querier, r *ledger.Run, from ledger.RunStatus) error
	// ListRuns returns the runs that match f, newest first.
	ListRuns(ctx context.Context, q Querier, f ledger.RunFilter) ([]*ledger.Run, error)
	// DeleteRuns deletes the runs with the given IDs that no change refers
	// to any more, with their history entries, and reports how many runs
	// and entries it deleted, keeping each entry's link as DeleteChanges
	// does.
	DeleteRuns(ctx context.Context, q Querier, ids []string) (rows, entries int, err error)

	// PrunableChanges returns the changes f selects (see
	// ledger.PruneFilter), newest first as ListChanges orders them, with
	// no more of each than its ID and its run. It must select them in
	// the database's own query language, through an index on the time of
	// the last update where the database has one, and never read every
	// row of the ledger with its payload: Prune calls it on ledgers of
	// millions of changes.
	PrunableChanges(ctx context.Context, q Querier, f ledger.PruneFilter) ([]ledger.PrunableChange, error)
	// PrunableRuns returns the runs in one of f.RunStatuses last updated
	// strictly before f.UpdatedBefore, newest first, each with the number
	// of changes it holds.
	PrunableRuns(ctx context.Context, q Querier, f ledger.PruneFilter) ([]ledger.PrunableRun, error)

	// GetMeta reads a value the library keeps beside the rows (e.g. the
	// server key for sealed request state); ok is false when it is unset.
	GetMeta(ctx context.Context, q Querier, key string) (value []byte, ok bool, err error)
	// SetMetaIfAbsent stores value under key unless the key exists, and
	// returns the value now stored.
	SetMetaIfAbsent(ctx context.Context, q Querier, key string, value []byte) ([]byte, error)

	// AppendHistory stores e, every field as given: the ledger numbers
	// and hashes it (Seq, Hash) after ChainHead, when the transaction of
	// a transition commits; nothing else should call it.
	AppendHistory(ctx context.Context, q Querier, e ledger.HistoryEntry) error
	// ListHistory returns the entries f selects, oldest first (by Seq),
	// with their Hash (the zero Hash when the stored one is missing or
	// not 32 bytes).
	ListHistory(ctx context.Context, q Querier, f ledger.HistoryFilter) ([]ledger.HistoryEntry, error)
	// ChainHead returns the history's newest link: the entry, or the link
	// of a pruned entry, with the highest Seq (or, on a backend that
	// keeps the head apart, the head it keeps); the zero Link when there
	// is none. A backend without ChainAppender must hold the chain for
	// the rest of q's write transaction, so that nobody appends between
	// this read and the ledger's appends (SQLite's write lock does).
	// Verify also calls it in its snapshot.
	ChainHead(ctx context.Context, q Querier) (ledger.Link, error)
	// ListPrunedLinks returns up to limit links of pruned entries (see
	// DeleteChanges) with a Seq above after, lowest Seq first.
	ListPrunedLinks(ctx context.Context, q Querier, after int64, limit int) ([]ledger.Link, error)
	// BeginSnapshot starts a read-only transaction that sees one
	// consistent state of the ledger for as long as it lasts, and takes
	// no lock (a read of a row in it locks nothing); it ends when ctx is
	// done, if not before. Ledger.Verify reads the chain in it.
	BeginSnapshot(ctx context.Context) (*sql.Tx, error)

	// InsertApproval stores a new approval. It fails if the ID exists.
	InsertApproval(ctx context.Context, q Querier, a *ledger.Approval) error
	// GetApproval reads one approval by ID, locking its row inside a
	// transaction where the database has row locks.
	GetApproval(ctx context.Context, q Querier, id string) (*ledger.Approval, error)
	// UpdateApproval writes every mutable column of a back, provided the
	// row's status is still from (compare-and-set).
	UpdateApproval(ctx context.Context, q Querier, a *ledger.Approval, from ledger.ApprovalStatus) error
	// ListApprovals returns the approvals that match f, newest first
	// (CreatedAt, then ID, descending), through indexes: the waiting ones
	// a page at a time, and those of one change or run.
	ListApprovals(ctx context.Context, q Querier, f ledger.ApprovalFilter) ([]*ledger.Approval, error)
	// InsertDecision stores a person's decision. A second decision of the
	// same person on the same approval fails with an error wrapping
	// ledger.ErrDecided.
	InsertDecision(ctx context.Context, q Querier, d ledger.Decision) error
	// ListDecisions returns the decisions of an approval, oldest first.
	ListDecisions(ctx context.Context, q Querier, approvalID string) ([]ledger.Decision, error)

	// InsertEvent stores a new event in the outbox.
	InsertEvent(ctx context.Context, q Querier, e *ledger.Event) error
	// LeaseEvents leases to f.Owner, until f.Until, up to f.Limit events
	// that are undelivered, due (NextAttemptAt not after f.Now) and not
	// leased (LeaseUntil not after f.Now), the soonest due first, counting
	// an attempt on each, and returns them as leased. Two callers, of one
	// process or of two, never lease one event while its lease is live:
	// on PostgreSQL the selection skips rows another transaction holds
	// (FOR UPDATE SKIP LOCKED).
	LeaseEvents(ctx context.Context, q Querier, f ledger.LeaseFilter) ([]*ledger.Event, error)
	// FinishEvent writes back the outcome of an attempt (DeliveredAt, or
	// NextAttemptAt and LastError), clearing the lease, provided the event
	// is still leased to e.LeaseOwner and undelivered; otherwise it fails
	// with an error wrapping ledger.ErrConflict.
	FinishEvent(ctx context.Context, q Querier, e *ledger.Event) error
	// ListEvents returns the events that match f, oldest first.
	ListEvents(ctx context.Context, q Querier, f ledger.EventFilter) ([]*ledger.Event, error)
	// DeleteEvents deletes up to limit events: those delivered strictly
	// before deliveredBefore, and every event, delivered or not, created
	// strictly before createdBefore (the zero time: none).
	DeleteEvents(ctx context.Context, q Querier, deliveredBefore, createdBefore time.Time, limit int) (int, error)

	// Check runs the database's own integrity check and returns one line per
	// problem it finds (none when the database is sound).
	Check(ctx context.Context) ([]string, error)
	// CheckRoutine is the routine check: what of Check can be checked at a
	// cost that does not grow with the ledger (for SQLite, the open-time
	// check of the pages where each b-tree starts and ends, and the
	// file's identity).
	CheckRoutine(ctx context.Context) ([]string, error)
}

// WriteQueue is implemented by backends whose database takes one writer at
// a time (SQLite). The Ledger takes a turn before each write transaction
// and gives it back when the transaction ends, so that the writers of one
// process wait in line instead of polling the database's lock, where one of
// them can starve past the busy timeout while others come and go. Writers
// of other processes still meet at the database's lock.
type WriteQueue interface {
	// TakeWriteTurn waits for this process's turn to write, at most the
	// busy timeout (then it fails with an error wrapping ledger.ErrBusy),
	// and returns the function that ends the turn.
	TakeWriteTurn(ctx context.Context) (release func(), err error)
}

// Compactor is implemented by backends that can give the space of deleted
// rows back to the disk. Ledger.Prune calls Yield between its
// transactions and Reclaim after it deletes, and Ledger.Vacuum calls
// Vacuum.
type Compactor interface {
	// Yield is called between two of Prune's write transactions, to let
	// the writers of other processes in: a database that takes one
	// writer at a time, whose waiting writers poll its lock, needs a gap
	// (SQLite), and one whose writers wait in line needs none.
	Yield(ctx context.Context) error
	// Size returns how many bytes the ledger takes on disk.
	Size(ctx context.Context) (int64, error)
	// Reclaim gives the space of deleted rows back to the disk as far as
	// it can while other writers go on: in steps that are each a short
	// write transaction (taking the process's write turn, see
	// WriteQueue, where the backend has one). It reports whether the
	// space went back to the disk; false means the database keeps it for
	// new rows, until Vacuum.
	Reclaim(ctx context.Context) (returned bool, err error)
	// Vacuum rewrites the database whole so that it takes no more space
	// than its rows need, holding off other writers (and, where the
	// database needs to, readers) while it runs. On SQLite it also
	// switches the file to incremental auto-vacuum, so that Reclaim
	// returns space from then on.
	Vacuum(ctx context.Context) error
}

// ChainAppender is implemented by backends that number and hash the
// history's entries in the database itself, in one statement that locks
// the chain's head, where writers of several processes run side by side
// (PostgreSQL): fewer round trips while the lock is held. Without it the
// ledger calls ChainHead, then AppendHistory for each entry.
type ChainAppender interface {
	// AppendChained stores e (its Seq and Hash ignored) as the next link
	// of the chain, in q's transaction, locking the chain's head until
	// the transaction ends, and returns the link it made: Seq one above
	// the head, Hash as ledger.HistoryHash computes it from the head's
	// hash.
	AppendChained(ctx context.Context, q Querier, e ledger.HistoryEntry) (ledger.Link, error)
}

// DurableWriter is implemented by backends that choose, transaction by
// transaction, how a commit reaches the disk, for [ledger.Durability].
// Without it every transaction of the Ledger is an ordinary one
// (BeginWrite), whose commit waits for the disk.
type DurableWriter interface {
	// BeginDurableWrite is BeginWrite for a lazy transaction (lazy: one
	// that claims nothing, [ledger.Ledger.WithLazyTx]) or for any other
	// (a claim, [ledger.Ledger.WithTx]). The Ledger calls end, when it is
	// not nil, once the transaction has ended (committed says whether it
	// committed), after it has given back the write turn, and a
	// non-nil error of end fails the commit.
	//
	// Under ledger.DurabilityFull every commit must be on the disk when
	// the Ledger's Commit returns. Under ledger.DurabilityClaims that
	// holds for the transactions that are not lazy; a lazy commit may
	// return once the database has it, and must reach the disk no later
	// than the next commit, of any process, that waits for it; a crash of
	// the application's process must lose none of them. A log written in
	// order and synced as a whole, as SQLite's write-ahead log and
	// PostgreSQL's are, gives both. A transaction leaves no trace on the
	// connections of the pool once end has returned.
	BeginDurableWrite(ctx context.Context, lazy bool) (tx *sql.Tx, end func(committed bool) error, err error)
}

// ErrorInterpreter is implemented by backends that can map their database
// driver's errors to the ledger's sentinel causes (ledger.ErrBusy,
// ledger.ErrFull, …). The Ledger uses it for the errors of BEGIN and
// COMMIT, which database/sql returns directly; without it they are wrapped
// as they are.
type ErrorInterpreter interface {
	InterpretError(op string, err error) error
}

// An Opener opens the backend for a target (a file path or a URL) with the
// options given to [ledger.Open] (BusyTimeout already defaulted). It returns
// an error, never a nil Backend.
type Opener func(ctx context.Context, target string, opts ledger.OpenOptions) (Backend, error)

// Register makes a backend available to [ledger.Open] for targets with the
// given URL scheme ("postgres"), or for plain file paths when scheme is
// "file". Backend packages call it from init, so importing the package is
// enough: package ledger/sqlite registers "file" and package
// ledger/postgres registers "postgres" and "postgresql". It panics if a
// scheme is registered twice.
func Register(scheme string, open Opener) {
	wrapped := func(ctx context.Context, target string, opts ledger.OpenOptions) (any, error) {
		b, err := open(ctx, target, opts)
		if err != nil {
			return nil, err
		}
		return b, nil
	}
	if !seam.Register(scheme, wrapped) {
		panic("ledger/driver: backend registered twice for scheme " + scheme)
	}
}

// NewLedger wraps an open backend in a [ledger.Ledger], with time.Now as
// the ledger's clock, bypassing Register and [ledger.Open]. It is for the tests
// of a backend (a Backend opened with options of their own, or wrapped to
// watch its calls); applications open ledgers with ledger.Open.
func NewLedger(b Backend) *ledger.Ledger {
	return seam.NewLedger(b).(*ledger.Ledger)
}

// BackendOf returns the backend under l, for the conformance suite and the
// tests of a backend, which call its methods directly or check its type.
// Nothing else should: writing rows past the Ledger skips its state machine
// and its history.
func BackendOf(l *ledger.Ledger) Backend {
	return seam.BackendOf(l).(Backend)
}
