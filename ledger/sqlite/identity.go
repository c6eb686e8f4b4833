package sqlite

import (
	"bytes"
	"context"
	"database/sql"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"time"

	"github.com/mcp-changeset/changeset-go/ledger"
	"github.com/mcp-changeset/changeset-go/ledger/driver"
)

// sqliteMagic starts every SQLite 3 database file.
const sqliteMagic = "SQLite format 3\x00"

// preflight looks at the target before SQLite touches it: it must not be
// on a network filesystem, and an existing file must at least look like a
// SQLite database. fresh reports that there is nothing to check, so Open
// may initialise the ledger: the file was missing and opts.Create let
// preflight create it empty, or it was empty already and opts.Create allows
// initialising it.
func (b *Backend) preflight(opts ledger.OpenOptions) (fresh bool, err error) {
	if b.path == "" {
		return false, b.openError(errors.New("no ledger path given"))
	}
	fi, err := os.Stat(b.path)
	if errors.Is(err, fs.ErrNotExist) {
		if !opts.Create {
			return false, b.openError(ledger.ErrNotExist)
		}
		if opts.ReadOnly {
			return false, b.openError(fmt.Errorf("%w (a read-only open never creates one)", ledger.ErrNotExist))
		}
		// SQLite would create the file but not its directory; say so
		// rather than report SQLITE_CANTOPEN.
		dir := filepath.Dir(b.path)
		di, err := os.Stat(dir)
		if err != nil {
			return false, b.openError(fmt.Errorf("cannot create the ledger: its directory %s does not exist or cannot be read (create it first): %w", dir, err))
		}
		if !di.IsDir() {
			return false, b.openError(fmt.Errorf("cannot create the ledger: %s is not a directory", dir))
		}
		if err := b.checkLocal(dir, opts); err != nil {
			return false, err
		}
		// Create the file ourselves, readable by its owner only (SQLite
		// would use 0644 less the umask); its -wal and -shm files take
		// the same mode. Another process may win the race to create
		// it, and then it is an existing file like any other.
		f, err := os.OpenFile(b.path, os.O_RDWR|os.O_CREATE|os.O_EXCL, 0o600)
		if errors.Is(err, fs.ErrExist) {
			return b.preflight(opts)
		}
		if err != nil {
			return false, b.openError(fmt.Errorf("cannot create the ledger: %w", err))
		}
		if err := f.Close(); err != nil {
			return false, b.openError(err)
		}
		return true, nil
	}
	if err != nil {
		return false, b.openError(err)
	}
	if fi.IsDir() {
		return false, b.openError(fmt.Errorf("%w: it is a directory", ledger.ErrForeign))
	}
	if !fi.Mode().IsRegular() {
		return false, b.openError(fmt.Errorf("%w: it is not a regular file", ledger.ErrForeign))
	}
	if err := b.checkLocal(b.path, opts); err != nil {
		return false, err
	}
	if fi.Size() == 0 {
		// Never write to a file we did not create, unless told to: an
		// empty file is all that is left of a ledger whose creation
		// was interrupted, or a placeholder made for it.
		if opts.Create && !opts.ReadOnly {
			return true, nil
		}
		return false, b.openError(fmt.Errorf("%w: the file is empty (open with create to initialise it)", ledger.ErrForeign))
	}
	f, err := os.Open(b.path)
	if err != nil {
		return false, b.openError(err)
	}
	defer f.Close()
	head := make([]byte, headerSize)
	n, err := io.ReadFull(f, head)
	if err != nil && !errors.Is(err, io.ErrUnexpectedEOF) {
		return false, b.openError(err)
	}
	head = head[:n]
	if !bytes.HasPrefix(head, []byte(sqliteMagic)) {
		if damagedLedger(f, fi.Size()) {
			return false, b.corrupt("the file holds a ledger's schema but does not start as a SQLite database does: its first bytes were overwritten")
		}
		return false, b.openError(fmt.Errorf("%w: not a SQLite database", ledger.ErrForeign))
	}
	var walSize int64
	if wi, err := os.Stat(b.path + "-wal"); err == nil {
		walSize = wi.Size()
	}
	b.size = fi.Size() + walSize
	return false, b.checkHeader(head, fi.Size(), walSize)
}

// checkLocal refuses a path on a network filesystem unless the options
// allow it. A filesystem that cannot be identified is assumed local.
func (b *Backend) checkLocal(path string, opts ledger.OpenOptions) error {
	if opts.AllowNetworkFS {
		return nil
	}
	name, network := detectNetworkFS(path)
	if !network {
		return nil
	}
	return b.openError(fmt.Errorf("%w (%s): SQLite's WAL mode and locks are unsafe there", ledger.ErrNetworkFS, name))
}

