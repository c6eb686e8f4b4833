package sqltable

import (
	"context"
	"database/sql"
	"fmt"
	"maps"
	"slices"
	"strconv"
	"strings"
	"unicode/utf8"

	changeset "github.com/mcp-changeset/changeset-go"
	"github.com/mcp-changeset/changeset-go/internal/canonjson"
	"github.com/modelcontextprotocol/go-sdk/mcp"
)

// UpdateMatching registers on g a guarded operation that updates every row
// of t whose columns equal match — one change whose resources are the rows
// ("product:TEA-1", "product:TEA-2", …).
//
// edit turns the tool's input into the condition and the update: match
// holds one or more columns and the value each must equal (nil matches
// NULL), and set receives each matching row, its values canonical, and
// returns the columns to set on it (nil or empty: leave that row alone).
// set may return a changeset.Refuse error to refuse the whole change. The
// key, the version, the stamp and the ignored columns cannot be set.
//
//	sqltable.UpdateMatching(guard, &mcp.Tool{Name: "adjust_prices"}, products,
//		func(ctx context.Context, in adjustIn) (sqltable.Row, func(sqltable.Row) (sqltable.Row, error), error) {
//			return sqltable.Row{"category": in.Category}, func(r sqltable.Row) (sqltable.Row, error) {
//				cents := r["price_cents"].(int64)
//				return sqltable.Row{"price_cents": cents + cents*in.Percent/100}, nil
//			}, nil
//		})
//
// The preview refuses a condition that matches no row, one that matches
// more than Config.MaxRows rows (narrow it), and an update that changes no
// row. It proposes one change whose Resources are the rows it changes
// (rows that set leaves alone are not part of it), whose diff has one
// entry per changed column of each row, with the field "<key> <column>"
// ("TEA-003 price_cents"), and whose summary reads `Update 3 products
// where category = "tea"`. Each row's state is observed as Update
// observes it (the row but its ignored columns and stamp), so a run's undo
// relates this change to the single-row changes of the same rows.
//
// The apply, in one transaction, reads every row (locked on PostgreSQL)
// and checks that all still read as the preview saw them; if any row
// differs or is gone it writes nothing and fails as state_changed.
// Otherwise it sets each row's columns, bumps its version and sets its
// stamp, and returns how many rows it updated. Its undo, in one
// transaction too, checks that every row still reads as the apply left it
// and puts back the columns the change set, bumping the version and
// setting the stamp again; if any row differs, nothing is written.
func UpdateMatching[In any](g *changeset.Guard, tool *mcp.Tool, t *Table,
	edit func(ctx context.Context, in In) (match Row, set func(row Row) (Row, error), err error)) {
	preview := func(ctx context.Context, in In) (*changeset.Proposal[bulkPayload], error) {
		match, set, err := edit(ctx, in)
		if err != nil {
			return nil, err
		}
		if set == nil {
			return nil, fmt.Errorf("sqltable.UpdateMatching %s: edit returned no set function", tool.Name)
		}
		return t.previewMatching(ctx, match, set)
	}
	register(g, tool, t, preview, t.applyMatching, t.undoMatching, t.observeMatching)
}

// bulkPayload is what an UpdateMatching change stores. It is kept small,
// so that hundreds of rows fit the Guard's payload limit: for each row the
// columns it changes, before and after, and for all rows one digest of
// their states as the preview read them.
type bulkPayload struct {
	// Match is the condition, for people who read the payload.
	Match Row `json:"match"`
	// Rows are the rows the change updates, by key.
	Rows []bulkRow `json:"rows"`
	// State is t.digest of the rows' states as the preview read them, in
	// the order of Rows.
	State string `json:"state"`
}

// bulkRow is one row of an UpdateMatching change: Before holds its key
// and the columns the change sets, as they were; After the same columns
// (not the key) as the change sets them.
type bulkRow struct {
	Before Row `json:"before"`
	After  Row `json:"after"`
}

// bulkResult is what the apply of an UpdateMatching returns: how many rows
// it updated, and the digest of their states as it left them, which its
// undo checks.
type bulkResult struct {
	Updated int    `json:"updated"`
	State   string `json:"state"`
}

