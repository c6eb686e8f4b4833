package sqltable

import (
	"database/sql"
	"encoding/json"
	"errors"
	"math"
	"strings"
	"testing"

	changeset "github.com/mcp-changeset/changeset-go"
	"github.com/mcp-changeset/changeset-go/ledger"
)

// The adapter's own compare-and-set: a person's edit after the Guard's
// check and before the write (only possible outside the ledger's
// database, whose transaction holds the check and the write together) is
// found by the apply itself, which writes nothing.
func TestOwnCheckBetweenTheGuardsCheckAndTheWrite(t *testing.T) {
	for _, table := range []string{"people", "plain"} {
		t.Run(table, func(t *testing.T) {
			for _, s := range setups {
				if s.inLedger {
					continue
				}
				t.Run(s.name, func(t *testing.T) {
					e := newEnv(t, s, table)
					_, r, _ := e.change("create", Row{"name": "Fay"})
					key := r["id"]
					for i, in := range []any{
						updateIn{Key: keyArg{key}, Set: Row{"name": "Fay (agent)"}},
						deleteIn{Key: keyArg{key}},
					} {
						action := []string{"update", "delete"}[i]
						p := e.preview(action, in)
						edit := "UPDATE " + table + " SET email = 'sneaky " + action + "'" + bump(table) + " WHERE id = ?"
						e.table.beforeCheck = func() { e.exec(edit, key); e.table.beforeCheck = nil }
						want := ""
						_, err := e.g.Apply(e.ctx, p.ChangeID, p.ConfirmationToken)
						if e.table.beforeCheck != nil {
							t.Fatal("the hook did not run")
						}
						want = e.raw(table)
						if !errors.Is(err, changeset.ErrStateChanged) || !strings.Contains(err.Error(), "change "+p.ChangeID+" was not applied") {
							t.Fatalf("%s: %v, want state changed naming the change", action, err)
						}
						if strings.Contains(err.Error(), "change  ") {
							t.Fatalf("the message lacks the change ID: %v", err)
						}
						if !strings.Contains(want, `"sneaky `+action+`"`) || !strings.Contains(want, `"Fay"`) {
							t.Fatalf("%s wrote over the person's edit:\n%s", action, want)
						}
						c := e.record(p.ChangeID)
						if c.Status != ledger.ApplyFailed || c.Failure != ledger.FailureStateChanged || !c.NothingWritten {
							t.Fatalf("%s recorded as %s/%s nothing written %v", action, c.Status, c.Failure, c.NothingWritten)
						}
					}
					// The same between the Guard's check and the undo.
					id, _, tok := e.change("update", updateIn{Key: keyArg{key}, Set: Row{"name": "Fay 2"}})
					e.table.beforeCheck = func() {
						e.exec("UPDATE "+table+" SET email = 'later'"+bump(table)+" WHERE id = ?", key)
						e.table.beforeCheck = nil
					}
					_, err := e.g.Undo(e.ctx, id, tok)
					if !errors.Is(err, changeset.ErrStateChanged) || !strings.Contains(err.Error(), id) {
						t.Fatalf("undo: %v, want state changed", err)
					}
					if got := e.get(key); got["name"] != "Fay 2" || got["email"] != "later" {
						t.Fatalf("the refused undo wrote: %v", got)
					}
				})
			}
		})
	}
}

// Inside the ledger's transaction there is no window, so the writes are
// called directly with a payload the row no longer matches.
func TestWritesRefuseAStaleRowInsideATransaction(t *testing.T) {
	forEach(t, "people", func(e *env) {
		t := e.t
		_, r, _ := e.change("create", Row{"name": "Gus"})
		stale := Row{}
		for k, v := range r {
			stale[k] = v
		}
		e.exec("UPDATE people SET name = 'Gus (person)', version = version + 1 WHERE id = ?", r["id"])
		want := e.raw("people")
		calls := map[string]func() error{
			"update": func() error {
				_, err := e.txDo(func(tx *sql.Tx) (any, error) {
					return e.table.applyUpdate(e.ctx, tx, payload{Before: stale, After: Row{"id": r["id"], "name": "x", "version": int64(2)}})
				})
				return err
			},
			"delete": func() error {
				_, err := e.txDo(func(tx *sql.Tx) (any, error) { return e.table.applyDelete(e.ctx, tx, payload{Before: stale}) })
				return err
			},
			"undo create": func() error {
				_, err := e.txDo(func(tx *sql.Tx) (any, error) { return nil, e.table.undoCreate(e.ctx, tx, payload{After: stale}, stale) })
				return err
			},
			"undo delete": func() error {
				_, err := e.txDo(func(tx *sql.Tx) (any, error) {
					return nil, e.table.undoDelete(e.ctx, tx, payload{Before: stale}, stale)
				})
				return err
			},
			"create": func() error {
				_, err := e.txDo(func(tx *sql.Tx) (any, error) { return e.table.applyCreate(e.ctx, tx, payload{After: stale}) })
				return err
			},
		}
		for name, call := range calls {
			var sc *changeset.StateChangedError
			if err := call(); !errors.As(err, &sc) {
				t.Fatalf("%s of a stale row: %v, want a StateChangedError", name, err)
			}
			if got := e.raw("people"); got != want {
				t.Fatalf("%s of a stale row wrote:\n%s", name, got)
			}
		}
	})
}

