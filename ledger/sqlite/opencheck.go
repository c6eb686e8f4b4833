package sqlite

import (
	"bytes"
	"context"
	"database/sql"
	"encoding/binary"
	"errors"
	"fmt"
	"io"
	"os"
	"strings"

	"github.com/mcp-changeset/changeset-go/ledger"
)

// Open refuses a damaged ledger before anything writes to it. What it
// reads depends on ledger.OpenOptions.Check:
//
//   - always, before SQLite opens the file: the 100-byte header (page
//     size, format numbers, the bytes SQLite reserves) and, when no
//     write-ahead log holds pages, the header's page count against the
//     file's size, so that a truncated copy is refused;
//   - always: the schema, which SQLite parses to open the file at all;
//   - CheckFull, and CheckAuto on a file of at most fullCheckMaxBytes:
//     PRAGMA quick_check, which reads every page and checks every b-tree,
//     cell and freelist page;
//   - CheckAuto on a larger file: checkStructure (openstructure.go), which
//     reads only the b-trees' upper levels and edges.
//
// Every check runs on the read-only probe connection, before the
// read-write pool opens, so a refused file is never checkpointed, migrated
// or written. docs/reliability.md gives the measured cost of each.

// fullCheckMaxBytes is the size up to which CheckAuto runs the full
// quick_check: about 50 ms on the machine of docs/reliability.md.
const fullCheckMaxBytes = 8 << 20

// headerSize is the size of the SQLite database header at the start of
// page 1.
const headerSize = 100

// corrupt returns an open error wrapping ledger.ErrCorrupt that says what
// is damaged.
func (b *Backend) corrupt(format string, args ...any) error {
	return b.openError(fmt.Errorf("%w: %s", ledger.ErrCorrupt, fmt.Sprintf(format, args...)))
}

// checkHeader checks the database header head (the first bytes of a file
// that starts with SQLite's magic string) of a file of size bytes whose
// write-ahead log is walSize bytes long. It returns nil or an error
// wrapping ledger.ErrCorrupt that names the damaged field.
func (b *Backend) checkHeader(head []byte, size, walSize int64) error {
	if len(head) < headerSize {
		return b.corrupt("the file is %d bytes long, shorter than a SQLite header: it was truncated", size)
	}
	damaged := func(format string, args ...any) error {
		return b.corrupt("the file's SQLite header is damaged: "+format, args...)
	}
	pageSize := int64(binary.BigEndian.Uint16(head[16:18]))
	if pageSize == 1 {
		pageSize = 65536
	}
	if pageSize < 512 || pageSize > 65536 || pageSize&(pageSize-1) != 0 {
		return damaged("its page size reads %d, not a power of two from 512 to 65536", pageSize)
	}
	if w, r := head[18], head[19]; w < 1 || w > 2 || r < 1 || r > 2 {
		return damaged("its file format versions read %d and %d, not 1 or 2", w, r)
	}
	if usable := pageSize - int64(head[20]); usable < 480 {
		return damaged("it reserves %d bytes of every %d-byte page", head[20], pageSize)
	}
	if head[21] != 64 || head[22] != 32 || head[23] != 32 {
		return damaged("its payload fractions read %d, %d and %d, not 64, 32 and 32", head[21], head[22], head[23])
	}
	if f := binary.BigEndian.Uint32(head[44:48]); f > 4 {
		return damaged("its schema format number reads %d, not 1 to 4", f)
	}
	if e := binary.BigEndian.Uint32(head[56:60]); e > 3 {
		return damaged("its text encoding reads %d, not 1 to 3", e)
	}
	if !allZero(head[72:92]) {
		return damaged("bytes 72 to 91, which SQLite reserves and keeps zero, are not")
	}
	// The page count at offset 28 is valid when the change counter at
	// offset 24 matches the one at 92. Pages in a write-ahead log may
	// not have reached the file yet, so compare only without one.
	pages := int64(binary.BigEndian.Uint32(head[28:32]))
	valid := bytes.Equal(head[24:28], head[92:96]) && pages > 0
	if valid && walSize == 0 && size < pages*pageSize {
		return b.corrupt("the file is truncated: its header counts %d pages of %d bytes (%d bytes), but the file holds %d", pages, pageSize, pages*pageSize, size)
	}
	return nil
}

// allZero reports whether every byte of p is zero.
func allZero(p []byte) bool {
	for _, c := range p {
		if c != 0 {
			return false
		}
	}
	return true
}

// ledgerSchemaMarks are statements of the ledger's schema that SQLite
// stores as text in the schema table, on the first pages of the file.
var ledgerSchemaMarks = []string{"CREATE TABLE changes (", "CREATE TABLE runs (", "CREATE TABLE meta ("}

// damagedLedger reports whether f, a file of size bytes that does not start
// with SQLite's magic string, is a ledger whose first bytes were
// overwritten: its size is a whole number of 512-byte sectors and its
// first megabyte holds the ledger's schema. Such a file is refused as
// damaged rather than as another program's file.
func damagedLedger(f *os.File, size int64) bool {
	if size < 1024 || size%512 != 0 {
		return false
	}
	buf := make([]byte, min(size, 1<<20))
	n, err := f.ReadAt(buf, 0)
	if err != nil && !errors.Is(err, io.EOF) {
		return false
	}
	for _, mark := range ledgerSchemaMarks {
		if !bytes.Contains(buf[:n], []byte(mark)) {
			return false
		}
	}
	return true
}

// checkIntegrity runs the open-time check that opts.Check asks for on db,
// the read-only probe connection to a file whose identity is a ledger's.
// size is the file's size with its write-ahead log; limit is the size up
// to which CheckAuto reads every page.
func (b *Backend) checkIntegrity(ctx context.Context, db *sql.DB, check ledger.IntegrityCheck, size, limit int64) error {
	switch {
	case check == ledger.CheckNone:
		return nil
	case check == ledger.CheckFull || size <= limit:
		return b.quickCheck(ctx, db)
	default:
		return b.checkStructure(ctx, db)
	}
}

// quickCheck runs PRAGMA quick_check, stopping at the first problem.
func (b *Backend) quickCheck(ctx context.Context, db *sql.DB) error {
	var first string
	err := db.QueryRowContext(ctx, "PRAGMA quick_check(1)").Scan(&first)
	if err != nil {
		if le := b.interpretError("open", err); !errors.Is(le, ledger.ErrCorrupt) {
			return le
		}
		return b.openError(fmt.Errorf("%w: the open-time integrity check could not read the file: %w", ledger.ErrCorrupt, err))
	}
	if first == "ok" {
		return nil
	}
	return b.corrupt("the open-time integrity check found damage: %s", oneLine(first))
}

// oneLine joins the lines of a SQLite check report with "; ".
func oneLine(s string) string {
	var parts []string
	for _, l := range strings.Split(s, "\n") {
		if l = strings.TrimSpace(l); l != "" && l != "*** in database main ***" {
			parts = append(parts, l)
		}
	}
	return strings.Join(parts, "; ")
}
