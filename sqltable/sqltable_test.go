package sqltable

import (
	"errors"
	"strings"
	"testing"

	changeset "github.com/mcp-changeset/changeset-go"
	"github.com/mcp-changeset/changeset-go/ledger"
)

func TestCreateUpdateDeleteAndTheirUndos(t *testing.T) {
	for _, table := range []string{"people", "plain"} {
		t.Run(table, func(t *testing.T) {
			forEach(t, table, func(e *env) { exerciseCycle(e, table) })
		})
	}
}

func exerciseCycle(e *env, table string) {
	t := e.t
	versioned := table == "people"

	// Create: the key is chosen at preview, created_at read back at apply.
	p := e.preview("create", Row{"name": "Ada", "email": "ada@example.com"})
	if !strings.HasPrefix(p.Summary, "Create person ") {
		t.Fatalf("summary %q", p.Summary)
	}
	created, createUndo := e.apply(p)
	key := created["id"].(int64)
	if key < 1 || key >= 1<<53 {
		t.Fatalf("random key %d outside 1..2^53-1", key)
	}
	if p.Summary != "Create person "+keyText(key) {
		t.Fatalf("summary %q does not name the key %d", p.Summary, key)
	}
	if s, _ := created["created_at"].(string); s == "" {
		t.Fatalf("created_at not read back: %v", created)
	}
	if created["vip"] != false || created["email"] != "ada@example.com" || created["score"] != nil {
		t.Fatalf("created row %v", created)
	}
	if versioned && created["version"] != int64(1) {
		t.Fatalf("version after create %v, want 1", created["version"])
	}
	c := e.record(p.ChangeID)
	if c.Transactional != e.inLedger {
		t.Fatalf("transactional = %v, want %v (table in the ledger's database: %v)", c.Transactional, e.inLedger, e.inLedger)
	}
	if c.Resource != "person:"+keyText(key) {
		t.Fatalf("resource %q", c.Resource)
	}
	if got := canonical(t, e.get(key)); got != canonical(t, created) {
		t.Fatalf("row %s, result %s", got, canonical(t, created))
	}

	// Update, then undo: the columns come back, the version moves on.
	id, updated, undoTok := e.change("update", updateIn{Key: keyArg{key}, Set: Row{"name": "Ada L.", "vip": true}})
	if updated["name"] != "Ada L." || updated["vip"] != true || updated["created_at"] != created["created_at"] {
		t.Fatalf("updated row %v", updated)
	}
	if versioned && updated["version"] != int64(2) {
		t.Fatalf("version after update %v", updated["version"])
	}
	if _, err := e.g.Undo(e.ctx, id, undoTok); err != nil {
		t.Fatal(err)
	}
	back := e.get(key)
	if back["name"] != "Ada" || back["vip"] != false || back["email"] != "ada@example.com" {
		t.Fatalf("row after undo of the update %v", back)
	}
	if versioned && back["version"] != int64(3) {
		t.Fatalf("version after the undo %v, want 3 (never back to 1)", back["version"])
	}

	// Delete, then undo: the same key and every column as it was.
	before := e.raw(table)
	id, deleted, undoTok := e.change("delete", deleteIn{Key: keyArg{key}})
	if canonical(t, deleted) != canonical(t, back) {
		t.Fatalf("delete returned %v, want the row %v", deleted, back)
	}
	if e.get(key) != nil {
		t.Fatal("row still there after delete")
	}
	if _, err := e.g.Undo(e.ctx, id, undoTok); err != nil {
		t.Fatal(err)
	}
	after := e.raw(table)
	if versioned {
		before = strings.Replace(before, `version="3"`, `version="4"`, 1)
	}
	if after != before {
		t.Fatalf("undo of delete restored\n%s\nwant\n%s", after, before)
	}

	// The undo of the create: the row reads exactly as the create left it
	// (the version, which moved on to 4, is the adapter's token and not
	// part of the row's state), so it is undone, with a version column or
	// without.
	_, err := e.g.Undo(e.ctx, p.ChangeID, createUndo)
	switch {
	case err != nil:
		t.Fatalf("undo of the create of a row that reads as created: %v", err)
	case e.get(key) != nil:
		t.Fatal("the undo of the create left the row")
	}
}

