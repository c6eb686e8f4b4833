package ledger

import (
	"context"
	"database/sql"
	"fmt"
	"time"

	"github.com/mcp-changeset/changeset-go/ledger/internal/seam"
)

// What a backend implements is package ledger/driver's: driver.Backend,
// documented there as the contract of a backend. Package driver imports
// this package (a backend's methods take and return its rows), so this
// package cannot import driver; it keeps instead, unexported, the same
// interfaces as it sees them. A value of driver.Backend is a backend here,
// and the reverse, because the two method sets are identical: the Querier
// their methods take is one interface literal, aliased in both packages,
// and drift_test.go fails when a method is added, removed or changed on
// one side only. The openers that driver.Register records, and the two
// functions package driver needs from this one (driver.NewLedger,
// driver.BackendOf), pass through package ledger/internal/seam, which
// imports neither.

// querier is driver.Querier: the database (*sql.DB) or a write
// transaction (*sql.Tx).
type querier = interface {
	ExecContext(ctx context.Context, query string, args ...any) (sql.Result, error)
	QueryContext(ctx context.Context, query string, args ...any) (*sql.Rows, error)
	QueryRowContext(ctx context.Context, query string, args ...any) *sql.Row
}

// backend is driver.Backend; its methods are documented there.
type backend interface {
	DB() *sql.DB
	BeginWrite(ctx context.Context) (*sql.Tx, error)
	Close() error
	Location() string

	InsertChange(ctx context.Context, q querier, c *Change) error
	GetChange(ctx context.Context, q querier, id string) (*Change, error)
	UpdateChange(ctx context.Context, q querier, c *Change, from Status) error
	ListChanges(ctx context.Context, q querier, f ChangeFilter) ([]*Change, error)
	CountChanges(ctx context.Context, q querier, f ChangeFilter) (int, error)
	TallyChanges(ctx context.Context, q querier, f ChangeFilter) ([]Tally, error)
	DeleteChanges(ctx context.Context, q querier, ids []string, statuses []Status) (rows, entries int, err error)

	InsertRun(ctx context.Context, q querier, r *Run) error
	GetRun(ctx context.Context, q querier, id string) (*Run, error)
	UpdateRun(ctx context.Context, q querier, r *Run, from RunStatus) error
	ListRuns(ctx context.Context, q querier, f RunFilter) ([]*Run, error)
	DeleteRuns(ctx context.Context, q querier, ids []string) (rows, entries int, err error)

	PrunableChanges(ctx context.Context, q querier, f PruneFilter) ([]PrunableChange, error)
	PrunableRuns(ctx context.Context, q querier, f PruneFilter) ([]PrunableRun, error)

	GetMeta(ctx context.Context, q querier, key string) (value []byte, ok bool, err error)
	SetMetaIfAbsent(ctx context.Context, q querier, key string, value []byte) ([]byte, error)

	AppendHistory(ctx context.Context, q querier, e HistoryEntry) error
	ListHistory(ctx context.Context, q querier, f HistoryFilter) ([]HistoryEntry, error)
	ChainHead(ctx context.Context, q querier) (Link, error)
	ListPrunedLinks(ctx context.Context, q querier, after int64, limit int) ([]Link, error)
	BeginSnapshot(ctx context.Context) (*sql.Tx, error)

	InsertApproval(ctx context.Context, q querier, a *Approval) error
	GetApproval(ctx context.Context, q querier, id string) (*Approval, error)
	UpdateApproval(ctx context.Context, q querier, a *Approval, from ApprovalStatus) error
	ListApprovals(ctx context.Context, q querier, f ApprovalFilter) ([]*Approval, error)
	InsertDecision(ctx context.Context, q querier, d Decision) error
	ListDecisions(ctx context.Context, q querier, approvalID string) ([]Decision, error)

	InsertEvent(ctx context.Context, q querier, e *Event) error
	LeaseEvents(ctx context.Context, q querier, f LeaseFilter) ([]*Event, error)
	FinishEvent(ctx context.Context, q querier, e *Event) error
	ListEvents(ctx context.Context, q querier, f EventFilter) ([]*Event, error)
	DeleteEvents(ctx context.Context, q querier, deliveredBefore, createdBefore time.Time, limit int) (int, error)

	Check(ctx context.Context) ([]string, error)
	CheckRoutine(ctx context.Context) ([]string, error)
}

// writeQueue is driver.WriteQueue, which a backend may implement.
type writeQueue interface {
	TakeWriteTurn(ctx context.Context) (release func(), err error)
}

// compactor is driver.Compactor, which a backend may implement.
type compactor interface {
	Yield(ctx context.Context) error
	Size(ctx context.Context) (int64, error)
	Reclaim(ctx context.Context) (returned bool, err error)
	Vacuum(ctx context.Context) error
}

// durableWriter is driver.DurableWriter, which a backend may implement.
type durableWriter interface {
	BeginDurableWrite(ctx context.Context, lazy bool) (tx *sql.Tx, end func(committed bool) error, err error)
}

// chainAppender is driver.ChainAppender, which a backend may implement.
type chainAppender interface {
	AppendChained(ctx context.Context, q querier, e HistoryEntry) (Link, error)
}

// errorInterpreter is driver.ErrorInterpreter, which a backend may
// implement.
type errorInterpreter interface {
	InterpretError(op string, err error) error
}

// opener is the type of what package driver records in package seam for
// each scheme: a driver.Opener whose Backend is returned as any.
type opener = func(ctx context.Context, target string, opts OpenOptions) (any, error)

func init() {
	seam.NewLedger = func(b any) any { return newLedger(b.(backend), nil) }
	seam.BackendOf = func(l any) any { return l.(*Ledger).b }
}

// openBackend opens target with the backend registered for scheme. The
// backend's own errors are returned as they are (backends return an
// *Error).
func openBackend(ctx context.Context, scheme, target string, opts OpenOptions) (backend, error) {
	open, _ := seam.Opener(scheme).(opener)
	if open == nil {
		return nil, &Error{Op: "open", Err: fmt.Errorf("no ledger backend for %q targets (import the backend package, e.g. ledger/sqlite or ledger/postgres)", scheme)}
	}
	v, err := open(ctx, target, opts)
	if err != nil {
		return nil, err
	}
	b, ok := v.(backend)
	if !ok || b == nil {
		return nil, &Error{Op: "open", Location: redactTarget(target), Err: fmt.Errorf("the ledger backend for %q targets returned %T, not a backend", scheme, v)}
	}
	return b, nil
}

// newLedger wraps b with clock as the ledger's clock (time.Now when nil).
func newLedger(b backend, clock func() time.Time) *Ledger {
	if clock == nil {
		clock = time.Now
	}
	return &Ledger{b: b, now: clock}
}
