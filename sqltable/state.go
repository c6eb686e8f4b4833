package sqltable

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"fmt"
	"strings"
	"unicode/utf8"

	"github.com/mcp-changeset/changeset-go/internal/canonjson"
)

// What counts as someone's work on a row, decided once: every operation's
// Observe, diff and compare-and-set go through state, so that the state
// one change observes for a row is byte for byte the state another change
// observes for it (a run's undo compares them across changes).

// state is what counts of row r: every column but the ignored ones and
// the stamp. It is nil (untyped) when there is no row.
func (t *Table) state(r Row) any {
	if r == nil {
		return nil
	}
	if len(t.skip) == 0 {
		return r
	}
	out := make(Row, len(r))
	for k, v := range r {
		if !t.skip[k] {
			out[k] = v
		}
	}
	return out
}

// sameState reports whether two rows read the same on every column that
// counts (both nil counts as the same).
func (t *Table) sameState(a, b Row) bool {
	if a == nil || b == nil {
		return a == nil && b == nil
	}
	for k, v := range a {
		if t.skip[k] {
			continue
		}
		if w, ok := b[k]; !ok || !sameValue(v, w) {
			return false
		}
	}
	for k := range b {
		if _, ok := a[k]; !ok && !t.skip[k] {
			return false
		}
	}
	return true
}

// digest is a digest of the states of rows, in order (nil for a row that
// is gone): what an UpdateMatching stores instead of every row whole, so
// that its payload and result stay small.
func (t *Table) digest(rows []Row) (string, error) {
	states := make([]any, len(rows))
	for i, r := range rows {
		states[i] = t.state(r)
	}
	b, err := canonjson.Marshal(states)
	if err != nil {
		return "", err
	}
	sum := sha256.Sum256(b)
	return "sha256:" + hex.EncodeToString(sum[:]), nil
}

// resource is the name of the row whose canonical key is key, for a run's
// undo: "<kind>:<key>", the same for every operation.
func (t *Table) resource(key any) string { return t.kind + ":" + keyText(key) }

// maxLabel is the most runes of a label a summary shows.
const maxLabel = 80

// rowName names row r for people: its key ("TEA-003"), or, with a label
// column whose value is not NULL, the label quoted and the key after it
// (`"Green tea" (TEA-003)`). The label is data, quoted with Go's escaping
// (control and bidi characters escaped) and cut to maxLabel runes.
func (t *Table) rowName(r Row) string {
	key := keyText(r[t.key])
	if t.label == "" || r[t.label] == nil {
		return key
	}
	l, ok := r[t.label].(string)
	if !ok {
		l = fmt.Sprint(r[t.label])
	}
	if utf8.RuneCountInString(l) > maxLabel {
		l = string([]rune(l)[:maxLabel-1]) + "…"
	}
	return fmt.Sprintf("%q (%s)", l, key)
}

// now is the value of the stamp column for one write, canonical; nil when
// the table has no stamp column.
func (t *Table) now() (any, error) {
	if t.stamp == "" {
		return nil, nil
	}
	v, err := canonicalValue(t.stamp, t.stampValue())
	if err != nil {
		return nil, fmt.Errorf("sqltable: Config.StampValue: %w", err)
	}
	return v, nil
}

// keysPerQuery caps the keys of one getMany statement, well under
// SQLite's and PostgreSQL's limits on parameters.
const keysPerQuery = 200

// getMany reads the rows whose canonical keys are keys, by key (a key
// with no row is absent), locking them (PostgreSQL's FOR UPDATE) when lock
// is set.
func (t *Table) getMany(ctx context.Context, q querier, keys []any, lock bool) (map[any]Row, error) {
	if lock && t.beforeCheck != nil {
		t.beforeCheck()
	}
	out := make(map[any]Row, len(keys))
	for start := 0; start < len(keys); start += keysPerQuery {
		chunk := keys[start:min(start+keysPerQuery, len(keys))]
		params := make([]string, len(chunk))
		for i := range chunk {
			params[i] = t.param(i + 1)
		}
		query := "SELECT " + t.selectList + " FROM " + t.name + " WHERE " + quote(t.key) + " IN (" + strings.Join(params, ", ") + ")"
		if lock && t.dialect == PostgreSQL {
			query += " ORDER BY " + quote(t.key) + " FOR UPDATE"
		}
		rows, err := q.QueryContext(ctx, query, chunk...)
		if err != nil {
			return nil, err
		}
		found, err := t.scan(rows)
		if err != nil {
			return nil, err
		}
		for _, r := range found {
			k := r[t.key]
			if _, dup := out[k]; dup {
				return nil, fmt.Errorf("sqltable: several rows of %s have the key %s; the key column %q must be unique", t.name, keyText(k), t.key)
			}
			out[k] = r
		}
	}
	return out, nil
}
