package postgres

import (
	"database/sql"
	"encoding/json"
	"fmt"
	"strconv"
	"strings"
	"time"
)

// How Go values are stored, exactly as in the SQLite ledger:
//
//   - time.Time is bigint Unix microseconds (UTC); the zero time is NULL.
//     Times read back are in UTC, truncated to the microsecond.
//   - json.RawMessage is text; nil is NULL, so nil and empty stay apart.
//   - []string (warnings, redacted field names) is a JSON array as text;
//     nil is NULL and empty is '[]'.
//   - bool is boolean.
//   - An optional reference (a change's run ID) is NULL when empty, so that
//     the foreign key does not apply.
//   - A list of IDs or statuses is one text[] parameter (= ANY($n)).

// scanner is a *sql.Row or *sql.Rows.
type scanner interface {
	Scan(dest ...any) error
}

// args collects the parameters of a statement built piece by piece.
type args []any

// add appends v and returns its placeholder.
func (a *args) add(v any) string {
	*a = append(*a, v)
	return "$" + strconv.Itoa(len(*a))
}

// placeholders returns "$from, $from+1, …" with n placeholders.
func placeholders(from, n int) string {
	s := make([]string, n)
	for i := range s {
		s[i] = "$" + strconv.Itoa(from+i)
	}
	return strings.Join(s, ", ")
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
	return string(b)
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
		return nil, fmt.Errorf("a stored list is not a JSON array of strings: %w", err)
	}
	return s, nil
}

func optString(s string) any {
	if s == "" {
		return nil
	}
	return s
}

// stringSlice converts statuses to the []string that binds as text[].
func stringSlice[S ~string](s []S) []string {
	out := make([]string, len(s))
	for i, v := range s {
		out[i] = string(v)
	}
	return out
}

// closeRows closes rows and returns the error that ended the iteration.
func closeRows(rows *sql.Rows) error {
	err := rows.Err()
	if cerr := rows.Close(); err == nil {
		err = cerr
	}
	return err
}
