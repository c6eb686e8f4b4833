package ledger

import (
	"errors"
)

// Sentinel causes. A backend wraps them in an *Error so that callers can test
// for them with errors.Is.
var (
	// ErrNotFound: no change or run with that ID.
	ErrNotFound = errors.New("not found")
	// ErrConflict: a compare-and-set found the row in another status; some
	// other process moved it first.
	ErrConflict = errors.New("status changed concurrently")
	// ErrBusy: the database stayed locked by another process for longer
	// than the busy timeout.
	ErrBusy = errors.New("ledger is busy (locked by another process)")
	// ErrNotExist: the ledger does not exist and Open was told not to
	// create it.
	ErrNotExist = errors.New("ledger does not exist")
	// ErrForeign: the database is not a changeset ledger.
	ErrForeign = errors.New("not a changeset ledger")
	// ErrNewerSchema: the ledger was written by a newer version of this
	// library.
	ErrNewerSchema = errors.New("ledger schema is newer than this program supports")
	// ErrCorrupt: the database file is damaged or not a database.
	ErrCorrupt = errors.New("ledger is corrupt or unreadable")
	// ErrNetworkFS: the SQLite file is on a network filesystem, where WAL
	// mode and locking are unsafe.
	ErrNetworkFS = errors.New("ledger is on a network filesystem")
	// ErrReadOnly: the ledger cannot be written (file permissions or a
	// read-only open).
	ErrReadOnly = errors.New("ledger is read-only")
	// ErrFull: the disk or the database is full; nothing was written.
	ErrFull = errors.New("ledger storage is full")
	// ErrRetry: the database aborted the transaction to resolve a conflict
	// with another (PostgreSQL's serialization failures and deadlocks) and
	// nothing of it was written. WithTx runs the transaction again; a
	// backend wraps it together with ErrBusy, which callers see if the
	// retries run out.
	ErrRetry = errors.New("transaction aborted by the database to resolve a conflict")
	// ErrTransition: Tx.UpdateChange or Tx.UpdateRun was asked for a move
	// that the state machine does not allow (see Status.CanMoveTo and
	// RunStatus.CanMoveTo); nothing was written. It is a bug of the
	// caller, never a race, which is ErrConflict.
	ErrTransition = errors.New("move not allowed by the ledger's state machine")
)

// Error is a failure of the ledger itself: it could not be opened, read or
// written. Op says what was being done, Location which ledger (never with
// credentials), and Err why; Err often wraps one of the sentinels above.
type Error struct {
	Op       string
	Location string
	Err      error
}

func (e *Error) Error() string {
	msg := "ledger: " + e.Op
	if e.Location != "" {
		msg += " " + e.Location
	}
	return msg + ": " + e.Err.Error() + hint(e.Err)
}

func (e *Error) Unwrap() error { return e.Err }

// hint tells the reader what to do about the common causes.
func hint(err error) string {
	switch {
	case errors.Is(err, ErrBusy):
		return " (retry; if it persists, look for a process holding the ledger open)"
	case errors.Is(err, ErrForeign):
		return " (check the path: this file belongs to something else and was left unchanged)"
	case errors.Is(err, ErrNewerSchema):
		return " (upgrade this program to the version that wrote the ledger)"
	case errors.Is(err, ErrCorrupt):
		return " (mcp-changeset check --full reports the damage in detail; restore the ledger from a backup; it was left unchanged)"
	case errors.Is(err, ErrNotExist):
		return " (check the path, or let the server create it)"
	case errors.Is(err, ErrFull):
		return " (free disk space; the ledger is unchanged)"
	case errors.Is(err, ErrTransition):
		return " (a bug in the calling code: the allowed moves are listed in package ledger's transitions.go; nothing was written)"
	case errors.Is(err, ErrNetworkFS):
		return " (move it to a local disk, or use PostgreSQL for ledgers shared across hosts)"
	}
	return ""
}

// Errorf wraps err as an *Error for operation op on location. It returns
// err itself when err is already an *Error, so that context is added once.
func Errorf(op, location string, err error) error {
	if err == nil {
		return nil
	}
	var le *Error
	if errors.As(err, &le) {
		return err
	}
	return &Error{Op: op, Location: location, Err: err}
}