// previewMatching reads the rows that match, asks set what to change in
// each, and proposes the change.
func (t *Table) previewMatching(ctx context.Context, match Row, set func(Row) (Row, error)) (*changeset.Proposal[bulkPayload], error) {
	cond, err := t.condition(match)
	if err != nil {
		return nil, err
	}
	where, args := t.where(cond)
	text := conditionText(cond)
	q := "SELECT " + t.selectList + " FROM " + t.name + where + " ORDER BY " + quote(t.key) + " LIMIT " + strconv.Itoa(t.maxRows+1)
	rows, err := t.db.QueryContext(ctx, q, args...)
	if err != nil {
		return nil, err
	}
	found, err := t.scan(rows)
	switch {
	case err != nil:
		return nil, err
	case len(found) == 0:
		return nil, changeset.Refuse("no %s matches %s, so there is nothing to update", t.kind, text)
	case len(found) > t.maxRows:
		return nil, changeset.Refuse("more than %d %s match %s, over the limit of %d rows for one change; narrow the condition", t.maxRows, plural(t.kind), text, t.maxRows)
	}

	p := bulkPayload{Match: cond, Rows: []bulkRow{}}
	var (
		read      []Row
		resources []string
		states    = changeset.States{}
		diff      []changeset.DiffEntry
	)
	for _, cur := range found {
		values, err := set(maps.Clone(cur))
		if err != nil {
			return nil, err
		}
		values, err = t.values(values, false)
		if err != nil {
			return nil, err
		}
		changes := t.diffColumns(cur, values)
		if len(changes) == 0 {
			continue // set leaves this row alone
		}
		key := cur[t.key]
		r := bulkRow{Before: Row{t.key: key}, After: changes}
		for _, col := range slices.Sorted(maps.Keys(changes)) {
			r.Before[col] = cur[col]
			diff = append(diff, changeset.DiffEntry{Field: keyText(key) + " " + col, Kind: changeset.DiffChanged, Before: cur[col], After: changes[col]})
		}
		p.Rows = append(p.Rows, r)
		read = append(read, cur)
		resources = append(resources, t.resource(key))
		states[t.resource(key)] = t.state(cur)
	}
	if len(p.Rows) == 0 {
		return nil, changeset.Refuse("the update changes nothing: the %s where %s already hold these values", plural(t.kind), text)
	}
	if p.State, err = t.digest(read); err != nil {
		return nil, err
	}
	summary := fmt.Sprintf("Update %d %s where %s", len(p.Rows), t.count(len(p.Rows)), text)
	if len(p.Rows) < len(found) {
		summary = fmt.Sprintf("Update %d of the %d %s where %s", len(p.Rows), len(found), plural(t.kind), text)
	}
	return &changeset.Proposal[bulkPayload]{
		Payload:   p,
		Diff:      diff,
		Summary:   summary,
		Resources: resources,
		Snapshot:  &changeset.Snapshot{Value: states},
	}, nil
}

// condition checks the columns of match and converts its values to the
// canonical form.
func (t *Table) condition(match Row) (Row, error) {
	if len(match) == 0 {
		return nil, changeset.Refuse("an update of matching %s needs a condition: at least one column and the value it must equal", plural(t.kind))
	}
	out := make(Row, len(match))
	for name, v := range match {
		if !t.has(name) {
			return nil, changeset.Refuse("%s has no column %q", t.kind, name)
		}
		c, err := canonicalValue(name, v)
		if err != nil {
			return nil, changeset.Refuse("%v", err)
		}
		out[name] = c
	}
	return out, nil
}

// where is the WHERE clause of a condition and its parameters: each column
// equal to its value, or IS NULL for nil, in the order of the columns'
// names.
func (t *Table) where(cond Row) (string, []any) {
	var terms []string
	var args []any
	for _, name := range slices.Sorted(maps.Keys(cond)) {
		if cond[name] == nil {
			terms = append(terms, quote(name)+" IS NULL")
			continue
		}
		args = append(args, cond[name])
		terms = append(terms, quote(name)+" = "+t.param(len(args)))
	}
	return " WHERE " + strings.Join(terms, " AND "), args
}

// conditionText is a condition for people: `category = "tea" and vip =
// true`. Text is quoted with Go's escaping (control and bidi characters
// escaped: it is data, never words of the server's own) and cut to
// maxLabel runes; other values are their JSON.
func conditionText(cond Row) string {
	var terms []string
	for _, name := range slices.Sorted(maps.Keys(cond)) {
		var v string
		switch x := cond[name].(type) {
		case string:
			if utf8.RuneCountInString(x) > maxLabel {
				x = string([]rune(x)[:maxLabel-1]) + "…"
			}
			v = strconv.Quote(x)
		default:
			b, err := canonjson.Marshal(x)
			if err != nil {
				b = []byte(strconv.Quote(fmt.Sprint(x)))
			}
			v = string(b)
		}
		terms = append(terms, name+" = "+v)
	}
	return strings.Join(terms, " and ")
}

