package ledger

import (
	"context"
	"database/sql"
	"time"
)

// Querier is what a Backend runs its statements on: the database itself
// (*sql.DB) or a write transaction (*sql.Tx).
type Querier interface {
	ExecContext(ctx context.Context, query string, args ...any) (sql.Result, error)
	QueryContext(ctx context.Context, query string, args ...any) (*sql.Rows, error)
	QueryRowContext(ctx context.Context, query string, args ...any) *sql.Row
}

// Backend is the storage seam of the ledger: one implementation per
// database, each owning its SQL and its migrations. The state machine lives
// in this package, above the Backend, so it is written once; every backend
// passes the same conformance suite in package ledger/ledgertest.
//
// Methods that write take a Querier so that they can run inside a
// transaction from [Backend.BeginWrite]. Methods report a missing row as
// [ErrNotFound] and a compare-and-set that matched no row as [ErrConflict].
// Any other failure should be an *Error.
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
	InsertChange(ctx context.Context, q Querier, c *Change) error
	// GetChange reads one change by ID.
	GetChange(ctx context.Context, q Querier, id string) (*Change, error)
	// UpdateChange writes every mutable column of c back, provided the
	// row's status is still from (compare-and-set). It sets nothing else.
	UpdateChange(ctx context.Context, q Querier, c *Change, from Status) error
	// ListChanges returns the changes that match f, newest first.
	ListChanges(ctx context.Context, q Querier, f ChangeFilter) ([]*Change, error)
	// CountChanges returns how many changes match f (its Limit and Before
	// are ignored).
	CountChanges(ctx context.Context, q Querier, f ChangeFilter) (int, error)
	// TallyChanges counts the changes that match f (its Limit and Before
	// are ignored) by action and status, without reading them.
	TallyChanges(ctx context.Context, q Querier, f ChangeFilter) ([]Tally, error)
	// DeleteChanges deletes the changes with the given IDs whose status is
	// still one of statuses and reports how many it deleted.
	DeleteChanges(ctx context.Context, q Querier, ids []string, statuses []Status) (int, error)

	// InsertRun stores a new run. It fails if the ID exists.
	InsertRun(ctx context.Context, q Querier, r *Run) error
	// GetRun reads one run by ID.
	GetRun(ctx context.Context, q Querier, id string) (*Run, error)
	// UpdateRun writes every mutable column of r back, provided the run's
	// status is still from (compare-and-set).
	UpdateRun(ctx context.Context, q Querier, r *Run, from RunStatus) error
	// ListRuns returns the runs that match f, newest first.
	ListRuns(ctx context.Context, q Querier, f RunFilter) ([]*Run, error)
	// DeleteRuns deletes the runs with the given IDs that no change refers
	// to any more and reports how many it deleted.
	DeleteRuns(ctx context.Context, q Querier, ids []string) (int, error)

	// GetMeta reads a value the library keeps beside the rows (e.g. the
	// server key for sealed request state); ok is false when it is unset.
	GetMeta(ctx context.Context, q Querier, key string) (value []byte, ok bool, err error)
	// SetMetaIfAbsent stores value under key unless the key exists, and
	// returns the value now stored.
	SetMetaIfAbsent(ctx context.Context, q Querier, key string, value []byte) ([]byte, error)

	// AppendHistory appends e to the history (its Seq is assigned by the
	// database and ignored here). The ledger calls it in the transaction
	// of every transition; nothing else should.
	AppendHistory(ctx context.Context, q Querier, e HistoryEntry) error
	// ListHistory returns the entries f selects, oldest first (by Seq).
	ListHistory(ctx context.Context, q Querier, f HistoryFilter) ([]HistoryEntry, error)

	// Check runs the database's own integrity check and returns one line per
	// problem it finds (none when the database is sound).
	Check(ctx context.Context) ([]string, error)
}

// WriteQueue is implemented by backends whose database takes one writer at
// a time (SQLite). The Ledger takes a turn before each write transaction
// and gives it back when the transaction ends, so that the writers of one
// process wait in line instead of polling the database's lock, where one of
// them can starve past the busy timeout while others come and go. Writers
// of other processes still meet at the database's lock.
type WriteQueue interface {
	// TakeWriteTurn waits for this process's turn to write, at most the
	// busy timeout (then it fails with an error wrapping ErrBusy), and
	// returns the function that ends the turn.
	TakeWriteTurn(ctx context.Context) (release func(), err error)
}

// ChangeFilter selects changes for [Backend.ListChanges]. Zero fields do
// not filter.
type ChangeFilter struct {
	Statuses      []Status
	RunID         string
	ScopeHash     Digest
	UpdatedBefore time.Time // updated strictly before this instant
	// UpdatedSince selects changes updated at or after this instant
	// (mcp-changeset list --since, the dashboard's since filter).
	UpdatedSince time.Time
	// Action selects the changes of one operation, e.g. "set_setting".
	Action string
	// Text selects changes whose summary, action or resource contains it,
	// ignoring the case of ASCII letters. It is matched literally (% and
	// _ are not wildcards) and at most MaxFilterText bytes long.
	Text string
	// ExpiresAfter selects changes whose confirmation token expires
	// strictly after this instant (pending previews still usable).
	ExpiresAfter time.Time
	// DependsOn selects changes whose DependsOn lists this resource.
	DependsOn string
	// DependsOnAny selects changes whose DependsOn lists any of these
	// resources (at most MaxDependsOnAny; a run's undo asks once for all
	// the resources it would remove).
	DependsOnAny []string
	// By selects changes that this actor previewed, applied or undid
	// (PreviewedBy, AppliedBy or UndoneBy equal to it).
	By string
	// Before selects changes that come after this key in the list's
	// order (newest first): created earlier, or at the same microsecond
	// with a smaller ID. It is how callers page through a list.
	Before *ChangeKey
	Limit  int // at most this many; 0 means all
}

// Tally is how many changes of one action are in one status, and when the
// newest of them was last updated: what a summary of a run needs, without
// its rows.
type Tally struct {
	Action  string
	Status  Status
	N       int
	Updated time.Time
}

// MaxDependsOnAny bounds ChangeFilter.DependsOnAny: Ledger.ListChanges
// refuses more, so that one statement's parameters stay within every
// backend's limits.
const MaxDependsOnAny = 500

// MaxFilterText bounds ChangeFilter.Text: Ledger.ListChanges refuses a
// longer search rather than send it to the database.
const MaxFilterText = 200

// ChangeKey is a change's place in a list, newest first: its creation time
// and ID. A page's last key starts the next page (ChangeFilter.Before).
type ChangeKey struct {
	CreatedAt time.Time
	ID        string
}

// RunFilter selects runs for [Backend.ListRuns]. Zero fields do not filter.
type RunFilter struct {
	Statuses      []RunStatus
	ScopeHash     Digest
	Kind          RunKind
	SessionKey    Digest
	UpdatedBefore time.Time // updated strictly before this instant
	UpdatedSince  time.Time // updated at or after this instant
	// Before selects runs that come after this key in the list's order
	// (newest first), as ChangeFilter.Before does for changes: a page's
	// last run (its CreatedAt and ID) starts the next page.
	Before *ChangeKey
	Limit  int
}
