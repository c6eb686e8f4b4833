package sqlite

import (
	"context"
	"database/sql"
	"time"

	"github.com/mcp-changeset/changeset-go/ledger"
	"github.com/mcp-changeset/changeset-go/ledger/driver"
)

// The statements of the hot path (reading, inserting and updating a change
// or a run) are prepared once, when the ledger is opened, and reused:
// parsing them again on every call cost about a quarter of a cycle's CPU.
// Inside a transaction a prepared statement is bound to it with
// Tx.StmtContext, which prepares it on the transaction's own connection
// the first time. They are never prepared lazily on the pool: a writer
// holding the lock would then wait for a free connection while every
// connection waits for the lock.

// hotStatements are prepared by prepareHot: the row statements, and the
// filters a preview runs in its transaction (the pending quota of the
// scope, the session's open run, that run's newest change) and the one an
// undo's claim runs (the changes of its scope that depend on the one
// resource it would remove). A filter's
// statement depends only on which of its fields are set, so the one built
// here from placeholder values is the one every preview builds.
var hotStatements = []string{getChangeSQL, insertChangeSQL, updateChangeSQL, getRunSQL, insertRunSQL, updateRunSQL, appendHistorySQL, chainHeadSQL,
	first(countChangesQuery(ledger.ChangeFilter{ScopeHash: "-", Statuses: []ledger.Status{ledger.Pending}, ExpiresAfter: time.Unix(1, 0)})),
	first(listRunsQuery(ledger.RunFilter{ScopeHash: "-", Kind: ledger.RunSession, SessionKey: "-", Statuses: []ledger.RunStatus{ledger.RunOpen}, Limit: 1})),
	first(listChangesQuery(ledger.ChangeFilter{RunID: "-", Limit: 1}, false)),
	first(listChangesQuery(ledger.ChangeFilter{Statuses: []ledger.Status{ledger.Applied, ledger.Applying, ledger.UndoFailed}, ScopeHash: "-", DependsOnAny: []string{"-"}}, false)),
	// A change's history, a page at a time: the receipt an apply and an
	// undo read back, and get_change_status.
	first(listHistoryQuery(ledger.HistoryFilter{ChangeID: "-", Limit: 1})),
	first(listHistoryQuery(ledger.HistoryFilter{ChangeID: "-", After: 1, Limit: 1})),
}

// first is the query of a (query, arguments) pair.
func first(query string, _ []any) string { return query }

// prepareHot prepares hotStatements. A statement that cannot be prepared
// (e.g. on a ledger opened before its migration) is simply run unprepared.
func (b *Backend) prepareHot(ctx context.Context) {
	for _, q := range hotStatements {
		if s, err := b.db.PrepareContext(ctx, q); err == nil {
			b.stmts.Store(q, s)
		}
	}
}

// bind returns the prepared statement for query, bound to q when q is a
// transaction, or false when query was not prepared.
func (b *Backend) bind(ctx context.Context, q driver.Querier, query string) (*sql.Stmt, bool) {
	v, ok := b.stmts.Load(query)
	if !ok {
		if _, inTx := q.(*sql.Tx); inTx {
			b.unpreparedInTx.Add(1)
		}
		return nil, false
	}
	s := v.(*sql.Stmt)
	if tx, ok := q.(*sql.Tx); ok {
		return tx.StmtContext(ctx, s), true
	}
	return s, true
}

// execPrepared runs query as a prepared statement on q.
func (b *Backend) execPrepared(ctx context.Context, q driver.Querier, query string, args ...any) (sql.Result, error) {
	s, ok := b.bind(ctx, q, query)
	if !ok {
		return q.ExecContext(ctx, query, args...)
	}
	return s.ExecContext(ctx, args...)
}

// queryPrepared runs query as a prepared statement on q.
func (b *Backend) queryPrepared(ctx context.Context, q driver.Querier, query string, args ...any) (*sql.Rows, error) {
	s, ok := b.bind(ctx, q, query)
	if !ok {
		return q.QueryContext(ctx, query, args...)
	}
	return s.QueryContext(ctx, args...)
}

// queryRowPrepared runs query as a prepared statement on q.
func (b *Backend) queryRowPrepared(ctx context.Context, q driver.Querier, query string, args ...any) *sql.Row {
	s, ok := b.bind(ctx, q, query)
	if !ok {
		return q.QueryRowContext(ctx, query, args...)
	}
	return s.QueryRowContext(ctx, args...)
}

// closeStatements closes every prepared statement.
func (b *Backend) closeStatements() {
	b.stmts.Range(func(k, v any) bool {
		v.(*sql.Stmt).Close()
		b.stmts.Delete(k)
		return true
	})
}