func TestRefusals(t *testing.T) {
	forEach(t, "people", func(e *env) {
		t := e.t
		_, r, _ := e.change("create", Row{"id": 7, "name": "Bo"})
		if r["id"] != int64(7) {
			t.Fatalf("explicit key: %v", r)
		}
		e.refused("create", Row{"id": 7, "name": "Bo again"}, "person 7 already exists")
		e.refused("update", updateIn{Key: keyArg{int64(8)}, Set: Row{"name": "x"}}, "there is no person 8")
		e.refused("delete", deleteIn{Key: keyArg{int64(8)}}, "there is no person 8")
		e.refused("update", updateIn{Key: keyArg{int64(7)}, Set: Row{"name": "Bo"}}, "the update changes nothing: person 7 already holds these values")
		e.refused("update", updateIn{Key: keyArg{int64(7)}, Set: Row{}}, "changes nothing")
		e.refused("update", updateIn{Key: keyArg{int64(7)}, Set: Row{"nick": "b"}}, `person has no column "nick"`)
		e.refused("update", updateIn{Key: keyArg{int64(7)}, Set: Row{"version": 9}}, `the version column "version" is set by the adapter`)
		e.refused("update", updateIn{Key: keyArg{int64(7)}, Set: Row{"id": 9}}, `the key "id" of a person cannot change`)
		e.refused("create", Row{"name": "V", "version": 5}, "set by the adapter")
		e.refused("delete", deleteIn{Key: keyArg{nil}}, "the person needs a key")
		if n := strings.Count(e.raw("people"), "\n"); n != 1 {
			t.Fatalf("refusals wrote: %d rows", n)
		}
	})
}

// A person's edit between preview and apply: the apply is refused as
// state_changed and writes nothing.
func TestEditBetweenPreviewAndApply(t *testing.T) {
	for _, table := range []string{"people", "plain"} {
		t.Run(table, func(t *testing.T) {
			forEach(t, table, func(e *env) {
				t := e.t
				_, r, _ := e.change("create", Row{"name": "Cy"})
				key := r["id"]
				for _, op := range []struct {
					action string
					in     any
				}{
					{"update", updateIn{Key: keyArg{key}, Set: Row{"name": "Cy (agent)"}}},
					{"delete", deleteIn{Key: keyArg{key}}},
				} {
					p := e.preview(op.action, op.in)
					e.exec("UPDATE "+table+" SET email = ? WHERE id = ?", op.action+"@person", key)
					want := e.raw(table)
					_, err := e.g.Apply(e.ctx, p.ChangeID, p.ConfirmationToken)
					if !errors.Is(err, changeset.ErrStateChanged) || !strings.Contains(err.Error(), p.ChangeID) {
						t.Fatalf("%s after a person's edit: %v", op.action, err)
					}
					if got := e.raw(table); got != want {
						t.Fatalf("a refused %s wrote:\n%s\nwant\n%s", op.action, got, want)
					}
					c := e.record(p.ChangeID)
					if c.Status != ledger.ApplyFailed || c.Failure != ledger.FailureStateChanged || !c.NothingWritten {
						t.Fatalf("%s recorded as %s/%s nothing written %v", op.action, c.Status, c.Failure, c.NothingWritten)
					}
					// The refused change keeps the row the check found, on
					// both paths (transactional or not).
					if !strings.Contains(string(c.Before), op.action+"@person") {
						t.Fatalf("the refused %s records before %s, want the row with the person's edit", op.action, c.Before)
					}
				}
				// A create whose key was taken meanwhile.
				p := e.preview("create", Row{"id": 99, "name": "Di"})
				e.exec("INSERT INTO " + table + " (id, name" + versionCol(table) + ") VALUES (99, 'someone else'" + versionVal(table) + ")")
				if _, err := e.g.Apply(e.ctx, p.ChangeID, p.ConfirmationToken); !errors.Is(err, changeset.ErrStateChanged) {
					t.Fatalf("create of a key taken meanwhile: %v", err)
				}
				if e.get(99)["name"] != "someone else" {
					t.Fatal("the refused create overwrote the row")
				}
			})
		})
	}
}

