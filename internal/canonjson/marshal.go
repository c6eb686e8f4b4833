package canonjson

import (
	"bytes"
	"encoding"
	"encoding/json"
	"fmt"
	"reflect"
	"strconv"
	"strings"
	"unicode/utf8"
)

// Marshal returns the canonical JSON encoding of v.
//
// Marshal encodes v with encoding/json, so struct tags, omitempty,
// json.Marshaler and the other encoding/json rules apply, and then
// canonicalizes the result with [Canonicalize]. HTML escaping is turned off:
// '<', '>' and '&' are written as themselves, as RFC 8785 requires.
//
// encoding/json silently replaces invalid UTF-8 in strings with U+FFFD, which
// would give two different values the same canonical form and hash. Marshal
// therefore first walks v and refuses any string, map key or
// encoding.TextMarshaler output that is not valid UTF-8, with an error that
// wraps [ErrInvalid] and names the path, such as .payload.name or .items[3].
// Output of json.Marshaler methods, including json.RawMessage, is checked by
// Canonicalize instead. Errors from encoding/json, such as for a NaN or a
// channel, are also wrapped with ErrInvalid.
func Marshal(v any) ([]byte, error) {
	var w walker
	if err := w.walk(reflect.ValueOf(v), 0); err != nil {
		return nil, err
	}
	var buf bytes.Buffer
	enc := json.NewEncoder(&buf)
	enc.SetEscapeHTML(false)
	if err := enc.Encode(v); err != nil {
		return nil, fmt.Errorf("%w: %w", ErrInvalid, err)
	}
	return Canonicalize(buf.Bytes())
}

var (
	marshalerType     = reflect.TypeFor[json.Marshaler]()
	textMarshalerType = reflect.TypeFor[encoding.TextMarshaler]()
)

// walker visits what encoding/json will encode, checking strings for valid
// UTF-8. It keeps the path to the current value as a stack and formats it
// only when reporting an error.
type walker struct {
	path []pathElem
}

// pathElem is one step of a path: a field name or string map key, another
// map key (formatted only on error), or an index.
type pathElem struct {
	name    string
	key     reflect.Value
	index   int
	isIndex bool
}

func (w *walker) fail(what string) error {
	var b strings.Builder
	for _, e := range w.path {
		switch {
		case e.isIndex:
			b.WriteString("[" + strconv.Itoa(e.index) + "]")
		case e.key.IsValid():
			fmt.Fprintf(&b, ".%v", e.key)
		default:
			b.WriteString("." + e.name)
		}
	}
	path := b.String()
	if path == "" {
		path = "."
	}
	return &syntaxError{msg: what + " at " + strings.ToValidUTF8(path, "\uFFFD"), off: -1}
}

// walk checks v. depth counts the arrays and objects v is nested in, so that
// cyclic values end in an error rather than unbounded recursion.
func (w *walker) walk(v reflect.Value, depth int) error {
	// Follow pointers and interfaces, stopping at types that encode
	// themselves. A long chain with no container in between can only be a
	// cycle such as an interface holding a pointer to itself.
	for hops := 0; ; hops++ {
		if !v.IsValid() {
			return nil
		}
		k := v.Kind()
		if (k == reflect.Pointer || k == reflect.Interface) && v.IsNil() {
			return nil
		}
		if hops > MaxDepth {
			return w.fail("pointer cycle")
		}
		if done, err := w.selfEncoding(v); done {
			return err
		}
		if k != reflect.Pointer && k != reflect.Interface {
			break
		}
		v = v.Elem()
	}

	switch v.Kind() {
	case reflect.String:
		if !utf8.ValidString(v.String()) {
			return w.fail("invalid UTF-8 in string")
		}
	case reflect.Struct:
		if depth++; depth > MaxDepth {
			return w.fail("nesting deeper than " + strconv.Itoa(MaxDepth))
		}
		return w.fields(v, depth)
	case reflect.Map:
		if depth++; depth > MaxDepth {
			return w.fail("nesting deeper than " + strconv.Itoa(MaxDepth))
		}
		return w.mapEntries(v, depth)
	case reflect.Slice, reflect.Array:
		if isBytes(v.Type()) {
			return nil // base64, always valid
		}
		if depth++; depth > MaxDepth {
			return w.fail("nesting deeper than " + strconv.Itoa(MaxDepth))
		}
		for i := range v.Len() {
			w.path = append(w.path, pathElem{index: i, isIndex: true})
			if err := w.walk(v.Index(i), depth); err != nil {
				return err
			}
			w.path = w.path[:len(w.path)-1]
		}
	}
	return nil
}

