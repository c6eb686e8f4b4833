package postgres

import (
	"database/sql"
	"errors"
	"fmt"

	"github.com/jackc/pgx/v5/pgconn"
	"github.com/mcp-changeset/changeset-go/ledger"
)

// SQLSTATE codes that have a ledger meaning.
const (
	codeUniqueViolation     = "23505"
	codeForeignKeyViolation = "23503"
	codeCheckViolation      = "23514"
	codeSerialization       = "40001"
	codeDeadlock            = "40P01"
	codeLockNotAvailable    = "55P03"
	codeQueryCanceled       = "57014"
	codeTooManyConnections  = "53300"
	codeReadOnlyTx          = "25006"
	codeBadCharacter        = "22021" // character_not_in_repertoire: NUL, invalid UTF-8
	codeUntranslatable      = "22P05"
	codeUndefinedTable      = "42P01"
	codeUndefinedSchema     = "3F000"
)

// errOpenedReadOnly is the cause of a write refused because the ledger was
// opened with OpenOptions.ReadOnly.
var errOpenedReadOnly = fmt.Errorf("%w: it was opened read-only", ledger.ErrReadOnly)

// InterpretError is interpretError for the Ledger (see
// driver.ErrorInterpreter).
func (b *Backend) InterpretError(op string, err error) error { return b.interpretError(op, err) }

// interpretError turns an error of pgx or database/sql into a *ledger.Error
// for operation op on this ledger. It is the one place where SQLSTATE codes
// become the ledger's sentinel causes:
//
//   - sql.ErrNoRows becomes ledger.ErrNotFound;
//   - lock_not_available (lock_timeout passed), query_canceled (a
//     statement_timeout passed), too_many_connections, and also
//     serialization_failure and deadlock_detected become ledger.ErrRetry
//     (which Ledger.WithTx retries) wrapped with ledger.ErrBusy;
//   - read_only_sql_transaction becomes ledger.ErrReadOnly;
//   - a missing table or schema becomes ledger.ErrCorrupt.
//
// serialization_failure and deadlock_detected mean that PostgreSQL aborted
// the transaction and nothing of it happened. They are not ErrConflict,
// which tells the caller that another process moved the row first (a
// final answer that callers report, and never retry). ErrBusy says "retry
// the transaction", which is the right answer: the claim and outcome code
// of package changeset retries it, and a claim that retries reads the row
// again and decides afresh. At READ COMMITTED with row locks taken in one
// order, the ledger's own transactions cause neither.
//
// Unique, foreign-key, check and encoding violations keep pgx's error
// (which names the constraint) behind a sentence that says what was wrong.
// The driver's error stays in the chain for errors.As. An error that is
// already a *ledger.Error is returned unchanged, and nil stays nil.
func (b *Backend) interpretError(op string, err error) error {
	if err == nil {
		return nil
	}
	var le *ledger.Error
	if errors.As(err, &le) {
		return err
	}
	if errors.Is(err, sql.ErrNoRows) {
		// A missing row is about the row, not the database: like the
		// ledger's own not-found errors it carries no location.
		return &ledger.Error{Op: op, Err: ledger.ErrNotFound}
	}
	return &ledger.Error{Op: op, Location: b.location, Err: cause(err)}
}

// cause wraps err in the sentinel or explanation its SQLSTATE calls for.
func cause(err error) error {
	var pe *pgconn.PgError
	if !errors.As(err, &pe) {
		return err
	}
	switch pe.Code {
	case codeLockNotAvailable:
		return fmt.Errorf("%w: a lock stayed held longer than lock_timeout: %w", ledger.ErrBusy, err)
	case codeQueryCanceled:
		return fmt.Errorf("%w: the statement was cancelled (statement_timeout?): %w", ledger.ErrBusy, err)
	case codeTooManyConnections:
		return fmt.Errorf("%w: the server has no connection to spare: %w", ledger.ErrBusy, err)
	case codeSerialization, codeDeadlock:
		return fmt.Errorf("%w (%w): PostgreSQL aborted the transaction to resolve a conflict; nothing of it was written: %w", ledger.ErrRetry, ledger.ErrBusy, err)
	case codeReadOnlyTx:
		return fmt.Errorf("%w: %w", ledger.ErrReadOnly, err)
	case codeUndefinedTable, codeUndefinedSchema:
		return fmt.Errorf("%w: the ledger's tables are missing (was the schema dropped?): %w", ledger.ErrCorrupt, err)
	case codeUniqueViolation:
		return fmt.Errorf("a row with this ID already exists (IDs must be unique): %w", err)
	case codeForeignKeyViolation:
		return fmt.Errorf("the change names a run that does not exist, or the run still has changes: %w", err)
	case codeCheckViolation:
		return fmt.Errorf("the row breaks the ledger's constraint %s (an invalid status, or an applied change without its time): %w", pe.ConstraintName, err)
	case codeBadCharacter, codeUntranslatable:
		return fmt.Errorf("PostgreSQL text must be valid UTF-8 without NUL bytes: %w", err)
	}
	return err
}

// openError wraps a failure to open the ledger that did not come from the
// driver (a refused database, a bad URL).
func (b *Backend) openError(err error) error {
	return &ledger.Error{Op: "open", Location: b.location, Err: err}
}

// rowError reports a missing row or a lost compare-and-set on row id of
// kind ("change", "run"). Like interpretError's not-found errors it carries
// no location: it is about the row.
func rowError(op, kind, id string, cause error) error {
	return &ledger.Error{Op: op + " " + kind + " " + id, Err: cause}
}

// conflict is the cause of a compare-and-set that found the row in status
// now instead of from.
func conflict(from, now string) error {
	return fmt.Errorf("%w (expected %s, found %s)", ledger.ErrConflict, from, now)
}