// detectNetworkFS is networkFS, replaceable in tests.
var detectNetworkFS = networkFS

// identity is what a database says about itself.
type identity struct {
	appID   int32 // PRAGMA application_id
	version int   // PRAGMA user_version
	objects int   // rows of sqlite_schema: tables, indexes, views, triggers
}

// readIdentity reads the identity of the database q is on, in one
// statement so that all three values come from one snapshot: read one by
// one, they could straddle another process's commit of a new ledger.
func readIdentity(ctx context.Context, q driver.Querier) (identity, error) {
	var id identity
	err := q.QueryRowContext(ctx, `SELECT
		(SELECT application_id FROM pragma_application_id()),
		(SELECT user_version FROM pragma_user_version()),
		(SELECT count(*) FROM sqlite_schema)`).Scan(&id.appID, &id.version, &id.objects)
	return id, err
}

// empty reports whether the database holds nothing at all: a new file.
func (id identity) empty() bool { return id.appID == 0 && id.version == 0 && id.objects == 0 }

// verdict decides what Open may do with a database of identity id: use it
// as it is, write to it (initialise an empty database, upgrade an older
// schema), or refuse it.
func (b *Backend) verdict(id identity, create bool) (write bool, err error) {
	switch {
	case id.appID == ApplicationID:
		switch {
		case id.version > SchemaVersion:
			return false, b.openError(fmt.Errorf("%w (schema version %d; this program supports up to %d)", ledger.ErrNewerSchema, id.version, SchemaVersion))
		case id.version < 1:
			return false, b.openError(fmt.Errorf("%w: it carries the ledger's application_id but no schema version", ledger.ErrCorrupt))
		case id.version < SchemaVersion:
			if b.readOnly {
				return false, b.openError(fmt.Errorf("%w: schema version %d must be upgraded to %d, which a read-only open cannot do (open it once read-write)", ledger.ErrReadOnly, id.version, SchemaVersion))
			}
			return true, nil
		}
		return false, nil
	case id.empty():
		if create && !b.readOnly {
			return true, nil
		}
		return false, b.openError(fmt.Errorf("%w: an empty SQLite database (open with create to initialise it)", ledger.ErrForeign))
	case id.appID == 0:
		return false, b.openError(fmt.Errorf("%w: a SQLite database without the ledger's application_id", ledger.ErrForeign))
	default:
		return false, b.openError(fmt.Errorf("%w: a SQLite database with application_id %s, not %s", ledger.ErrForeign, hex32(id.appID), hex32(ApplicationID)))
	}
}

// inspect decides, on a connection of its own that SQLite opens read-only
// (mode=ro), whether Open may use the existing file: it reads the file's
// identity, refuses a file that is not a ledger it can use (see verdict),
// and runs the open-time integrity check that check asks for (see
// opencheck.go). Nothing is written to a file before it passes.
func (b *Backend) inspect(ctx context.Context, timeout time.Duration, create bool, check ledger.IntegrityCheck) error {
	dsn, err := buildDSN(b.path, true, timeout)
	if err != nil {
		return b.openError(err)
	}
	db, err := sql.Open(driverName, dsn)
	if err != nil {
		return b.interpretError("open", err)
	}
	defer db.Close()
	db.SetMaxOpenConns(1)
	id, err := readIdentity(ctx, db)
	if err != nil {
		if le := b.interpretError("open", err); !errors.Is(le, ledger.ErrCorrupt) {
			return le
		}
		return b.openError(fmt.Errorf("%w: SQLite cannot read the file's schema: %w", ledger.ErrCorrupt, err))
	}
	if _, err := b.verdict(id, create); err != nil {
		return err
	}
	if id.appID != ApplicationID {
		return nil // an empty database, to be initialised
	}
	return b.checkIntegrity(ctx, db, check, b.size, b.fullCheckLimit)
}

// verifyPragmas checks, as litestream does, that the DSN's pragmas took
// effect: a driver that ignored them would silently lose durability (WAL,
// synchronous=FULL), integrity (foreign keys) or patience (busy timeout).
func (b *Backend) verifyPragmas(ctx context.Context, timeout time.Duration) error {
	conn, err := b.firstConn(ctx, timeout)
	if err != nil {
		return err
	}
	defer conn.Close()
	get := func(pragma string, dst any) error {
		if err := conn.QueryRowContext(ctx, "PRAGMA "+pragma).Scan(dst); err != nil {
			return b.interpretError("open", err)
		}
		return nil
	}
	var busy int64
	if err := get("busy_timeout", &busy); err != nil {
		return err
	}
	if want := timeoutMillis(timeout); busy != want {
		return b.openError(fmt.Errorf("PRAGMA busy_timeout is %d, not %d", busy, want))
	}
	if b.readOnly {
		return nil
	}
	var mode string
	var syncMode, fk int
	if err := get("journal_mode", &mode); err != nil {
		return err
	}
	if !strings.EqualFold(mode, "wal") {
		return b.openError(fmt.Errorf("PRAGMA journal_mode is %q, not wal (the filesystem may not support it)", mode))
	}
	if err := get("synchronous", &syncMode); err != nil {
		return err
	}
	if syncMode != 2 {
		return b.openError(fmt.Errorf("PRAGMA synchronous is %d, not 2 (FULL)", syncMode))
	}
	if err := get("foreign_keys", &fk); err != nil {
		return err
	}
	if fk != 1 {
		return b.openError(fmt.Errorf("PRAGMA foreign_keys is %d, not 1", fk))
	}
	return nil
}

