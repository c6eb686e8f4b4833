package ledgertest

import (
	"context"
	"encoding/json"
	"fmt"
	"reflect"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/mcp-changeset/changeset-go/ledger"
	"github.com/mcp-changeset/changeset-go/ledger/driver"
)

// The tests in this file store one field at a time, so that a value bound
// to the wrong column, or scanned into the wrong field, shows up as a
// field that moved, even between two fields of the same type and value
// (the three booleans of a change are all true in fullChange).

// changeFixed are the fields of a change that UpdateChange never writes.
var changeFixed = map[string]bool{"ID": true, "Action": true, "ScopeHash": true, "RunID": true, "CreatedAt": true, "DependsOn": true, "PreviewedBy": true, "Resources": true}

// runFixed are the fields of a run that UpdateRun never writes.
var runFixed = map[string]bool{"ID": true, "ScopeHash": true, "CreatedAt": true, "Kind": true, "SessionKey": true, "StartedBy": true}

// testChangeOwnColumns inserts, and updates, changes that each carry one
// field of fullChange on top of a bare change.
func testChangeOwnColumns(t *testing.T, h Harness) {
	ctx := context.Background()
	l, _ := open(t, h)
	insertRuns(t, l, "run_1")
	full := fullChange("chg_full", t0)
	full.RunID = "run_1"
	fv := reflect.ValueOf(full).Elem()
	bare := func(id string) *ledger.Change {
		return &ledger.Change{ID: id, Action: "a", Status: ledger.Pending, CreatedAt: sec(1), UpdatedAt: sec(2)}
	}
	for i := range fv.NumField() {
		name := fv.Type().Field(i).Name
		switch name {
		case "ID", "Action", "Status", "CreatedAt", "UpdatedAt":
			continue // in every bare change; the full round trip covers them
		}
		with := func(c *ledger.Change) *ledger.Change {
			reflect.ValueOf(c).Elem().Field(i).Set(fv.Field(i))
			return c
		}
		// Inserted with the field set.
		c := with(bare(fmt.Sprintf("chg_i%02d", i)))
		insertChanges(t, l, c)
		if got := mustGet(t, l, c.ID); !reflect.DeepEqual(got, stored(c)) {
			t.Errorf("insert with only %s set:\n got %#v\nwant %#v", name, got, stored(c))
		}
		// Updated from a bare row to one with the field set; a fixed
		// field stays as it was inserted.
		u := bare(fmt.Sprintf("chg_u%02d", i))
		insertChanges(t, l, u)
		next := with(bare(u.ID))
		if err := driver.BackendOf(l).UpdateChange(ctx, l.DB(), next, ledger.Pending); err != nil {
			t.Fatalf("update with only %s set: %v", name, err)
		}
		want := stored(next)
		if changeFixed[name] {
			want = stored(u)
		}
		if got := mustGet(t, l, u.ID); !reflect.DeepEqual(got, want) {
			t.Errorf("update with only %s set (fixed at preview: %v):\n got %#v\nwant %#v", name, changeFixed[name], got, want)
		}
	}
}

// testRunOwnColumns does the same for runs.
func testRunOwnColumns(t *testing.T, h Harness) {
	ctx := context.Background()
	l, _ := open(t, h)
	full := fullRun("run_full")
	fv := reflect.ValueOf(full).Elem()
	bare := func(id string) *ledger.Run {
		return &ledger.Run{ID: id, Status: ledger.RunOpen, CreatedAt: sec(1), UpdatedAt: sec(2)}
	}
	for i := range fv.NumField() {
		name := fv.Type().Field(i).Name
		switch name {
		case "ID", "Status", "CreatedAt", "UpdatedAt":
			continue
		}
		with := func(r *ledger.Run) *ledger.Run {
			reflect.ValueOf(r).Elem().Field(i).Set(fv.Field(i))
			return r
		}
		r := with(bare(fmt.Sprintf("run_i%02d", i)))
		if err := driver.BackendOf(l).InsertRun(ctx, l.DB(), r); err != nil {
			t.Fatal(err)
		}
		if got, err := l.Run(ctx, r.ID); err != nil || !reflect.DeepEqual(got, storedRun(r)) {
			t.Errorf("insert with only %s set:\n got %#v, %v\nwant %#v", name, got, err, storedRun(r))
		}
		u := bare(fmt.Sprintf("run_u%02d", i))
		if err := driver.BackendOf(l).InsertRun(ctx, l.DB(), u); err != nil {
			t.Fatal(err)
		}
		next := with(bare(u.ID))
		if err := driver.BackendOf(l).UpdateRun(ctx, l.DB(), next, ledger.RunOpen); err != nil {
			t.Fatalf("update with only %s set: %v", name, err)
		}
		want := storedRun(next)
		if runFixed[name] {
			want = storedRun(u)
		}
		if got, err := l.Run(ctx, u.ID); err != nil || !reflect.DeepEqual(got, want) {
			t.Errorf("update with only %s set (fixed at start: %v):\n got %#v, %v\nwant %#v", name, runFixed[name], got, err, want)
		}
	}
}

