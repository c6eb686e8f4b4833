package sqlite

import (
	"context"
	"database/sql"
	"errors"
	"io"
	"os"
	"strconv"

	"github.com/mcp-changeset/changeset-go/ledger"
	"github.com/mcp-changeset/changeset-go/ledger/internal/sqlval"
)

// Check runs SQLite's PRAGMA integrity_check and PRAGMA foreign_key_check
// and returns one line per problem they report, none when the file is
// sound. Damage so bad that a check cannot finish is reported as a problem
// too, not as an error. Check also reports a file whose application_id or
// user_version no longer matches.
func (b *Backend) Check(ctx context.Context) ([]string, error) {
	const op = "check"
	var problems []string
	err := b.eachRow(ctx, "PRAGMA integrity_check", func(rows *sql.Rows) error {
		var line string
		if err := rows.Scan(&line); err != nil {
			return err
		}
		if line != "ok" {
			problems = append(problems, "integrity: "+line)
		}
		return nil
	})
	if err == nil {
		err = b.eachRow(ctx, "PRAGMA foreign_key_check", func(rows *sql.Rows) error {
			var table, parent string
			var rowid sql.NullInt64
			var fkid int64
			if err := rows.Scan(&table, &rowid, &parent, &fkid); err != nil {
				return err
			}
			row := "a row"
			if rowid.Valid {
				row = "row " + strconv.FormatInt(rowid.Int64, 10)
			}
			problems = append(problems, "foreign key: "+row+" of table "+table+" refers to a missing row of table "+parent)
			return nil
		})
	}
	var id identity
	if err == nil {
		id, err = readIdentity(ctx, b.db)
	}
	if err != nil {
		err = b.interpretError(op, err)
		if errors.Is(err, ledger.ErrCorrupt) {
			// Damage that stops a check is what it found.
			return append(problems, "integrity: "+errors.Unwrap(err).Error()), nil
		}
		return nil, err
	}
	return append(problems, id.problems()...), nil
}

// problems reports an application_id or user_version that is not this
// package's.
func (id identity) problems() []string {
	var out []string
	if id.appID != ApplicationID {
		out = append(out, "identity: application_id is "+hex32(id.appID)+", not "+hex32(ApplicationID))
	}
	if id.version != SchemaVersion {
		out = append(out, "identity: user_version is "+strconv.Itoa(id.version)+", not "+strconv.Itoa(SchemaVersion))
	}
	return out
}

// CheckRoutine runs the checks of Check whose cost does not grow with the
// file: the file's header, the structural check that Open makes of a
// large file (checkStructure: the pages where every b-tree starts and
// ends, and the start of the freelist), and the file's identity. Like
// Check, it reports damage as a problem found, not as an error. It reads
// no rows and no middle of any b-tree: damage there is for Check.
func (b *Backend) CheckRoutine(ctx context.Context) ([]string, error) {
	const op = "check"
	if err := b.checkFileHeader(); err != nil {
		if errors.Is(err, ledger.ErrCorrupt) {
			return []string{"integrity: " + errors.Unwrap(err).Error()}, nil
		}
		return nil, err
	}
	_, err := b.walkStructure(ctx, b.db)
	var id identity
	if err == nil {
		id, err = readIdentity(ctx, b.db)
	}
	if err != nil {
		err = b.interpretError(op, err)
		if errors.Is(err, ledger.ErrCorrupt) {
			return []string{"integrity: " + errors.Unwrap(err).Error()}, nil
		}
		return nil, err
	}
	return id.problems(), nil
}

// checkFileHeader reads the database header at the start of the file and
// checks it, as Open does before SQLite reads the file.
func (b *Backend) checkFileHeader() error {
	f, err := os.Open(b.path)
	if err != nil {
		return b.interpretError("check", err)
	}
	defer f.Close()
	fi, err := f.Stat()
	if err != nil {
		return b.interpretError("check", err)
	}
	head := make([]byte, headerSize)
	n, err := io.ReadFull(f, head)
	if err != nil && !errors.Is(err, io.ErrUnexpectedEOF) {
		return b.interpretError("check", err)
	}
	var walSize int64
	if wi, err := os.Stat(b.path + "-wal"); err == nil {
		walSize = wi.Size()
	}
	return b.checkHeader(head[:n], fi.Size(), walSize)
}

// eachRow runs query on the database and calls fn for each row.
func (b *Backend) eachRow(ctx context.Context, query string, fn func(*sql.Rows) error) error {
	rows, err := b.db.QueryContext(ctx, query)
	if err != nil {
		return err
	}
	for rows.Next() {
		if err := fn(rows); err != nil {
			rows.Close()
			return err
		}
	}
	return sqlval.CloseRows(rows)
}