// firstConn opens the first connection of the pool, which applies the DSN's
// pragmas. Switching a new file from its initial rollback journal to WAL
// takes an exclusive lock without waiting: when several processes create
// the same ledger at once, all but one get SQLITE_BUSY at once. firstConn
// retries until the file is in WAL mode, for at most the busy timeout.
func (b *Backend) firstConn(ctx context.Context, timeout time.Duration) (*sql.Conn, error) {
	deadline := time.Now().Add(timeout)
	for {
		conn, err := b.db.Conn(ctx)
		if err == nil {
			return conn, nil
		}
		err = b.interpretError("open", err)
		if !errors.Is(err, ledger.ErrBusy) || time.Now().After(deadline) {
			return nil, err
		}
		select {
		case <-ctx.Done():
			return nil, b.interpretError("open", ctx.Err())
		case <-time.After(10 * time.Millisecond):
		}
	}
}

// DSN is the database/sql data source name of the SQLite file at path as
// the ledger opens it read-write (BEGIN IMMEDIATE, busy timeout
// ledger.DefaultBusyTimeout, WAL, synchronous=FULL, foreign keys), for an
// application that keeps its own tables in a SQLite file of its own and
// wants the same guarantees (examples/inventory). Open it with the driver
// name "sqlite" (modernc.org/sqlite).
func DSN(path string) (string, error) { return buildDSN(path, false, ledger.DefaultBusyTimeout) }

// buildDSN returns the modernc.org/sqlite data source name for the file at
// path. The path becomes an absolute SQLite URI path with every byte
// outside a safe set percent-escaped, so that '?', '#', '%' and spaces in
// file names reach SQLite unchanged; the driver finds its parameters after
// the first literal '?'.
//
// A read-write DSN starts every transaction with BEGIN IMMEDIATE and sets
// the busy timeout, WAL mode, synchronous=FULL and foreign keys on every
// connection. A read-only DSN opens the file with mode=ro and sets only the
// busy timeout: the journal mode is a property of the file and a read-only
// connection must not change it.
func buildDSN(path string, readOnly bool, timeout time.Duration) (string, error) {
	abs, err := filepath.Abs(path)
	if err != nil {
		return "", err
	}
	p := filepath.ToSlash(abs)
	if !strings.HasPrefix(p, "/") {
		p = "/" + p // a Windows drive letter: file:/C:/dir/ledger.db
	}
	busy := "_pragma=busy_timeout(" + strconv.FormatInt(timeoutMillis(timeout), 10) + ")"
	params := []string{"_txlock=immediate", busy, "_pragma=journal_mode(WAL)", "_pragma=synchronous(FULL)", "_pragma=foreign_keys(ON)"}
	if readOnly {
		params = []string{"mode=ro", busy}
	}
	return "file:" + escapePath(p) + "?" + strings.Join(params, "&"), nil
}

// escapePath percent-escapes every byte of p except unreserved URI
// characters, '/' and ':'.
func escapePath(p string) string {
	const hexDigits = "0123456789ABCDEF"
	var sb strings.Builder
	for i := 0; i < len(p); i++ {
		c := p[i]
		switch {
		case 'a' <= c && c <= 'z', 'A' <= c && c <= 'Z', '0' <= c && c <= '9',
			c == '-', c == '.', c == '_', c == '~', c == '/', c == ':':
			sb.WriteByte(c)
		default:
			sb.WriteByte('%')
			sb.WriteByte(hexDigits[c>>4])
			sb.WriteByte(hexDigits[c&15])
		}
	}
	return sb.String()
}

// timeoutMillis is the busy timeout in whole milliseconds, at least 1.
func timeoutMillis(d time.Duration) int64 {
	if ms := d.Milliseconds(); ms > 0 {
		return ms
	}
	return 1
}

// hex32 formats an application_id the way people write it.
func hex32(v int32) string { return fmt.Sprintf("0x%08X", uint32(v)) }
