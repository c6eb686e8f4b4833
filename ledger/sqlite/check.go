package sqlite

import (
	"context"
	"database/sql"
	"errors"
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
	if id.appID != ApplicationID {
		problems = append(problems, "identity: application_id is "+hex32(id.appID)+", not "+hex32(ApplicationID))
	}
	if id.version != SchemaVersion {
		problems = append(problems, "identity: user_version is "+strconv.Itoa(id.version)+", not "+strconv.Itoa(SchemaVersion))
	}
	return problems, nil
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