func TestBigIntegersNullsAndEmptyStrings(t *testing.T) {
	forEach(t, "people", func(e *env) {
		t := e.t
		big := int64(math.MaxInt64 - 1)
		key := int64(1<<62 + 1) // not a float64
		_, r, _ := e.change("create", Row{"id": key, "name": "Hal", "email": "", "score": big})
		if r["id"] != key || r["score"] != big || r["email"] != "" {
			t.Fatalf("created %v", r)
		}
		// "" → NULL is a change, and its undo puts back "", not NULL.
		id, u, tok := e.change("update", updateIn{Key: keyArg{key}, Set: Row{"email": nil, "score": big + 1}})
		if u["email"] != nil || u["score"] != big+1 {
			t.Fatalf("updated %v", u)
		}
		if !strings.Contains(e.raw("people"), "email=<null>") {
			t.Fatalf("NULL not stored:\n%s", e.raw("people"))
		}
		c := e.record(id)
		var p payload
		if err := json.Unmarshal(c.Payload, &p); err != nil {
			t.Fatal(err)
		}
		if p.Before["score"] != big || p.After["score"] != big+1 || p.Before["id"] != key {
			t.Fatalf("payload from the ledger lost digits: %s", c.Payload)
		}
		if _, err := e.g.Undo(e.ctx, id, tok); err != nil {
			t.Fatal(err)
		}
		if got := e.get(key); got["email"] != "" || got["score"] != big {
			t.Fatalf("after undo %v", got)
		}
		// NULL → "" is a change too.
		e.change("update", updateIn{Key: keyArg{key}, Set: Row{"email": nil}})
		e.change("update", updateIn{Key: keyArg{key}, Set: Row{"email": ""}})
		e.refused("update", updateIn{Key: keyArg{key}, Set: Row{"email": ""}}, "changes nothing")
		// Deleting and restoring keeps the big values exactly.
		before := e.raw("people")
		did, _, dtok := e.change("delete", deleteIn{Key: keyArg{key}})
		if _, err := e.g.Undo(e.ctx, did, dtok); err != nil {
			t.Fatal(err)
		}
		after := e.raw("people")
		if strings.Replace(before, `version="5"`, `version="6"`, 1) != after {
			t.Fatalf("restore changed the row:\n%s\nwant\n%s", after, before)
		}
	})
}

func TestInjectionInValuesAndKeys(t *testing.T) {
	forEach(t, "people", func(e *env) {
		t := e.t
		evil := `Robert'); DROP TABLE people; --`
		_, r, _ := e.change("create", Row{"name": evil, "email": `" OR 1=1 --`})
		other, _, _ := e.change("create", Row{"name": "other"})
		if got := e.get(r["id"]); got["name"] != evil || got["email"] != `" OR 1=1 --` {
			t.Fatalf("stored %v", got)
		}
		for _, k := range []any{"1 OR 1=1", "1; DELETE FROM people", "' OR ''='"} {
			e.refused("update", updateIn{Key: keyArg{k}, Set: Row{"name": "pwned"}}, "the key of a person is an integer, not")
			e.refused("delete", deleteIn{Key: keyArg{k}}, "is an integer")
			e.refused("create", Row{"id": k, "name": "pwned"}, "is an integer")
		}
		e.refused("update", updateIn{Key: keyArg{r["id"]}, Set: Row{`name" = 'x', "email`: "y"}}, "has no column")
		if n := strings.Count(e.raw("people"), "\n"); n != 2 {
			t.Fatalf("%d rows after the attempts", n)
		}
		if strings.Contains(e.raw("people"), "pwned") {
			t.Fatal("an injected key matched")
		}
		_ = other
	})
}

