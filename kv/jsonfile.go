package kv

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"os"
	"path/filepath"
	"slices"
	"sync"

	"github.com/mcp-changeset/changeset-go/internal/canonjson"
)

// JSONFile is a Store kept in one file that holds a JSON object of keys
// and values, which people may also edit by hand:
//
//	{
//	  "beta": {"enabled": true, "rollout": 10},
//	  "dark-mode": {"enabled": false, "rollout": 0}
//	}
//
// The file is read again on every call, so a hand edit is seen at once. A
// missing (or empty) file is an empty store. A file that is not such an
// object is reported as a *MalformedFileError and never overwritten.
//
// [JSONFile.Swap] and [JSONFile.SwapAll] take an exclusive lock (flock)
// on a lock file beside it, path + ".lock", so that several processes
// serving one file cannot both pass the comparison and both write; they
// then write the whole object to a temporary file in the same directory,
// sync it and rename it over the file, so a reader sees the old object or
// the new one, never half of one, however many keys a SwapAll sets. Every
// other key keeps its exact bytes and its place; a new key goes before
// the first key that sorts after it, so a file kept in order stays in
// order (and the undo of a delete puts the key back in its place). A
// person's editor takes no lock, so an edit saved in the instant between
// a swap's read and its rename can be lost, as between any two programs
// that write one file.
type JSONFile struct {
	path string
	mu   sync.Mutex // serializes this process's writers where flock is missing
}

// NewJSONFile returns the Store kept in the file at path. Nothing is read
// or created until it is used.
func NewJSONFile(path string) *JSONFile { return &JSONFile{path: path} }

// Get returns the value of key, as the file spells it, or nil if there is
// none.
func (f *JSONFile) Get(ctx context.Context, key string) (json.RawMessage, error) {
	doc, _, err := f.read()
	if err != nil {
		return nil, err
	}
	return doc.get(key), nil
}

// All returns every key and its value, as the file spells it.
func (f *JSONFile) All(ctx context.Context) (map[string]json.RawMessage, error) {
	doc, _, err := f.read()
	if err != nil {
		return nil, err
	}
	all := make(map[string]json.RawMessage, len(doc))
	for _, m := range doc {
		all[m.key] = m.value
	}
	return all, nil
}

// Swap sets key to next (nil: deletes it) if it holds prev (nil: absent),
// comparing them as JSON values; otherwise it writes nothing and returns an
// error wrapping ErrChanged.
func (f *JSONFile) Swap(ctx context.Context, key string, prev, next json.RawMessage) error {
	return f.SwapAll(ctx, []Swap{{Key: key, Prev: prev, Next: next}})
}

// SwapAll applies every swap if every key holds its Prev, comparing them
// as JSON values, in one rewrite of the file under its lock: a reader sees
// all of the swaps or none. Otherwise it writes nothing and returns an
// error wrapping ErrChanged (see Batcher).
func (f *JSONFile) SwapAll(ctx context.Context, swaps []Swap) error {
	if err := distinctKeys(swaps); err != nil {
		return err
	}
	nexts := make([]json.RawMessage, len(swaps))
	for i, s := range swaps {
		if s.Next == nil {
			continue
		}
		var indented bytes.Buffer
		if err := json.Indent(&indented, s.Next, "  ", "  "); err != nil {
			return fmt.Errorf("kv: the new value of key %q is not valid JSON: %w", s.Key, err)
		}
		nexts[i] = indented.Bytes()
	}
	f.mu.Lock()
	defer f.mu.Unlock()
	unlock, err := lock(f.path + ".lock")
	if err != nil {
		return err
	}
	defer unlock()
	doc, perm, err := f.read()
	if err != nil {
		return err
	}
	for _, s := range swaps {
		if !sameValue(doc.get(s.Key), s.Prev) {
			return fmt.Errorf("kv: key %q in %s: %w", s.Key, f.path, ErrChanged)
		}
	}
	for i, s := range swaps {
		doc = doc.set(s.Key, nexts[i])
	}
	return f.write(doc, perm)
}

// member is one key of the file and its value's exact bytes.
type member struct {
	key   string
	value json.RawMessage
}

// document is the file's object, its members in the file's order.
type document []member

func (d document) get(key string) json.RawMessage {
	for _, m := range d {
		if m.key == key {
			return m.value
		}
	}
	return nil
}

// set returns d with key set to value, or removed if value is nil. A new
// key goes before the first key that sorts after it.
func (d document) set(key string, value json.RawMessage) document {
	for i, m := range d {
		if m.key == key {
			if value == nil {
				return append(d[:i:i], d[i+1:]...)
			}
			d[i].value = value
			return d
		}
	}
	if value == nil {
		return d
	}
	i := slices.IndexFunc(d, func(m member) bool { return m.key > key })
	if i < 0 {
		i = len(d)
	}
	return slices.Insert(d, i, member{key, value})
}

