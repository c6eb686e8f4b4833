package sqltable

import (
	"context"
	"database/sql"
	"fmt"
	"maps"

	changeset "github.com/mcp-changeset/changeset-go"
	"github.com/modelcontextprotocol/go-sdk/mcp"
)

// Create registers on g a guarded operation that inserts one row of t; its
// preview tool is "preview_" + tool.Name. row turns the tool's input into
// the new row's values (validate the input there, and return a
// changeset.Refuse error to refuse it). Columns it leaves out get their
// DEFAULT; the key, when left out, comes from Config.NewKey, so that the
// preview names the row it will create. The version column is the
// adapter's: it starts at 1; so is the stamp column ([Config].Stamp),
// set when the row is inserted. The row may give ignored columns
// ([Config].Ignore); they are written but, like the stamp, in no diff.
//
// The preview refuses a key that exists. The apply inserts the row and
// returns it as stored, with the columns the database filled in; its undo
// deletes the row unless its state changed since.
func Create[In any](g *changeset.Guard, tool *mcp.Tool, t *Table, row func(ctx context.Context, in In) (Row, error)) {
	preview := func(ctx context.Context, in In) (*changeset.Proposal[payload], error) {
		r, err := row(ctx, in)
		if err != nil {
			return nil, err
		}
		after, err := t.values(r, true)
		if err != nil {
			return nil, err
		}
		if _, ok := after[t.key]; !ok {
			k, err := t.newKey(ctx)
			if err != nil {
				return nil, err
			}
			if after[t.key], err = canonicalValue(t.key, k); err != nil {
				return nil, err
			}
		}
		key, err := t.keyValue(after[t.key])
		if err != nil {
			return nil, err
		}
		cur, err := t.get(ctx, t.db, key, false)
		if err != nil {
			return nil, err
		}
		if cur != nil {
			return nil, changeset.Refuse("%s %s already exists", t.kind, keyText(key))
		}
		if t.version != "" {
			after[t.version] = int64(1)
		}
		return t.proposal("Create", payload{After: after})
	}
	register(g, tool, t, preview, t.applyCreate, t.undoCreate, t.observe)
}

// Update registers on g a guarded operation that changes one row of t.
// edit turns the tool's input into the row's key and the columns to set
// (leave out a column to keep its value; a nil value sets NULL). The key,
// the version, the stamp and the ignored columns cannot be set. For many
// rows at once, see [UpdateMatching].
//
// The preview refuses a missing row and an update that changes nothing.
// The apply sets the columns that differ, bumps the version, sets the
// stamp, and returns the row as stored; its undo puts those columns back
// (bumping the version and setting the stamp again) unless the row's
// state changed since.
func Update[In any](g *changeset.Guard, tool *mcp.Tool, t *Table, edit func(ctx context.Context, in In) (key any, set Row, err error)) {
	preview := func(ctx context.Context, in In) (*changeset.Proposal[payload], error) {
		k, set, err := edit(ctx, in)
		if err != nil {
			return nil, err
		}
		cur, err := t.existing(ctx, k)
		if err != nil {
			return nil, err
		}
		values, err := t.values(set, false)
		if err != nil {
			return nil, err
		}
		after := maps.Clone(cur)
		maps.Copy(after, values)
		if len(t.diffColumns(cur, after)) == 0 {
			return nil, changeset.Refuse("the update changes nothing: %s %s already holds these values", t.kind, t.rowName(cur))
		}
		if t.version != "" {
			v, ok := cur[t.version].(int64)
			if !ok {
				return nil, fmt.Errorf("sqltable: the version of %s %s is %v, not an integer", t.kind, keyText(cur[t.key]), cur[t.version])
			}
			after[t.version] = v + 1
		}
		return t.proposal("Update", payload{Before: cur, After: after})
	}
	register(g, tool, t, preview, t.applyUpdate, t.undoUpdate, t.observe)
}

// Delete registers on g a guarded operation that deletes one row of t. key
// turns the tool's input into the row's key.
//
// The preview refuses a missing row. The apply deletes the row unless it
// changed since the preview, and returns it as it was; its undo inserts it
// again, every column as it was (the same key, the same creation time,
// the ignored columns as they were), with the version bumped and the
// stamp set.
func Delete[In any](g *changeset.Guard, tool *mcp.Tool, t *Table, key func(ctx context.Context, in In) (any, error)) {
	preview := func(ctx context.Context, in In) (*changeset.Proposal[payload], error) {
		k, err := key(ctx, in)
		if err != nil {
			return nil, err
		}
		cur, err := t.existing(ctx, k)
		if err != nil {
			return nil, err
		}
		return t.proposal("Delete", payload{Before: cur})
	}
	register(g, tool, t, preview, t.applyDelete, t.undoDelete, t.observe)
}

// existing reads the row of an update or delete, refusing a missing one.
func (t *Table) existing(ctx context.Context, key any) (Row, error) {
	k, err := t.keyValue(key)
	if err != nil {
		return nil, err
	}
	cur, err := t.get(ctx, t.db, k, false)
	if err != nil {
		return nil, err
	}
	if cur == nil {
		return nil, changeset.Refuse("there is no %s %s", t.kind, keyText(k))
	}
	return cur, nil
}

