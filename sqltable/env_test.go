package sqltable

import (
	"bytes"
	"context"
	"database/sql"
	"encoding/json"
	"fmt"
	"net/url"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"testing"

	changeset "github.com/mcp-changeset/changeset-go"
	"github.com/mcp-changeset/changeset-go/internal/pgtest"
	"github.com/mcp-changeset/changeset-go/ledger"
	_ "github.com/mcp-changeset/changeset-go/ledger/postgres" // PostgreSQL ledgers
	"github.com/modelcontextprotocol/go-sdk/mcp"
	_ "modernc.org/sqlite"
)

func TestMain(m *testing.M) {
	code := m.Run()
	pgtest.Stop()
	os.Exit(code)
}

// The tables of the tests, one with a version column and one without, on
// each dialect. created_at is filled by the database.
var schemas = map[Dialect]string{
	SQLite: `
CREATE TABLE people (
    id         INTEGER PRIMARY KEY,
    name       TEXT NOT NULL,
    email      TEXT,
    vip        BOOLEAN NOT NULL DEFAULT 0,
    score      INTEGER,
    version    INTEGER NOT NULL,
    created_at TEXT NOT NULL DEFAULT (strftime('%Y-%m-%dT%H:%M:%fZ', 'now'))
);
CREATE TABLE plain (
    id         INTEGER PRIMARY KEY,
    name       TEXT NOT NULL,
    email      TEXT,
    vip        BOOLEAN NOT NULL DEFAULT 0,
    score      INTEGER,
    created_at DATETIME NOT NULL DEFAULT CURRENT_TIMESTAMP
);`,
	PostgreSQL: `
CREATE TABLE people (
    id         BIGINT PRIMARY KEY,
    name       TEXT NOT NULL,
    email      TEXT,
    vip        BOOLEAN NOT NULL DEFAULT false,
    score      BIGINT,
    version    BIGINT NOT NULL,
    created_at TIMESTAMPTZ NOT NULL DEFAULT now()
);
CREATE TABLE plain (
    id         BIGINT PRIMARY KEY,
    name       TEXT NOT NULL,
    email      TEXT,
    vip        BOOLEAN NOT NULL DEFAULT false,
    score      BIGINT,
    created_at TIMESTAMPTZ NOT NULL DEFAULT now()
);`,
}

// env is a Guard with the operations of one table registered, and the
// table's database.
type env struct {
	t        *testing.T
	g        *changeset.Guard
	db       *sql.DB // the table's database
	dialect  Dialect
	inLedger bool
	table    *Table
	ctx      context.Context
}

// setup is one way of keeping the table: on a dialect, in the ledger's
// database or in one of its own.
type setup struct {
	name     string
	dialect  Dialect
	inLedger bool
}

var setups = []setup{
	{"sqlite/ledger-db", SQLite, true},
	{"sqlite/own-db", SQLite, false},
	{"postgres/ledger-db", PostgreSQL, true},
	{"postgres/own-db", PostgreSQL, false},
}

// forEach runs fn on every setup with the table named table ("people",
// with a version column, or "plain", without).
func forEach(t *testing.T, table string, fn func(e *env)) {
	for _, s := range setups {
		t.Run(s.name, func(t *testing.T) { fn(newEnv(t, s, table)) })
	}
}

func newEnv(t *testing.T, s setup, table string) *env {
	t.Helper()
	return newEnvWith(t, s, table, changeset.Options{})
}

// newEnvWith is newEnv with the Guard's options opts (its LedgerPath and
// WriteMode are the setup's).
func newEnvWith(t *testing.T, s setup, table string, opts changeset.Options) *env {
	t.Helper()
	ctx := context.Background()
	e := &env{t: t, dialect: s.dialect, inLedger: s.inLedger, ctx: ctx}
	ledgerPath := filepath.Join(t.TempDir(), "ledger.db")
	var own func() *sql.DB
	switch s.dialect {
	case SQLite:
		own = func() *sql.DB {
			return openDB(t, "sqlite", filepath.Join(t.TempDir(), "app.db")+"?_pragma=busy_timeout(5000)")
		}
	case PostgreSQL:
		dsn := pgtest.DSN(t)
		if s.inLedger {
			u, _ := url.Parse(dsn)
			q := u.Query()
			q.Set("changeset_schema", "ledger_"+strings.ToLower(strconv.FormatInt(RandomKey(), 36)))
			u.RawQuery = q.Encode()
			ledgerPath = u.String()
		}
		own = func() *sql.DB { return openDB(t, "pgx", dsn) }
	}
	opts.LedgerPath, opts.WriteMode = ledgerPath, changeset.WriteGuarded
	g, err := changeset.New(nil, opts)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { g.Close() })
	e.g = g
	if s.inLedger {
		e.db = g.Ledger().DB()
	} else {
		e.db = own()
	}
	if _, err := e.db.ExecContext(ctx, schemas[s.dialect]); err != nil {
		t.Fatal(err)
	}
	cfg := Config{Table: table, Kind: "person"}
	if table == "people" {
		cfg.Version = "version"
	}
	e.table = e.open(cfg)
	e.register(e.table, "")
	return e
}

func openDB(t *testing.T, driver, dsn string) *sql.DB {
	t.Helper()
	db, err := sql.Open(driver, dsn)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { db.Close() })
	return db
}

