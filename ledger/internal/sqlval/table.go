package sqlval

import (
	"database/sql"
	"encoding/json"
	"fmt"
	"strings"
	"time"
)

// Dialect is how a backend spells what differs between databases.
// Everything else about a row (its columns, their order, how each Go value
// becomes a column value and back) is in a Table, shared by every backend.
type Dialect struct {
	// Bool is the column value of b: INTEGER 0 or 1 on SQLite, boolean
	// on PostgreSQL.
	Bool func(b bool) any
	// Param is the placeholder of the n-th parameter of a statement
	// (from 1): "?" on SQLite, "$n" on PostgreSQL.
	Param func(n int) string
	// ArrayParam says that a list of values binds as one array
	// parameter (column = ANY($n)) rather than one parameter each.
	ArrayParam bool
	// OpenIndex says that the changes table has the partial index
	// changes_open over the in-flight and failed statuses (SQLite), which
	// the planner uses only when a filter spells those statuses as
	// literals (see Where.statusIn).
	OpenIndex bool
	// TextIndex says that the changes have a full-text index of their
	// summary, action and resource (SQLite's FTS5 table changes_text,
	// keyed by rowid) for ChangeFilter.Text (see Where.text).
	TextIndex bool
}

// Table maps the rows of one table to values of T: it is the one list of
// the table's columns, the one binding of a value's fields to column
// values (InsertArgs, UpdateArgs) and the one scan of a row back into a
// value (Scan). A backend builds its statements from Columns and
// Assignments, in its own placeholder syntax, and passes the arguments in
// the order these methods return them.
//
// A column is either mutable (written by every UPDATE) or fixed (written
// by INSERT only, because it is set once: an ID, a creation time).
type Table[T any] struct {
	cols []column[T]
}

// column maps one column to one field of T.
type column[T any] struct {
	name  string
	fixed bool
	arg   func(v *T, d Dialect) any
	dest  func(v *T) any // a scan destination that writes the field
}

// NewTable returns the table of the given columns, in that order.
func NewTable[T any](cols ...column[T]) *Table[T] { return &Table[T]{cols: cols} }

// Columns lists every column, comma separated, in the order of InsertArgs
// and Scan: for SELECT and INSERT.
func (t *Table[T]) Columns() string {
	names := make([]string, len(t.cols))
	for i, c := range t.cols {
		names[i] = c.name
	}
	return strings.Join(names, ", ")
}

// Len is the number of columns, hence of InsertArgs.
func (t *Table[T]) Len() int { return len(t.cols) }

// Mutable is the number of mutable columns, hence of UpdateArgs before
// its where arguments: an UPDATE's WHERE clause numbers its own
// placeholders from Mutable()+1.
func (t *Table[T]) Mutable() int {
	n := 0
	for _, c := range t.cols {
		if !c.fixed {
			n++
		}
	}
	return n
}

// Assignments is the SET list of an UPDATE of every mutable column,
// "status = ?, resource = ?, …", with placeholder(n) as the n-th
// placeholder (from 1).
func (t *Table[T]) Assignments(placeholder func(n int) string) string {
	var parts []string
	for _, c := range t.cols {
		if !c.fixed {
			parts = append(parts, c.name+" = "+placeholder(len(parts)+1))
		}
	}
	return strings.Join(parts, ", ")
}

// InsertArgs binds every column of v, in the order of Columns.
func (t *Table[T]) InsertArgs(v *T, d Dialect) []any {
	args := make([]any, len(t.cols))
	for i, c := range t.cols {
		args[i] = c.arg(v, d)
	}
	return args
}

// UpdateArgs binds the mutable columns of v, in the order of Assignments,
// followed by where (the arguments of the UPDATE's WHERE clause).
func (t *Table[T]) UpdateArgs(v *T, d Dialect, where ...any) []any {
	args := make([]any, 0, len(t.cols)+len(where))
	for _, c := range t.cols {
		if !c.fixed {
			args = append(args, c.arg(v, d))
		}
	}
	return append(args, where...)
}

// Scan reads one row of Columns into a new value.
func (t *Table[T]) Scan(s Scanner) (*T, error) {
	v := new(T)
	dests := make([]any, len(t.cols))
	for i, c := range t.cols {
		dests[i] = c.dest(v)
	}
	if err := s.Scan(dests...); err != nil {
		return nil, err
	}
	return v, nil
}

// fixed marks c as written by INSERT only.
func fixed[T any](c column[T]) column[T] {
	c.fixed = true
	return c
}