// keyValue converts a key to the canonical form, refusing NULL and, for
// an integer key column, anything but an integer.
func (t *Table) keyValue(key any) (any, error) {
	k, err := canonicalValue(t.key, key)
	switch {
	case err != nil:
		return nil, changeset.Refuse("the key of the %s: %v", t.kind, err)
	case k == nil:
		return nil, changeset.Refuse("the %s needs a key (%s)", t.kind, t.key)
	}
	if _, isInt := k.(int64); !isInt && t.integerKey {
		return nil, changeset.Refuse("the key of a %s is an integer, not %s", t.kind, keyText(k))
	}
	return k, nil
}

// values checks the columns an application gives and converts their values
// to the canonical form. A create may give the key and the ignored
// columns; an update neither. No one may give the version or the stamp.
func (t *Table) values(r Row, create bool) (Row, error) {
	out := make(Row, len(r))
	for name, v := range r {
		switch {
		case !t.has(name):
			return nil, changeset.Refuse("%s has no column %q", t.kind, name)
		case name == t.version:
			return nil, changeset.Refuse("the version column %q is set by the adapter, not by the caller", name)
		case name == t.stamp:
			return nil, changeset.Refuse("the column %q is stamped by the adapter on every write, not set by the caller", name)
		case name == t.key && !create:
			return nil, changeset.Refuse("the key %q of a %s cannot change", name, t.kind)
		case t.ignored[name] && !create:
			return nil, changeset.Refuse("the column %q of a %s is ignored by this table's changes (left out of their diffs and checks), so an update cannot set it", name, t.kind)
		}
		c, err := canonicalValue(name, v)
		if err != nil {
			return nil, changeset.Refuse("%v", err)
		}
		out[name] = c
	}
	return out, nil
}

func (t *Table) has(name string) bool {
	for _, c := range t.cols {
		if c.name == name {
			return true
		}
	}
	return false
}

// proposal is the proposal of a change: its diff of the row's states
// (see state), its summary ("Update contact 7", or `Update product "Green
// tea" (TEA-003)` with a label column), its resource ("contact:7") and the
// state the preview read as its snapshot (nil for a create: no row).
func (t *Table) proposal(verb string, p payload) (*changeset.Proposal[payload], error) {
	before, after := t.state(p.Before), t.state(p.After)
	diff, err := changeset.Diff(before, after)
	if err != nil {
		return nil, err
	}
	named := p.Before
	if named == nil {
		named = p.After
	}
	return &changeset.Proposal[payload]{
		Payload:  p,
		Diff:     diff,
		Summary:  verb + " " + t.kind + " " + t.rowName(named),
		Resource: t.resource(t.keyOf(p)),
		Snapshot: &changeset.Snapshot{Value: before},
	}, nil
}

// observe is what counts as someone's work on the change's row: its state
// (see state), or nil when there is no row.
func (t *Table) observe(ctx context.Context, q querier, p payload) (any, error) {
	r, err := t.get(ctx, q, t.keyOf(p), false)
	if err != nil {
		return nil, err
	}
	return t.state(r), nil
}

// register adds the operation to g: with ApplyTx, UndoTx and ObserveTx
// when t is in the ledger's own database, so that the write commits with
// the ledger's record of it; with Apply, Undo and Observe otherwise, each of
// whose writes runs in a transaction of its own on t's database. P is the
// payload, R the result.
func register[In, P, R any](g *changeset.Guard, tool *mcp.Tool, t *Table,
	preview func(context.Context, In) (*changeset.Proposal[P], error),
	apply func(ctx context.Context, tx *sql.Tx, p P) (R, error),
	undo func(ctx context.Context, tx *sql.Tx, p P, result R) error,
	observe func(ctx context.Context, q querier, p P) (any, error)) {
	if t.InLedger(g) {
		changeset.Register(g, tool, changeset.Operation[In, P, R]{
			Preview: preview,
			ApplyTx: apply,
			UndoTx:  undo,
			ObserveTx: func(ctx context.Context, tx *sql.Tx, p P) (any, error) {
				return observe(ctx, tx, p)
			},
		})
		return
	}
	changeset.Register(g, tool, changeset.Operation[In, P, R]{
		Preview: preview,
		Apply: func(ctx context.Context, p P) (out R, err error) {
			err = t.inTx(ctx, func(tx *sql.Tx) error {
				out, err = apply(ctx, tx, p)
				return err
			})
			return out, err
		},
		Undo: func(ctx context.Context, p P, result R) error {
			return t.inTx(ctx, func(tx *sql.Tx) error { return undo(ctx, tx, p, result) })
		},
		Observe: func(ctx context.Context, p P) (any, error) { return observe(ctx, t.db, p) },
	})
}

// InLedger reports whether t is in the database of g's ledger (the same
// *sql.DB as g.Ledger().DB()), where its changes are applied exactly once.
func (t *Table) InLedger(g *changeset.Guard) bool { return t.db == g.Ledger().DB() }

// inTx runs fn in a transaction of its own on t's database, and commits it
// unless fn fails.
func (t *Table) inTx(ctx context.Context, fn func(tx *sql.Tx) error) error {
	tx, err := t.db.BeginTx(ctx, nil)
	if err != nil {
		return err
	}
	if err := fn(tx); err != nil {
		tx.Rollback()
		return err
	}
	return tx.Commit()
}
