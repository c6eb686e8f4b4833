// Package sqlval holds what the SQL ledger backends share: how Go values
// are stored in columns, and how embedded migrations are loaded. Both
// backends store values the same way, so that a row reads back the same
// from either:
//
//   - time.Time is an integer of Unix microseconds (UTC); the zero time is
//     NULL. Times read back are in UTC, truncated to the microsecond.
//   - json.RawMessage is text; nil is NULL, so nil and empty stay apart.
//   - []string is a JSON array as text; nil is NULL and empty is '[]'.
//   - An optional reference (a change's run ID) is NULL when empty, so that
//     the foreign key does not apply.
package sqlval

import (
	"database/sql"
	"encoding/json"
	"fmt"
	"io/fs"
	"path"
	"sort"
	"strconv"
	"strings"
	"time"
)

// Scanner is a *sql.Row or *sql.Rows.
type Scanner interface {
	Scan(dest ...any) error
}

// TimeArg is the column value of t.
func TimeArg(t time.Time) any {
	if t.IsZero() {
		return nil
	}
	return t.UnixMicro()
}

// TimeFrom reads a time column.
func TimeFrom(v sql.NullInt64) time.Time {
	if !v.Valid {
		return time.Time{}
	}
	return time.UnixMicro(v.Int64).UTC()
}

// CeilMicro is the smallest whole microsecond not before t, so that
// "stored < CeilMicro(t)" means "stored time strictly before t" even when t
// has nanoseconds that the stored times lack.
func CeilMicro(t time.Time) int64 {
	us := t.UnixMicro() // floor: nanoseconds are never negative
	if t.Sub(time.UnixMicro(us)) > 0 {
		us++
	}
	return us
}

// JSONArg is the column value of b: text, or NULL for nil.
func JSONArg(b json.RawMessage) any {
	if b == nil {
		return nil
	}
	return string(b) // a string binds as text; []byte would be a blob
}

// JSONFrom reads a JSON column.
func JSONFrom(v sql.NullString) json.RawMessage {
	if !v.Valid {
		return nil
	}
	if v.String == "" {
		return json.RawMessage{}
	}
	return json.RawMessage(v.String)
}

// StringsArg is the column value of s: a JSON array, or NULL for nil.
func StringsArg(s []string) any {
	if s == nil {
		return nil
	}
	b, err := json.Marshal(s)
	if err != nil {
		panic("sqlval: a []string failed to marshal: " + err.Error()) // encoding/json cannot fail on strings
	}
	return string(b)
}

// StringsFrom reads a column that StringsArg wrote.
func StringsFrom(v sql.NullString) ([]string, error) {
	if !v.Valid {
		return nil, nil
	}
	s := []string{}
	if err := json.Unmarshal([]byte(v.String), &s); err != nil {
		return nil, fmt.Errorf("a stored list is not a JSON array of strings: %w", err)
	}
	return s, nil
}

// OptString is the column value of an optional reference: NULL when empty.
func OptString(s string) any {
	if s == "" {
		return nil
	}
	return s
}

// Migration is one step of a schema: applying it to a ledger at any
// version below Version (and at or above the version of the step before
// it) brings it to Version.
type Migration struct {
	Version int
	Name    string
	SQL     string
}

// LoadMigrations reads the files NNN_what.sql in dir of fsys, in order of
// their numbers. The numbers must rise from 1 and the last must be want;
// a number may be missing (a gap left for a migration of another branch):
// a ledger past the gap simply never runs it, since versions only
// increase. It panics otherwise, or on two files of one number: that is a
// bug of the backend pkg, caught by its tests.
func LoadMigrations(fsys fs.FS, dir, pkg string, want int) []Migration {
	entries, err := fs.ReadDir(fsys, dir)
	if err != nil {
		panic(pkg + ": " + err.Error())
	}
	var ms []Migration
	for _, e := range entries {
		num, _, ok := strings.Cut(e.Name(), "_")
		v, err := strconv.Atoi(num)
		if !ok || err != nil {
			panic(pkg + ": migration " + e.Name() + " is not named NNN_what.sql")
		}
		text, err := fs.ReadFile(fsys, path.Join(dir, e.Name()))
		if err != nil {
			panic(pkg + ": " + err.Error())
		}
		ms = append(ms, Migration{Version: v, Name: e.Name(), SQL: string(text)})
	}
	sort.Slice(ms, func(i, j int) bool { return ms[i].Version < ms[j].Version })
	for i, m := range ms {
		if m.Version < 1 || i > 0 && m.Version == ms[i-1].Version {
			panic(fmt.Sprintf("%s: migration %s: versions must be distinct and from 1", pkg, m.Name))
		}
	}
	if len(ms) == 0 || ms[len(ms)-1].Version != want {
		panic(fmt.Sprintf("%s: the last migration is not version %d, the schema version", pkg, want))
	}
	return ms
}

// Pending returns the migrations of ms (as LoadMigrations returns them)
// that a ledger at schema version have lacks: those numbered above it.
func Pending(ms []Migration, have int) []Migration {
	for i, m := range ms {
		if m.Version > have {
			return ms[i:]
		}
	}
	return nil
}

// ScanAll reads every row of rows with scan and closes rows. It returns the
// first error of scanning, iterating or closing.
func ScanAll[T any](rows *sql.Rows, scan func(Scanner) (T, error)) ([]T, error) {
	var out []T
	for rows.Next() {
		v, err := scan(rows)
		if err != nil {
			rows.Close()
			return nil, err
		}
		out = append(out, v)
	}
	if err := CloseRows(rows); err != nil {
		return nil, err
	}
	return out, nil
}

// CloseRows closes rows and returns the error that ended the iteration, if
// any, or else the error of closing.
func CloseRows(rows *sql.Rows) error {
	err := rows.Err()
	if cerr := rows.Close(); err == nil {
		err = cerr
	}
	return err
}

// Affected returns how many rows a statement's result wrote, passing on
// the statement's error: Affected(q.ExecContext(…)).
func Affected(res sql.Result, err error) (int, error) {
	if err != nil {
		return 0, err
	}
	n, err := res.RowsAffected()
	return int(n), err
}