// count is the kind for n rows: "product" or "products".
func (t *Table) count(n int) string {
	if n == 1 {
		return t.kind
	}
	return plural(t.kind)
}

// plural is an English plural of a kind, good enough for summaries:
// product → products, box → boxes, category → categories.
func plural(kind string) string {
	switch {
	case strings.HasSuffix(kind, "s"), strings.HasSuffix(kind, "x"), strings.HasSuffix(kind, "z"),
		strings.HasSuffix(kind, "ch"), strings.HasSuffix(kind, "sh"):
		return kind + "es"
	case len(kind) > 1 && strings.HasSuffix(kind, "y") && !strings.ContainsAny(kind[len(kind)-2:len(kind)-1], "aeiou"):
		return kind[:len(kind)-1] + "ies"
	}
	return kind + "s"
}

// keys are the canonical keys of the change's rows, in order.
func (t *Table) keys(p bulkPayload) []any {
	keys := make([]any, len(p.Rows))
	for i, r := range p.Rows {
		keys[i] = r.Before[t.key]
	}
	return keys
}

// observeMatching is the state of each of the change's rows, by resource
// (nil for a row that is gone): the same state Update observes for it.
func (t *Table) observeMatching(ctx context.Context, q querier, p bulkPayload) (any, error) {
	keys := t.keys(p)
	rows, err := t.getMany(ctx, q, keys, false)
	if err != nil {
		return nil, err
	}
	states := make(changeset.States, len(keys))
	for _, k := range keys {
		states[t.resource(k)] = t.state(rows[k])
	}
	return states, nil
}

// lockMatching reads the change's rows for a write (locked on PostgreSQL),
// in the order of the payload, and reports whether their states' digest is
// want.
func (t *Table) lockMatching(ctx context.Context, tx *sql.Tx, p bulkPayload, want string) ([]Row, bool, error) {
	keys := t.keys(p)
	byKey, err := t.getMany(ctx, tx, keys, true)
	if err != nil {
		return nil, false, err
	}
	rows := make([]Row, len(keys))
	for i, k := range keys {
		rows[i] = byKey[k]
	}
	got, err := t.digest(rows)
	return rows, got == want, err
}

// applyMatching writes every row of the change, or none: a row that no
// longer reads as the preview saw it ends the apply as state_changed, and
// the transaction, with whatever it wrote, rolls back.
func (t *Table) applyMatching(ctx context.Context, tx *sql.Tx, p bulkPayload) (bulkResult, error) {
	rows, same, err := t.lockMatching(ctx, tx, p, p.State)
	if err != nil {
		return bulkResult{}, err
	}
	if !same {
		return bulkResult{}, changed("apply")
	}
	now, err := t.now()
	if err != nil {
		return bulkResult{}, err
	}
	after := make([]Row, len(rows))
	for i, cur := range rows {
		if after[i], err = t.set(ctx, tx, cur, p.Rows[i].After, now); err != nil {
			return bulkResult{}, err
		}
		if after[i] == nil {
			return bulkResult{}, changed("apply")
		}
	}
	state, err := t.digest(after)
	return bulkResult{Updated: len(after), State: state}, err
}

// undoMatching puts back the columns the change set on every row, or on
// none: a row that no longer reads as the apply left it ends the undo as
// state_changed, and the transaction rolls back.
func (t *Table) undoMatching(ctx context.Context, tx *sql.Tx, p bulkPayload, res bulkResult) error {
	rows, same, err := t.lockMatching(ctx, tx, p, res.State)
	if err != nil {
		return err
	}
	if !same {
		return changed("undo")
	}
	now, err := t.now()
	if err != nil {
		return err
	}
	for i, cur := range rows {
		restore := maps.Clone(p.Rows[i].Before)
		delete(restore, t.key)
		row, err := t.set(ctx, tx, cur, restore, now)
		if err != nil {
			return err
		}
		if row == nil {
			return changed("undo")
		}
	}
	return nil
}
