package sqlite

import (
	"database/sql"
	"errors"
	"fmt"
	"strings"
	"syscall"

	"github.com/mcp-changeset/changeset-go/ledger"
	sqlite "modernc.org/sqlite"
)

// Primary SQLite result codes that have a ledger meaning. The driver
// enables extended result codes, so an error's code is compared after
// masking off the extended bits (code & 0xff).
const (
	sqliteBusy     = 5
	sqliteLocked   = 6
	sqliteReadOnly = 8
	sqliteCorrupt  = 11
	sqliteFull     = 13
	sqliteIOErr    = 10
	sqliteNotADB   = 26
)

// errOpenedReadOnly is the cause of a write refused because the ledger was
// opened with OpenOptions.ReadOnly.
var errOpenedReadOnly = fmt.Errorf("%w: it was opened read-only", ledger.ErrReadOnly)

// InterpretError is interpretError for the Ledger (see
// driver.ErrorInterpreter).
func (b *Backend) InterpretError(op string, err error) error { return b.interpretError(op, err) }

// interpretError turns an error of the driver or of database/sql into a
// *ledger.Error for operation op on this ledger. It is the one place where
// SQLite result codes become the ledger's sentinel causes:
//
//   - SQLITE_BUSY and SQLITE_LOCKED become ledger.ErrBusy;
//   - SQLITE_CORRUPT and SQLITE_NOTADB become ledger.ErrCorrupt;
//   - SQLITE_READONLY becomes ledger.ErrReadOnly;
//   - SQLITE_FULL (and an I/O error whose cause is a full disk) becomes
//     ledger.ErrFull;
//   - sql.ErrNoRows becomes ledger.ErrNotFound.
//
// The driver's own error stays in the chain (errors.As still finds the
// *sqlite.Error), so the message names the cause SQLite gave. An error that
// is already a *ledger.Error is returned unchanged, and nil stays nil.
func (b *Backend) interpretError(op string, err error) error {
	if err == nil {
		return nil
	}
	var le *ledger.Error
	if errors.As(err, &le) {
		return err
	}
	if errors.Is(err, sql.ErrNoRows) {
		// A missing row is about the row, not the file: like the
		// ledger's own not-found errors it carries no location.
		return &ledger.Error{Op: op, Err: ledger.ErrNotFound}
	}
	cause := err
	var se *sqlite.Error
	if errors.As(err, &se) {
		switch se.Code() & 0xff {
		case sqliteBusy, sqliteLocked:
			cause = fmt.Errorf("%w: %w", ledger.ErrBusy, err)
		case sqliteCorrupt, sqliteNotADB:
			cause = fmt.Errorf("%w: %w", ledger.ErrCorrupt, err)
		case sqliteReadOnly:
			cause = fmt.Errorf("%w: %w", ledger.ErrReadOnly, err)
		case sqliteFull:
			cause = fmt.Errorf("%w: %w", ledger.ErrFull, err)
		case sqliteIOErr:
			if errors.Is(err, syscall.ENOSPC) || strings.Contains(err.Error(), "no space left") {
				cause = fmt.Errorf("%w: %w", ledger.ErrFull, err)
			}
		}
	}
	return &ledger.Error{Op: op, Location: b.path, Err: cause}
}

// openError wraps a failure to open the ledger that did not come from the
// driver (a refused file, a missing directory).
func (b *Backend) openError(err error) error {
	return &ledger.Error{Op: "open", Location: b.path, Err: err}
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