func (e *env) open(c Config) *Table {
	e.t.Helper()
	tb, err := Open(e.ctx, e.db, c)
	if err != nil {
		e.t.Fatal(err)
	}
	if tb.InLedger(e.g) != e.inLedger {
		e.t.Fatalf("InLedger = %v, want %v", !e.inLedger, e.inLedger)
	}
	return tb
}

// keyArg is a key as the tests send it: an integer (exact at any size) or
// a string.
type keyArg struct{ v any }

func (k *keyArg) UnmarshalJSON(b []byte) error {
	var r Row
	if err := json.Unmarshal([]byte(`{"k":`+string(b)+`}`), &r); err != nil {
		return err
	}
	k.v = r["k"]
	return nil
}

func (k keyArg) MarshalJSON() ([]byte, error) { return json.Marshal(k.v) }

type (
	updateIn struct {
		Key keyArg `json:"key"`
		Set Row    `json:"set"`
	}
	deleteIn struct {
		Key keyArg `json:"key"`
	}
)

// register adds create, update and delete operations on tb, their names
// ending in suffix.
func (e *env) register(tb *Table, suffix string) {
	Create(e.g, &mcp.Tool{Name: "create" + suffix}, tb, func(_ context.Context, in Row) (Row, error) { return in, nil })
	Update(e.g, &mcp.Tool{Name: "update" + suffix}, tb, func(_ context.Context, in updateIn) (any, Row, error) { return in.Key.v, in.Set, nil })
	Delete(e.g, &mcp.Tool{Name: "delete" + suffix}, tb, func(_ context.Context, in deleteIn) (any, error) { return in.Key.v, nil })
}

// preview previews an operation and fails the test on an error.
func (e *env) preview(action string, in any) *changeset.PreviewResult {
	e.t.Helper()
	p, err := e.g.Preview(e.ctx, action, in)
	if err != nil {
		e.t.Fatalf("preview %s %v: %v", action, in, err)
	}
	return p
}

// refused previews an operation that must be refused with want in the
// message.
func (e *env) refused(action string, in any, want string) {
	e.t.Helper()
	_, err := e.g.Preview(e.ctx, action, in)
	if err == nil || !strings.Contains(err.Error(), want) {
		e.t.Fatalf("preview %s %v: %v, want a refusal with %q", action, in, err, want)
	}
}

// apply applies a preview and returns its result and undo token.
func (e *env) apply(p *changeset.PreviewResult) (Row, string) {
	e.t.Helper()
	res, err := e.g.Apply(e.ctx, p.ChangeID, p.ConfirmationToken)
	if err != nil {
		e.t.Fatalf("apply %s: %v", p.ChangeID, err)
	}
	var r Row
	if err := json.Unmarshal(res.Result, &r); err != nil {
		e.t.Fatal(err)
	}
	return r, res.UndoToken
}

// change previews and applies, returning the change's ID, result and undo
// token.
func (e *env) change(action string, in any) (string, Row, string) {
	e.t.Helper()
	p := e.preview(action, in)
	r, tok := e.apply(p)
	return p.ChangeID, r, tok
}

// record is the ledger's record of a change.
func (e *env) record(id string) *ledger.Change {
	e.t.Helper()
	c, err := e.g.Record(e.ctx, id)
	if err != nil {
		e.t.Fatal(err)
	}
	return c
}

// sql rewrites ? to $n on PostgreSQL.
func (e *env) sql(q string) string {
	if e.dialect != PostgreSQL {
		return q
	}
	var b strings.Builder
	n := 0
	for _, r := range q {
		if r == '?' {
			n++
			fmt.Fprintf(&b, "$%d", n)
			continue
		}
		b.WriteRune(r)
	}
	return b.String()
}

// exec runs a person's statement on the table's database.
func (e *env) exec(q string, args ...any) {
	e.t.Helper()
	if _, err := e.db.ExecContext(e.ctx, e.sql(q), args...); err != nil {
		e.t.Fatalf("%s: %v", q, err)
	}
}

// raw is every row of table as text, read with SQL of its own (every value
// cast to text, NULL shown as <null>), by id, without the columns named in
// leave.
func (e *env) raw(table string, leave ...string) string {
	e.t.Helper()
	rows, err := e.db.QueryContext(e.ctx, "SELECT * FROM "+table+" ORDER BY id")
	if err != nil {
		e.t.Fatal(err)
	}
	defer rows.Close()
	cols, _ := rows.Columns()
	var b bytes.Buffer
	for rows.Next() {
		vals := make([]sql.NullString, len(cols))
		ptrs := make([]any, len(cols))
		for i := range vals {
			ptrs[i] = &vals[i]
		}
		if err := rows.Scan(ptrs...); err != nil {
			e.t.Fatal(err)
		}
		for i, v := range vals {
			if slices.Contains(leave, cols[i]) {
				continue
			}
			s := "<null>"
			if v.Valid {
				s = strconv.Quote(v.String)
			}
			fmt.Fprintf(&b, "%s=%s ", cols[i], s)
		}
		b.WriteString("\n")
	}
	return b.String()
}

// get reads a row through the table.
func (e *env) get(key any) Row {
	e.t.Helper()
	r, err := e.table.Get(e.ctx, key)
	if err != nil {
		e.t.Fatal(err)
	}
	return r
}

func canonical(t *testing.T, v any) string {
	t.Helper()
	b, err := json.Marshal(v)
	if err != nil {
		t.Fatal(err)
	}
	return string(b)
}