func TestOpenRefusesBadNames(t *testing.T) {
	e := newEnv(t, setups[0], "people")
	for _, c := range []struct {
		cfg  Config
		want string
	}{
		{Config{Table: "people; DROP TABLE people"}, "not a plain identifier"},
		{Config{Table: `people"`}, "not a plain identifier"},
		{Config{Table: "a.b.c"}, "schema.name"},
		{Config{Table: "nobody"}, "read the columns"},
		{Config{Table: "people", Key: "id; --"}, `key column "id; --"`},
		{Config{Table: "people", Key: "uid"}, `has no column "uid" (it has id, name, email, vip, score, version, created_at)`},
		{Config{Table: "people", Version: "rev"}, `has no column "rev"`},
		{Config{Table: "people", Version: "id"}, "cannot be the key"},
		{Config{Table: "people", Columns: []string{"name", `email"`}}, `column "email\""`},
		{Config{Table: "people", Columns: []string{"name", "email"}}, `must include the key column "id"`},
		{Config{Table: "people", Version: "version", Columns: []string{"id", "name"}}, `must include the version column`},
		{Config{Table: "people", Columns: []string{"id", "id"}}, "listed twice"},
	} {
		_, err := Open(e.ctx, e.db, c.cfg)
		if err == nil || !strings.Contains(err.Error(), c.want) {
			t.Errorf("Open(%+v): %v, want %q", c.cfg, err, c.want)
		}
	}
	e.exec(`CREATE TABLE odd ("first name" TEXT, id INTEGER PRIMARY KEY, pic BLOB)`)
	if _, err := Open(e.ctx, e.db, Config{Table: "odd"}); err == nil || !strings.Contains(err.Error(), "list the columns to use") {
		t.Errorf("Open of a table with a spaced column name: %v", err)
	}
	if _, err := Open(e.ctx, e.db, Config{Table: "odd", Columns: []string{"id", "pic"}}); err == nil || !strings.Contains(err.Error(), "binary data") {
		t.Errorf("Open with a BLOB column: %v", err)
	}
	if _, err := Open(e.ctx, e.db, Config{Table: "odd", Columns: []string{"id"}}); err != nil {
		t.Errorf("Open of the plain columns: %v", err)
	}
}

// The same row reads the same JSON on SQLite and PostgreSQL.
func TestRowsReadTheSameOnBothDialects(t *testing.T) {
	var rows []string
	for _, s := range []setup{setups[1], setups[3]} {
		e := newEnv(t, s, "people")
		_, r, _ := e.change("create", Row{"id": int64(1<<53 + 1), "name": "Ivy", "email": nil, "vip": true, "score": int64(-5)})
		if ts, _ := r["created_at"].(string); len(ts) < 20 || !strings.HasSuffix(ts, "Z") || ts[10] != 'T' {
			t.Fatalf("%s: created_at %q is not RFC 3339 in UTC", s.name, ts)
		}
		delete(r, "created_at")
		rows = append(rows, canonical(t, r))
	}
	if rows[0] != rows[1] {
		t.Fatalf("SQLite row %s\nPostgreSQL row %s", rows[0], rows[1])
	}
}

func TestRowDecodesIntegersExactly(t *testing.T) {
	var r Row
	if err := json.Unmarshal([]byte(`{"a":9007199254740993,"b":1.5,"c":null,"d":"x","e":true,"f":1e400}`), &r); err == nil {
		t.Fatalf("a number beyond float64 decoded: %v", r)
	}
	if err := json.Unmarshal([]byte(`{"a":9007199254740993,"b":1.5,"c":null,"d":"x","e":true}`), &r); err != nil {
		t.Fatal(err)
	}
	if r["a"] != int64(9007199254740993) || r["b"] != 1.5 || r["c"] != nil || r["d"] != "x" || r["e"] != true {
		t.Fatalf("decoded %#v", r)
	}
}

// txDo runs fn in a transaction on the table's database, and rolls it
// back.
func (e *env) txDo(fn func(tx *sql.Tx) (any, error)) (any, error) {
	tx, err := e.db.BeginTx(e.ctx, nil)
	if err != nil {
		e.t.Fatal(err)
	}
	defer tx.Rollback()
	return fn(tx)
}

func bump(table string) string {
	if table == "people" {
		return ", version = version + 1"
	}
	return ""
}

// Text keys travel as parameters too.
func TestInjectionInTextKeys(t *testing.T) {
	for _, s := range []setup{setups[1], setups[3]} {
		t.Run(s.name, func(t *testing.T) {
			e := newEnv(t, s, "people")
			e.exec(`CREATE TABLE tags (name TEXT PRIMARY KEY, color TEXT)`)
			tags := e.open(Config{Table: "tags", Kind: "tag", Key: "name"})
			e.register(tags, "_tag")
			e.change("create_tag", Row{"name": "red", "color": "#f00"})
			e.change("create_tag", Row{"name": "x' OR '1'='1", "color": "evil"})
			for _, k := range []string{"' OR '1'='1", "red' --", `red"`, "red; DROP TABLE tags"} {
				e.refused("update_tag", updateIn{Key: keyArg{k}, Set: Row{"color": "pwned"}}, "there is no tag "+keyText(k))
				e.refused("delete_tag", deleteIn{Key: keyArg{k}}, "there is no tag")
			}
			e.change("update_tag", updateIn{Key: keyArg{"x' OR '1'='1"}, Set: Row{"color": "still evil"}})
			rows, err := tags.List(e.ctx)
			if err != nil {
				t.Fatal(err)
			}
			if got := canonical(t, rows); got != `[{"color":"#f00","name":"red"},{"color":"still evil","name":"x' OR '1'='1"}]` {
				t.Fatalf("tags %s", got)
			}
			if _, err := e.g.Preview(e.ctx, "create_tag", Row{"color": "no name"}); err == nil || !strings.Contains(err.Error(), "a new tag needs its key (name)") {
				t.Fatalf("a text key from RandomKey: %v", err)
			}
		})
	}
}
