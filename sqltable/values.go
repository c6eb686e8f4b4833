package sqltable

import (
	"bytes"
	"encoding/json"
	"fmt"
	"math"
	"reflect"
	"strconv"
	"strings"
	"time"
	"unicode"

	"github.com/mcp-changeset/changeset-go/internal/canonjson"
)

// Row is one row of a table, by column name. Its values are always in the
// canonical form described in the package documentation: nil (NULL),
// int64, float64, string or bool. Rows that this package returns are in
// that form; rows given to it may hold any of the Go types listed there,
// which it converts.
//
// A Row decodes from JSON exactly: integers become int64 at any size that
// fits, never float64, so a key or a count above 2^53 survives the ledger.
type Row map[string]any

// UnmarshalJSON decodes a JSON object into r, keeping integers exact.
func (r *Row) UnmarshalJSON(data []byte) error {
	dec := json.NewDecoder(bytes.NewReader(data))
	dec.UseNumber()
	var m map[string]any
	if err := dec.Decode(&m); err != nil {
		return err
	}
	if m == nil {
		*r = nil
		return nil
	}
	for k, v := range m {
		n, ok := v.(json.Number)
		if !ok {
			continue
		}
		if i, err := strconv.ParseInt(string(n), 10, 64); err == nil {
			m[k] = i
		} else if f, err := strconv.ParseFloat(string(n), 64); err == nil {
			m[k] = f
		} else {
			return fmt.Errorf("sqltable: column %q holds the number %s, which fits neither int64 nor float64", k, n)
		}
	}
	*r = m
	return nil
}

// canonicalValue converts a value given by the application (in a Row or as
// a key) to the canonical form.
func canonicalValue(col string, v any) (any, error) {
	switch x := v.(type) {
	case nil, string, bool, int64:
		return x, nil
	case float64:
		return finite(col, x)
	case float32:
		return finite(col, float64(x))
	case int:
		return int64(x), nil
	case int8:
		return int64(x), nil
	case int16:
		return int64(x), nil
	case int32:
		return int64(x), nil
	case uint8:
		return int64(x), nil
	case uint16:
		return int64(x), nil
	case uint32:
		return int64(x), nil
	case uint:
		return unsigned(col, uint64(x))
	case uint64:
		return unsigned(col, x)
	case json.Number:
		if i, err := strconv.ParseInt(string(x), 10, 64); err == nil {
			return i, nil
		}
		f, err := strconv.ParseFloat(string(x), 64)
		if err != nil {
			return nil, fmt.Errorf("column %s: %q is not a number that fits int64 or float64", col, x)
		}
		return finite(col, f)
	case time.Time:
		return timeText(x), nil
	case []byte:
		return nil, fmt.Errorf("column %s: binary values are not supported", col)
	}
	// Pointers (a nil *string is NULL) and named types (type Status string).
	rv := reflect.ValueOf(v)
	switch rv.Kind() {
	case reflect.Pointer:
		if rv.IsNil() {
			return nil, nil
		}
		return canonicalValue(col, rv.Elem().Interface())
	case reflect.String:
		return rv.String(), nil
	case reflect.Bool:
		return rv.Bool(), nil
	case reflect.Int, reflect.Int8, reflect.Int16, reflect.Int32, reflect.Int64:
		return rv.Int(), nil
	case reflect.Uint, reflect.Uint8, reflect.Uint16, reflect.Uint32, reflect.Uint64:
		return unsigned(col, rv.Uint())
	case reflect.Float32, reflect.Float64:
		return finite(col, rv.Float())
	}
	return nil, fmt.Errorf("column %s: a value of type %T is not supported (use a string, number, bool, time.Time or nil)", col, v)
}

// dbValue converts a value scanned from the database to the canonical
// form; dbType is the column's declared type, upper case.
func dbValue(d Dialect, col, dbType string, v any) (any, error) {
	switch x := v.(type) {
	case int64:
		if d == SQLite && (dbType == "BOOLEAN" || dbType == "BOOL") && (x == 0 || x == 1) {
			return x == 1, nil // SQLite keeps booleans as 0 and 1
		}
		return x, nil
	case []byte:
		if dbType == "JSON" || dbType == "JSONB" {
			return string(x), nil
		}
		return nil, fmt.Errorf("column %s holds binary data, which sqltable does not carry; leave the column out with Config.Columns", col)
	}
	return canonicalValue(col, v)
}

// timeText is the canonical form of a time: RFC 3339 in UTC, with as many
// fractional digits as it needs.
func timeText(t time.Time) string { return t.UTC().Format(time.RFC3339Nano) }

func finite(col string, f float64) (any, error) {
	if math.IsNaN(f) || math.IsInf(f, 0) {
		return nil, fmt.Errorf("column %s holds %v, which JSON cannot carry", col, f)
	}
	return f, nil
}

func unsigned(col string, u uint64) (any, error) {
	if u > math.MaxInt64 {
		return nil, fmt.Errorf("column %s: %d is above the largest int64", col, u)
	}
	return int64(u), nil
}

// sameValue reports whether two canonical values are equal as JSON (so 2
// and 2.0 are equal).
func sameValue(a, b any) bool {
	ja, errA := canonjson.Marshal(a)
	jb, errB := canonjson.Marshal(b)
	return errA == nil && errB == nil && bytes.Equal(ja, jb)
}

// keyText renders a canonical key for resources and messages: bare when it
// is plain text, quoted with Go's escaping when it is empty or holds a
// space, a quote, or a character that does not print (a control or bidi
// character), so that a key can never pass for the text around it.
func keyText(k any) string {
	switch x := k.(type) {
	case string:
		if x == "" || strings.ContainsAny(x, " \"") || strings.IndexFunc(x, func(r rune) bool { return !unicode.IsPrint(r) }) >= 0 {
			return strconv.Quote(x)
		}
		return x
	case int64:
		return strconv.FormatInt(x, 10)
	}
	return fmt.Sprint(k)
}
