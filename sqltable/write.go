package sqltable

import (
	"context"
	"database/sql"
	"fmt"
	"maps"
	"slices"
	"strings"

	changeset "github.com/mcp-changeset/changeset-go"
)

// The writes of the three operations and their undos. Each runs in a
// transaction (the ledger's, or one of its own on the table's database),
// reads the row first (locked on PostgreSQL; SQLite's write transaction
// holds the whole database), checks it against what the change expects,
// and returns a *changeset.StateChangedError, having written nothing, when
// it differs.

// payload is what a change stores: the whole row before and after. Before
// is nil for a create, After for a delete. A create's After lacks the
// columns the database fills in (a DEFAULT); its result has them.
type payload struct {
	Before Row `json:"before"`
	After  Row `json:"after"`
}

func (t *Table) keyOf(p payload) any {
	if p.After != nil {
		return p.After[t.key]
	}
	return p.Before[t.key]
}

func changed(phase string) error { return &changeset.StateChangedError{Phase: phase} }

// matches reports whether the row found is the row expected: the same
// version when the table has a version column, else the same state (every
// column but the ignored ones and the stamp; see state).
func (t *Table) matches(found, want Row) bool {
	if found == nil || want == nil {
		return found == nil && want == nil
	}
	if t.version != "" {
		return sameValue(found[t.version], want[t.version])
	}
	return t.sameState(found, want)
}

// insert writes row (its columns in the table's order), stamped, and
// returns the row as stored, with the columns the database filled in.
func (t *Table) insert(ctx context.Context, tx *sql.Tx, row Row) (Row, error) {
	if t.stamp != "" {
		now, err := t.now()
		if err != nil {
			return nil, err
		}
		row = maps.Clone(row)
		row[t.stamp] = now
	}
	var names, params []string
	var args []any
	for _, c := range t.cols {
		if v, ok := row[c.name]; ok {
			names = append(names, quote(c.name))
			args = append(args, v)
			params = append(params, t.param(len(args)))
		}
	}
	q := "INSERT INTO " + t.name + " (" + strings.Join(names, ", ") + ") VALUES (" + strings.Join(params, ", ") + ") RETURNING " + t.selectList
	rows, err := tx.QueryContext(ctx, q, args...)
	if err != nil {
		return nil, err
	}
	return t.one(rows)
}

// set updates the columns of values (with the version bumped and the
// stamp set to now) of the row whose key and version are those of
// expected, and returns the row as stored. It returns nil when no row
// matched. now is the stamp's value (see Table.now), one per write.
func (t *Table) set(ctx context.Context, tx *sql.Tx, expected Row, values Row, now any) (Row, error) {
	var sets []string
	var args []any
	for _, name := range slices.Sorted(maps.Keys(values)) {
		args = append(args, values[name])
		sets = append(sets, quote(name)+" = "+t.param(len(args)))
	}
	if t.stamp != "" {
		args = append(args, now)
		sets = append(sets, quote(t.stamp)+" = "+t.param(len(args)))
	}
	if t.version != "" {
		v := quote(t.version)
		sets = append(sets, v+" = "+v+" + 1")
	}
	args = append(args, expected[t.key])
	q := "UPDATE " + t.name + " SET " + strings.Join(sets, ", ") + " WHERE " + quote(t.key) + " = " + t.param(len(args))
	if t.version != "" {
		args = append(args, expected[t.version])
		q += " AND " + quote(t.version) + " = " + t.param(len(args))
	}
	rows, err := tx.QueryContext(ctx, q+" RETURNING "+t.selectList, args...)
	if err != nil {
		return nil, err
	}
	return t.one(rows)
}

// remove deletes the row whose key (and version, with a version column)
// are those of expected, and returns it as it was, or nil when there was
// none.
func (t *Table) remove(ctx context.Context, tx *sql.Tx, expected Row) (Row, error) {
	args := []any{expected[t.key]}
	q := "DELETE FROM " + t.name + t.byKey
	if t.version != "" {
		args = append(args, expected[t.version])
		q += " AND " + quote(t.version) + " = " + t.param(2)
	}
	rows, err := tx.QueryContext(ctx, q+" RETURNING "+t.selectList, args...)
	if err != nil {
		return nil, err
	}
	return t.one(rows)
}