// selfEncoding reports whether v encodes itself, as encoding/json decides it
// (pointer methods count when v is addressable). json.Marshaler output is
// left to Canonicalize; encoding.TextMarshaler output is checked here,
// because encoding/json would quote it and repair invalid UTF-8.
func (w *walker) selfEncoding(v reflect.Value) (bool, error) {
	if !v.CanInterface() {
		return false, nil
	}
	t := v.Type()
	if t.Implements(marshalerType) {
		return true, nil
	}
	ptr := v.Kind() != reflect.Pointer && v.CanAddr()
	if ptr && reflect.PointerTo(t).Implements(marshalerType) {
		return true, nil
	}
	var tm encoding.TextMarshaler
	switch {
	case t.Implements(textMarshalerType):
		tm = v.Interface().(encoding.TextMarshaler)
	case ptr && reflect.PointerTo(t).Implements(textMarshalerType):
		tm = v.Addr().Interface().(encoding.TextMarshaler)
	default:
		return false, nil
	}
	// A failing MarshalText is reported by encoding/json itself.
	if text, err := tm.MarshalText(); err == nil && !utf8.Valid(text) {
		return true, w.fail(fmt.Sprintf("invalid UTF-8 in text of %s", t))
	}
	return true, nil
}

func (w *walker) fields(v reflect.Value, depth int) error {
	t := v.Type()
	for i := range t.NumField() {
		sf := t.Field(i)
		ft := sf.Type
		if ft.Kind() == reflect.Pointer {
			ft = ft.Elem()
		}
		// Mirror encoding/json: unexported fields are skipped, except
		// embedded structs, whose exported fields are promoted.
		if sf.Anonymous {
			if !sf.IsExported() && ft.Kind() != reflect.Struct {
				continue
			}
		} else if !sf.IsExported() {
			continue
		}
		tag := sf.Tag.Get("json")
		if tag == "-" {
			continue
		}
		name, _, _ := strings.Cut(tag, ",")
		fv := v.Field(i)
		if sf.Anonymous && name == "" && ft.Kind() == reflect.Struct {
			// Promoted fields appear directly in the outer object;
			// encoding/json flattens them without consulting their
			// type's methods, and so does the walk.
			if fv.Kind() == reflect.Pointer {
				if fv.IsNil() {
					continue
				}
				fv = fv.Elem()
			}
			if err := w.fields(fv, depth); err != nil {
				return err
			}
			continue
		}
		if name == "" {
			name = sf.Name
		}
		w.path = append(w.path, pathElem{name: name})
		if err := w.walk(fv, depth); err != nil {
			return err
		}
		w.path = w.path[:len(w.path)-1]
	}
	return nil
}

func (w *walker) mapEntries(v reflect.Value, depth int) error {
	for iter := v.MapRange(); iter.Next(); {
		k := iter.Key()
		e := pathElem{key: k}
		if k.Kind() == reflect.String {
			if !utf8.ValidString(k.String()) {
				return w.fail("invalid UTF-8 in map key")
			}
			e = pathElem{name: k.String()}
		} else if k.Kind() == reflect.Pointer && k.IsNil() || !k.CanInterface() {
			// encoding/json writes a nil key as "".
		} else if tm, ok := k.Interface().(encoding.TextMarshaler); ok {
			if text, err := tm.MarshalText(); err == nil && !utf8.Valid(text) {
				return w.fail("invalid UTF-8 in map key")
			}
		}
		w.path = append(w.path, e)
		if err := w.walk(iter.Value(), depth); err != nil {
			return err
		}
		w.path = w.path[:len(w.path)-1]
	}
	return nil
}

// isBytes reports whether encoding/json encodes t as a base64 string.
func isBytes(t reflect.Type) bool {
	if t.Kind() != reflect.Slice || t.Elem().Kind() != reflect.Uint8 {
		return false
	}
	p := reflect.PointerTo(t.Elem())
	return !p.Implements(marshalerType) && !p.Implements(textMarshalerType)
}
