package ledger

import (
	"context"
	"fmt"
	"strings"
	"time"
)

// OpenOptions control how a ledger is opened.
type OpenOptions struct {
	// Create makes a new, empty ledger when none exists at the target.
	// Without it a missing ledger is refused with ErrNotExist.
	Create bool
	// ReadOnly opens the ledger so that nothing can change it. Operators'
	// read-only commands use it.
	ReadOnly bool
	// BusyTimeout is how long a statement waits for another process's lock
	// before failing with ErrBusy. Zero means DefaultBusyTimeout.
	BusyTimeout time.Duration
	// AllowNetworkFS lets a SQLite ledger live on NFS or SMB. SQLite's WAL
	// mode and locks are unsafe there; only set it when a single host will
	// ever open the file.
	AllowNetworkFS bool
	// Check is how much of a SQLite file Open reads to make sure it is not
	// damaged before using it. The zero value, CheckAuto, is right for
	// servers and tools alike.
	Check IntegrityCheck
	// Durability says which commits wait for the disk: every one
	// (DurabilityFull, the zero value) or only the claims
	// (DurabilityClaims). See [Durability] and docs/reliability.md.
	Durability Durability
	// Clock is the ledger's clock (time.Now when nil), fixed for the life
	// of the returned Ledger. It is the "now" of the ledger's own work:
	// which pending changes ExpireStale finds expired, Prune's cutoff and
	// undo windows, the time Reconcile and ReconcileRun record, Check's
	// undo windows. The transitions callers make carry their own times
	// (see [Ledger]), so a clock here never changes what a Guard records.
	// Tests and tools with a clock of their own set it.
	Clock func() time.Time
}

// IntegrityCheck says how much of a SQLite ledger Open checks before it
// uses the file. A damaged file is refused with an *Error wrapping
// ErrCorrupt and left exactly as it was: nothing is written, checkpointed
// or migrated. Damage that the check does not read surfaces when the
// damaged page is first read, as the same error, never as wrong data.
// PostgreSQL ledgers ignore the setting (the server checks its own pages).
// docs/reliability.md says what each level costs and what it cannot see.
type IntegrityCheck int

const (
	// CheckAuto checks the file's header and page count, then runs
	// SQLite's PRAGMA quick_check over the whole file when it is at most
	// 8 MiB (under 10 ms); a larger file gets the structural check
	// instead, whose cost does not grow with the file: each b-tree's
	// root, up to 16 pages of the level below it, and the first and
	// last page of each level further down (docs/reliability.md).
	CheckAuto IntegrityCheck = iota
	// CheckFull runs PRAGMA quick_check over the whole file whatever its
	// size: about 1 ms per MB.
	CheckFull
	// CheckNone reads only the header and the schema, which SQLite needs
	// to open the file at all. It is for tools that check the file
	// themselves and must open a damaged one to report on it, such as
	// mcp-changeset check; combine it with ReadOnly.
	CheckNone
)

// DefaultBusyTimeout is how long a ledger statement waits for a lock held by
// another process when OpenOptions.BusyTimeout is zero.
const DefaultBusyTimeout = 5 * time.Second

// schemeOf returns the URL scheme of target, or "file" for a path.
func schemeOf(target string) string {
	if i := strings.Index(target, "://"); i > 0 {
		return strings.ToLower(target[:i])
	}
	return "file"
}

// Open opens the ledger at target: a SQLite file path, or (with the
// PostgreSQL backend imported) a postgres:// URL. It is the one way to
// open a ledger. Which backend serves target is decided by its scheme,
// among those imported (see package ledger/driver): importing
// ledger/sqlite serves plain file paths, ledger/postgres serves
// postgres:// URLs.
//
// Without opts.Create a missing ledger is refused with an error wrapping
// ErrNotExist, so that a mistyped path is never silently replaced by an
// empty ledger. The zero OpenOptions open an existing ledger for reading
// and writing:
//
//	l, err := ledger.Open(ctx, "changes.db", ledger.OpenOptions{})
func Open(ctx context.Context, target string, opts OpenOptions) (*Ledger, error) {
	if target == "" {
		return nil, &Error{Op: "open", Err: fmt.Errorf("no ledger given (set a path or a postgres:// URL)")}
	}
	if opts.BusyTimeout == 0 {
		opts.BusyTimeout = DefaultBusyTimeout
	}
	if err := checkTarget(target); err != nil {
		return nil, &Error{Op: "open", Err: err}
	}
	if err := opts.Durability.check(); err != nil {
		return nil, &Error{Op: "open", Location: redactTarget(target), Err: err}
	}
	b, err := openBackend(ctx, schemeOf(target), target, opts)
	if err != nil {
		return nil, err
	}
	return newLedger(b, opts.Clock), nil
}

// checkTarget refuses targets that look like a mistyped database address
// rather than a file path, so that a typo never silently creates an empty
// SQLite ledger (named after a connection string, password included).
func checkTarget(target string) error {
	lower := strings.ToLower(target)
	for _, scheme := range []string{"postgres:", "postgresql:"} {
		if strings.HasPrefix(lower, scheme) && !strings.HasPrefix(lower, scheme+"//") {
			return fmt.Errorf("%q is neither a file path nor a URL: write %s//host/database", redactTarget(target), scheme)
		}
	}
	for _, key := range []string{"host=", "dbname=", "user=", "password="} {
		if strings.HasPrefix(lower, key) || strings.Contains(lower, " "+key) {
			return fmt.Errorf("the ledger looks like a PostgreSQL connection string; write it as a postgres:// URL")
		}
	}
	return nil
}

// redactTarget shortens a target for a message, so that a password after
// the scheme is not echoed.
func redactTarget(target string) string {
	if i := strings.IndexAny(target, "@?"); i >= 0 {
		return target[:i] + "…"
	}
	return target
}