// Text is a NOT NULL text column.
func Text[T any, S ~string](name string, field func(*T) *S) column[T] {
	return column[T]{name: name,
		arg:  func(v *T, _ Dialect) any { return string(*field(v)) },
		dest: func(v *T) any { return textDest[S]{p: field(v)} },
	}
}

// TextOr is a NOT NULL text column that stores def in place of an empty
// value, which therefore reads back as def.
func TextOr[T any, S ~string](name string, field func(*T) *S, def S) column[T] {
	c := Text(name, field)
	c.arg = func(v *T, _ Dialect) any {
		if s := *field(v); s != "" {
			return string(s)
		}
		return string(def)
	}
	return c
}

// OptText is an optional reference: NULL when empty (OptString).
func OptText[T any](name string, field func(*T) *string) column[T] {
	return column[T]{name: name,
		arg:  func(v *T, _ Dialect) any { return OptString(*field(v)) },
		dest: func(v *T) any { return optTextDest{p: field(v)} },
	}
}

// JSON is a JSON text column (JSONArg, JSONFrom).
func JSON[T any](name string, field func(*T) *json.RawMessage) column[T] {
	return column[T]{name: name,
		arg:  func(v *T, _ Dialect) any { return JSONArg(*field(v)) },
		dest: func(v *T) any { return jsonDest{p: field(v)} },
	}
}

// Strings is a list of strings as a JSON array (StringsArg, StringsFrom).
func Strings[T any](name string, field func(*T) *[]string) column[T] {
	return column[T]{name: name,
		arg:  func(v *T, _ Dialect) any { return StringsArg(*field(v)) },
		dest: func(v *T) any { return stringsDest{p: field(v)} },
	}
}

// Time is a time column (TimeArg, TimeFrom).
func Time[T any](name string, field func(*T) *time.Time) column[T] {
	return column[T]{name: name,
		arg:  func(v *T, _ Dialect) any { return TimeArg(*field(v)) },
		dest: func(v *T) any { return timeDest{p: field(v)} },
	}
}

// Bool is a NOT NULL boolean column, bound as the Dialect says.
func Bool[T any](name string, field func(*T) *bool) column[T] {
	return column[T]{name: name,
		arg:  func(v *T, d Dialect) any { return d.Bool(*field(v)) },
		dest: func(v *T) any { return boolDest{p: field(v)} },
	}
}

// The scan destinations below accept what both drivers return: string or
// []byte for text, int64 for integers, bool or int64 for booleans, nil for
// NULL.

type textDest[S ~string] struct{ p *S }

func (d textDest[S]) Scan(src any) error {
	s, ok, err := asText(src)
	if err != nil {
		return err
	}
	if !ok {
		return fmt.Errorf("NULL in a text column that may not be NULL")
	}
	*d.p = S(s)
	return nil
}

type optTextDest struct{ p *string }

func (d optTextDest) Scan(src any) error {
	s, _, err := asText(src)
	*d.p = s
	return err
}

type jsonDest struct{ p *json.RawMessage }

func (d jsonDest) Scan(src any) error {
	s, ok, err := asText(src)
	if err != nil {
		return err
	}
	*d.p = JSONFrom(nullString(s, ok))
	return nil
}

type stringsDest struct{ p *[]string }

func (d stringsDest) Scan(src any) error {
	s, ok, err := asText(src)
	if err != nil {
		return err
	}
	*d.p, err = StringsFrom(nullString(s, ok))
	return err
}

type timeDest struct{ p *time.Time }

func (d timeDest) Scan(src any) error {
	switch x := src.(type) {
	case nil:
		*d.p = time.Time{}
	case int64:
		*d.p = time.UnixMicro(x).UTC()
	default:
		return fmt.Errorf("a time column holds %T, not an integer of microseconds", src)
	}
	return nil
}

type boolDest struct{ p *bool }

func (d boolDest) Scan(src any) error {
	switch x := src.(type) {
	case bool:
		*d.p = x
	case int64:
		if x != 0 && x != 1 {
			return fmt.Errorf("a boolean column holds %d, not 0 or 1", x)
		}
		*d.p = x == 1
	default:
		return fmt.Errorf("a boolean column holds %T", src)
	}
	return nil
}

// asText reads a text column value; ok is false for NULL.
func asText(src any) (s string, ok bool, err error) {
	switch x := src.(type) {
	case nil:
		return "", false, nil
	case string:
		return x, true, nil
	case []byte:
		return string(x), true, nil
	}
	return "", false, fmt.Errorf("a text column holds %T", src)
}

func nullString(s string, ok bool) sql.NullString { return sql.NullString{String: s, Valid: ok} }