// read reads and parses the file, and returns its permissions too.
func (f *JSONFile) read() (document, fs.FileMode, error) {
	data, err := os.ReadFile(f.path)
	if errors.Is(err, fs.ErrNotExist) {
		return nil, 0o644, nil
	}
	if err != nil {
		return nil, 0, err
	}
	perm := fs.FileMode(0o644)
	if fi, err := os.Stat(f.path); err == nil {
		perm = fi.Mode().Perm()
	}
	doc, err := parse(data)
	if err != nil {
		var me *MalformedFileError
		if errors.As(err, &me) {
			me.Path = f.path
		}
		return nil, 0, err
	}
	return doc, perm, nil
}

// write replaces the file with doc: a temporary file beside it, written and
// synced, renamed over it (over the target of a symbolic link at the path,
// not the link), then the directory synced.
func (f *JSONFile) write(doc document, perm fs.FileMode) error {
	path := f.path
	if resolved, err := filepath.EvalSymlinks(path); err == nil {
		path = resolved
	}
	var buf bytes.Buffer
	buf.WriteString("{")
	for i, m := range doc {
		if i > 0 {
			buf.WriteString(",")
		}
		name, err := json.Marshal(m.key)
		if err != nil {
			return err
		}
		fmt.Fprintf(&buf, "\n  %s: %s", name, m.value)
	}
	if len(doc) > 0 {
		buf.WriteString("\n")
	}
	buf.WriteString("}\n")

	dir := filepath.Dir(path)
	tmp, err := os.CreateTemp(dir, "."+filepath.Base(path)+".tmp-*")
	if err != nil {
		return err
	}
	_, err = tmp.Write(buf.Bytes())
	if err == nil {
		err = tmp.Chmod(perm)
	}
	if err == nil {
		err = tmp.Sync()
	}
	if cerr := tmp.Close(); err == nil {
		err = cerr
	}
	if err == nil {
		err = os.Rename(tmp.Name(), path)
	}
	if err != nil {
		os.Remove(tmp.Name())
		return err
	}
	if d, err := os.Open(dir); err == nil {
		err = d.Sync()
		d.Close()
		return err
	}
	return nil
}

// MalformedFileError reports a JSONFile that is not a JSON object of keys
// and values. The file is left as it is for a person to fix.
type MalformedFileError struct {
	Path string
	// Line is the line of the file where the problem is (from 1), or 0.
	Line int
	// Reason says what is wrong.
	Reason string
}

func (e *MalformedFileError) Error() string {
	at := ""
	if e.Line > 0 {
		at = fmt.Sprintf(" at line %d", e.Line)
	}
	return fmt.Sprintf("kv: %s is not a JSON object of keys and values%s: %s; fix it by hand (it is not written while it is malformed)", e.Path, at, e.Reason)
}

// parse reads a JSON object, keeping each member's exact bytes. Whitespace
// alone is an empty object. A key that appears twice is refused, as is a
// value that canonical JSON refuses (such as an unpaired surrogate).
func parse(data []byte) (document, error) {
	if len(bytes.TrimSpace(data)) == 0 {
		return nil, nil
	}
	dec := json.NewDecoder(bytes.NewReader(data))
	bad := func(reason string, err error) error {
		offset := dec.InputOffset()
		var se *json.SyntaxError
		if errors.As(err, &se) {
			offset = se.Offset
		}
		if err != nil {
			reason += ": " + err.Error()
		}
		return &MalformedFileError{Line: 1 + bytes.Count(data[:min(int(offset), len(data))], []byte("\n")), Reason: reason}
	}
	if tok, err := dec.Token(); err != nil || tok != json.Delim('{') {
		return nil, bad("it does not start with {", err)
	}
	var doc document
	seen := map[string]bool{}
	for dec.More() {
		tok, err := dec.Token()
		if err != nil {
			return nil, bad("a key is not readable", err)
		}
		key := tok.(string) // inside an object, the decoder only yields a string here
		var v json.RawMessage
		if err := dec.Decode(&v); err != nil {
			return nil, bad(fmt.Sprintf("the value of %q is not readable", key), err)
		}
		if seen[key] {
			return nil, bad(fmt.Sprintf("the key %q appears twice", key), nil)
		}
		if _, err := canonjson.Canonicalize(v); err != nil {
			return nil, bad(fmt.Sprintf("the value of %q is not strict JSON", key), err)
		}
		seen[key] = true
		doc = append(doc, member{key, v})
	}
	if _, err := dec.Token(); err != nil {
		return nil, bad("the object is not closed", err)
	}
	if _, err := dec.Token(); err != io.EOF {
		return nil, bad("there is more after the object", err)
	}
	return doc, nil
}