// columnText is how testColumnNames reads a column: as text, NULL as
// "NULL", a boolean as 0 or 1 whatever the database's representation.
func columnText(t *testing.T, l *ledger.Ledger, table, column, id string) string {
	t.Helper()
	var s string
	q := `SELECT COALESCE(CAST(` + column + ` AS TEXT), 'NULL') FROM ` + table + ` WHERE id = ` + placeholder(l)
	if err := l.DB().QueryRowContext(context.Background(), q, id).Scan(&s); err != nil {
		t.Fatalf("read %s.%s: %v", table, column, err)
	}
	switch s {
	case "true":
		return "1"
	case "false":
		return "0"
	}
	return s
}

// placeholder is the first parameter's placeholder in l's SQL.
func placeholder(l *ledger.Ledger) string {
	if strings.HasPrefix(l.Location(), "postgres") {
		return "$1"
	}
	return "?"
}

// testColumnNames reads the stored row of fullChange and fullRun column by
// column, by name, as an operator's SQL would: each field must be in the
// column named for it. (The tests above read rows back through the
// backend, which would not notice two columns that are swapped
// consistently on the way in and out.) The ledger's tables are read by
// their plain names: the harnesses open ledgers in the database's default
// schema.
func testColumnNames(t *testing.T, h Harness) {
	ctx := context.Background()
	l, _ := open(t, h)
	insertRuns(t, l, "run_1")
	c := fullChange("chg_full", t0)
	c.RunID, c.Transactional = "run_1", false // two booleans apart
	insertChanges(t, l, c)
	us := func(tm time.Time) string { return strconv.FormatInt(tm.UnixMicro(), 10) }
	list := func(s []string) string { b, _ := json.Marshal(s); return string(b) }
	for col, want := range map[string]string{
		"id": c.ID, "action": c.Action, "status": string(c.Status), "scope_hash": string(c.ScopeHash), "run_id": c.RunID,
		"resource": c.Resource, "payload": string(c.Payload), "payload_hash": string(c.PayloadHash), "diff": string(c.Diff),
		"summary": c.Summary, "warnings": list(c.Warnings), "state_hash": string(c.StateHash),
		"before_state": string(c.Before), "after_state": string(c.After), "undo_found_state": string(c.UndoFound), "confirm_hash": string(c.ConfirmHash), "undo_hash": string(c.UndoHash),
		"undoable": "1", "transactional": "0", "result": string(c.Result), "error_type": c.ErrorType, "error": c.Error,
		"note": c.Note, "applied_by": c.AppliedBy, "undone_by": c.UndoneBy,
		"created_at": us(c.CreatedAt), "updated_at": us(c.UpdatedAt), "expires_at": us(c.ExpiresAt), "applied_at": us(c.AppliedAt),
		"undo_expires_at": us(c.UndoExpiresAt), "undone_at": us(c.UndoneAt),
		"redact_fields": list(c.RedactFields), "redacted_at": us(c.RedactedAt),
		"failure": string(c.Failure), "nothing_written": "1", "depends_on": list(c.DependsOn), "resources": list(c.Resources),
	} {
		if got := columnText(t, l, "changes", col, c.ID); got != want {
			t.Errorf("changes.%s = %q, want %q", col, got, want)
		}
	}
	r := fullRun("run_full")
	if err := driver.BackendOf(l).InsertRun(ctx, l.DB(), r); err != nil {
		t.Fatal(err)
	}
	for col, want := range map[string]string{
		"id": r.ID, "label": r.Label, "scope_hash": string(r.ScopeHash), "status": string(r.Status), "kind": string(r.Kind),
		"session_key": string(r.SessionKey), "plan_hash": string(r.PlanHash), "confirm_hash": string(r.ConfirmHash),
		"confirm_expires_at": us(r.ConfirmExpiresAt), "report": string(r.Report), "undone_by": r.UndoneBy, "started_by": r.StartedBy,
		"created_at": us(r.CreatedAt), "updated_at": us(r.UpdatedAt),
	} {
		if got := columnText(t, l, "runs", col, r.ID); got != want {
			t.Errorf("runs.%s = %q, want %q", col, got, want)
		}
	}
}