// diffColumns are the columns of after that differ from before, other
// than the key, the version, the ignored columns and the stamp.
func (t *Table) diffColumns(before, after Row) Row {
	out := Row{}
	for k, v := range after {
		if k == t.key || k == t.version || t.skip[k] {
			continue
		}
		if b, ok := before[k]; !ok || !sameValue(b, v) {
			out[k] = v
		}
	}
	return out
}

func (t *Table) applyCreate(ctx context.Context, tx *sql.Tx, p payload) (Row, error) {
	cur, err := t.get(ctx, tx, t.keyOf(p), true)
	if err != nil {
		return nil, err
	}
	if cur != nil {
		return nil, changed("apply")
	}
	return t.insert(ctx, tx, p.After)
}

func (t *Table) applyUpdate(ctx context.Context, tx *sql.Tx, p payload) (Row, error) {
	now, err := t.now()
	if err != nil {
		return nil, err
	}
	if t.version != "" {
		// The UPDATE's own WHERE on the version is the compare-and-set:
		// no row back means the row changed (or went).
		if t.beforeCheck != nil {
			t.beforeCheck()
		}
	} else {
		cur, err := t.get(ctx, tx, t.keyOf(p), true)
		if err != nil {
			return nil, err
		}
		if !t.matches(cur, p.Before) {
			return nil, changed("apply")
		}
	}
	row, err := t.set(ctx, tx, p.Before, t.diffColumns(p.Before, p.After), now)
	if err == nil && row == nil {
		return nil, changed("apply")
	}
	return row, err
}

func (t *Table) applyDelete(ctx context.Context, tx *sql.Tx, p payload) (Row, error) {
	expected := p.Before
	if t.version == "" { // with a version column, the DELETE's WHERE checks it
		cur, err := t.get(ctx, tx, t.keyOf(p), true)
		if err != nil {
			return nil, err
		}
		if !t.matches(cur, p.Before) {
			return nil, changed("apply")
		}
		expected = cur
	} else if t.beforeCheck != nil {
		t.beforeCheck()
	}
	row, err := t.remove(ctx, tx, expected)
	if err == nil && row == nil {
		return nil, changed("apply")
	}
	return row, err // the row exactly as it was deleted, for the undo
}

// undoCreate deletes the row the create made, unless it changed since.
func (t *Table) undoCreate(ctx context.Context, tx *sql.Tx, p payload, created Row) error {
	cur, err := t.get(ctx, tx, t.keyOf(p), true)
	if err != nil {
		return err
	}
	if !t.sameState(cur, created) { // see undoUpdate
		return changed("undo")
	}
	row, err := t.remove(ctx, tx, cur)
	if err == nil && row == nil {
		return changed("undo")
	}
	return err
}

// undoUpdate puts back the columns the update changed, unless the row
// changed since, and bumps the version once more: a version never repeats,
// so a change previewed before the update cannot match the row again.
//
// An undo compares the row's state (not its version) with what the update
// left, and then writes with the version it just read as the
// compare-and-set: a run's undo of two changes to one row finds the
// version the newer undo bumped, and the row otherwise as the older change
// left it.
func (t *Table) undoUpdate(ctx context.Context, tx *sql.Tx, p payload, updated Row) error {
	cur, err := t.get(ctx, tx, t.keyOf(p), true)
	if err != nil {
		return err
	}
	if !t.sameState(cur, updated) {
		return changed("undo")
	}
	restore := Row{}
	for k := range t.diffColumns(p.Before, updated) {
		restore[k] = p.Before[k]
	}
	if len(restore) == 0 && t.version == "" {
		return nil // the row already reads as before the update
	}
	now, err := t.now()
	if err != nil {
		return err
	}
	row, err := t.set(ctx, tx, cur, restore, now)
	if err == nil && row == nil {
		return changed("undo")
	}
	return err
}

// undoDelete inserts the deleted row again, every column as it was (its
// key, creation time and ignored columns included), with the version
// bumped and the stamp set, unless a row with its key exists by now.
func (t *Table) undoDelete(ctx context.Context, tx *sql.Tx, p payload, deleted Row) error {
	cur, err := t.get(ctx, tx, t.keyOf(p), true)
	if err != nil {
		return err
	}
	if cur != nil {
		return changed("undo")
	}
	row := maps.Clone(deleted)
	if t.version != "" {
		v, ok := row[t.version].(int64)
		if !ok {
			return fmt.Errorf("sqltable: the deleted row's version %v is not an integer", row[t.version])
		}
		row[t.version] = v + 1
	}
	_, err = t.insert(ctx, tx, row)
	return err
}