func versionCol(table string) string {
	if table == "people" {
		return ", version"
	}
	return ""
}

func versionVal(table string) string {
	if table == "people" {
		return ", 1"
	}
	return ""
}

// A person's edit between apply and undo: the undo is refused (a run's
// undo skips it with its drift) and nothing is overwritten.
func TestEditBetweenApplyAndUndo(t *testing.T) {
	for _, table := range []string{"people", "plain"} {
		t.Run(table, func(t *testing.T) {
			forEach(t, table, func(e *env) {
				t := e.t
				_, r, _ := e.change("create", Row{"name": "Ed"})
				key := r["id"]
				run, err := e.g.StartRun(e.ctx, "edit")
				if err != nil {
					t.Fatal(err)
				}
				p, err := e.g.Preview(e.ctx, "update", map[string]any{"key": key, "set": Row{"name": "Ed (agent)"}, "run_id": run.RunID})
				if err != nil {
					t.Fatalf("preview in a run: %v", err)
				}
				_, undoTok := e.apply(p)
				e.exec("UPDATE "+table+" SET name = 'Ed (person)' WHERE id = ?", key)
				want := e.raw(table)
				rep, err := e.g.UndoRun(e.ctx, run.RunID, false, "test")
				if err != nil {
					t.Fatal(err)
				}
				if len(rep.Skipped) != 1 || len(rep.Skipped[0].Drift) == 0 || len(rep.Undone) != 0 {
					t.Fatalf("run undo: skipped %+v undone %+v, want the change skipped with drift", rep.Skipped, rep.Undone)
				}
				if _, err := e.g.Undo(e.ctx, p.ChangeID, undoTok); !errors.Is(err, changeset.ErrStateChanged) {
					t.Fatalf("undo after a person's edit: %v", err)
				}
				if got := e.raw(table); got != want {
					t.Fatalf("the refused undo wrote:\n%s\nwant\n%s", got, want)
				}
			})
		})
	}
}

// A run's undo of two updates of one row undoes both, with and without a
// version column: the version is the adapter's token, not part of the
// row's state, so the newer undo (which bumps it) leaves the row as the
// older change left it.
func TestRunUndoOfTwoUpdatesOfOneRow(t *testing.T) {
	for _, table := range []string{"people", "plain"} {
		t.Run(table, func(t *testing.T) {
			forEach(t, table, func(e *env) {
				t := e.t
				_, r, _ := e.change("create", Row{"name": "Ed"})
				key := r["id"]
				run, err := e.g.StartRun(e.ctx, "rename twice")
				if err != nil {
					t.Fatal(err)
				}
				for _, name := range []string{"Eddie", "Edward"} {
					p := e.preview("update", map[string]any{"key": key, "set": Row{"name": name}, "run_id": run.RunID})
					e.apply(p)
				}
				rep, err := e.g.UndoRun(e.ctx, run.RunID, false, "test")
				if err != nil {
					t.Fatal(err)
				}
				if len(rep.Undone) != 2 || len(rep.Skipped) != 0 || rep.Status != "undone" {
					t.Fatalf("run undo: undone %+v skipped %+v status %s, want both undone", rep.Undone, rep.Skipped, rep.Status)
				}
				if got := e.get(key)["name"]; got != "Ed" {
					t.Fatalf("name after the run's undo = %v, want Ed", got)
				}
			})
		})
	}
}
