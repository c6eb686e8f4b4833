package sqlite

import (
	"database/sql"
	"encoding/json"
	"fmt"
	"strings"
	"time"
)

// How Go values are stored:
//
//   - time.Time is INTEGER Unix microseconds (UTC); the zero time is NULL.
//     Times read back are in UTC, truncated to the microsecond.
//   - json.RawMessage is TEXT; nil is NULL, so nil and empty stay apart.
//   - []string is a JSON array as TEXT; nil is NULL and empty is '[]'.
//   - bool is INTEGER 0 or 1.
//   - An optional reference (a change's run ID) is NULL when empty, so that
//     the foreign key does not apply.

// maxIDsPerStatement bounds the placeholders of one IN list, well under
// SQLite's limit on host parameters.
const maxIDsPerStatement = 500

// scanner is a *sql.Row or *sql.Rows.
type scanner interface {
	Scan(dest ...any) error
}

func timeArg(t time.Time) any {
	if t.IsZero() {
		return nil
	}
	return t.UnixMicro()
}

func timeFrom(v sql.NullInt64) time.Time {
	if !v.Valid {
		return time.Time{}
	}
	return time.UnixMicro(v.Int64).UTC()
}

// ceilMicro is the smallest whole microsecond not before t, so that
// "stored < ceilMicro(t)" means "stored time strictly before t" even when t
// has nanoseconds that the stored times lack.
func ceilMicro(t time.Time) int64 {
	us := t.UnixMicro() // floor: nanoseconds are never negative
	if t.Sub(time.UnixMicro(us)) > 0 {
		us++
	}
	return us
}

func jsonArg(b json.RawMessage) any {
	if b == nil {
		return nil
	}
	return string(b) // a string binds as TEXT; []byte would be a BLOB
}

func jsonFrom(v sql.NullString) json.RawMessage {
	if !v.Valid {
		return nil
	}
	if v.String == "" {
		return json.RawMessage{}
	}
	return json.RawMessage(v.String)
}

func stringsArg(s []string) (any, error) {
	if s == nil {
		return nil, nil
	}
	b, err := json.Marshal(s)
	if err != nil {
		return nil, err
	}
	return string(b), nil
}

func stringsFrom(v sql.NullString) ([]string, error) {
	if !v.Valid {
		return nil, nil
	}
	s := []string{}
	if err := json.Unmarshal([]byte(v.String), &s); err != nil {
		return nil, fmt.Errorf("stored warnings are not a JSON array of strings: %w", err)
	}
	return s, nil
}

func optString(s string) any {
	if s == "" {
		return nil
	}
	return s
}

func boolArg(b bool) int64 {
	if b {
		return 1
	}
	return 0
}

// placeholders returns "?, ?, ..." with n question marks.
func placeholders(n int) string {
	if n <= 0 {
		return ""
	}
	return strings.Repeat("?, ", n-1) + "?"
}

// appendStrings appends every element of s to args as a separate argument.
func appendStrings[S ~string](args []any, s []S) []any {
	for _, v := range s {
		args = append(args, string(v))
	}
	return args
}

// chunks splits ids into slices of at most maxIDsPerStatement.
func chunks(ids []string) [][]string {
	var out [][]string
	for len(ids) > maxIDsPerStatement {
		out = append(out, ids[:maxIDsPerStatement])
		ids = ids[maxIDsPerStatement:]
	}
	if len(ids) > 0 {
		out = append(out, ids)
	}
	return out
}
