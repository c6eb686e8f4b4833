package sqltable

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"math/rand/v2"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"time"

	changeset "github.com/mcp-changeset/changeset-go"
)

// Dialect is the SQL spoken by a table's database: how identifiers are
// quoted, how parameters are written, how rows are locked and read.
type Dialect int

// The dialects sqltable speaks.
const (
	// Detect (the zero value) tells Open to pick the dialect from the
	// database's driver: modernc.org/sqlite or mattn/go-sqlite3 is SQLite,
	// pgx's stdlib or lib/pq is PostgreSQL.
	Detect Dialect = iota
	// SQLite: parameters ?, no row locks (a write transaction holds the
	// database), columns read as SQLite stores them.
	SQLite
	// PostgreSQL: parameters $1, $2…, rows locked with FOR UPDATE.
	PostgreSQL
)

func (d Dialect) String() string {
	switch d {
	case SQLite:
		return "SQLite"
	case PostgreSQL:
		return "PostgreSQL"
	}
	return "Detect"
}

// Config describes the table that Open opens.
type Config struct {
	// Table is the table's name, optionally with its schema
	// ("crm.contacts"). Required.
	Table string
	// Kind names one row for people and for resources: "contact" gives the
	// resource "contact:7" and the summary "Update contact 7". Default: the
	// table's name.
	Kind string
	// Key is the primary key: one column whose value names a row and never
	// changes. The database must accept explicit values for it (an
	// INTEGER PRIMARY KEY or a plain column, not GENERATED ALWAYS).
	// Default "id".
	Key string
	// Version, when set, is an integer column that every write bumps: the
	// adapter sets it to 1 on create and to one more on every update and
	// undo, and compares it before each write. Leave it empty to compare
	// the row's state (every column but the ignored ones and the stamp)
	// instead. Writers outside the adapter must bump it too, or their
	// edits go unnoticed by the apply's own check (the Guard's check of
	// the row's state still sees them). The version is not part of the
	// row's state (what Observe returns and diffs show): it is the
	// adapter's token, bumped by undos too, so a run's undo of two
	// changes to one row can undo both.
	Version string
	// Columns, when set, are the columns the adapter reads and writes
	// (they must include Key and Version). Default: every column of the
	// table. Columns left out are not part of a row: an undo of a delete
	// cannot restore them, and the database fills them with their default.
	Columns []string
	// NewKey returns the key of a row that a create inserts without one.
	// Default: RandomKey for an integer key column; for any other, a
	// create must give the key in its row. A key is chosen at preview, so that the preview
	// names the row it will create.
	NewKey func(ctx context.Context) (any, error)
	// Dialect overrides the detection from the driver.
	Dialect Dialect

	// Ignore names columns that do not count as anyone's work: an
	// updated_at, a position, a cache. They are left out of every diff and
	// of every state check, so that a person who only touches them neither
	// blocks an apply or an undo nor shows up as drift in a run's undo.
	// They are still read (Get, List, results) and a create may give them;
	// an update cannot set them (its preview would not show the write, and
	// its undo would not put it back), and an undo leaves them as they are,
	// except that the undo of a delete inserts the whole row as it was.
	// The key and the version cannot be ignored.
	Ignore []string
	// Stamp names a column that the adapter sets on every write it makes,
	// to StampValue's value: a create, an update (each row of an
	// UpdateMatching), and every undo, the re-insert of a deleted row
	// included (the row comes back with every other column as it was: it
	// is a write like any other, and a reader that follows the stamp, such
	// as a sync of the rows changed since a time, must see it). A stamped
	// column is ignored (see Ignore) and the caller cannot set it.
	Stamp string
	// StampValue is the value of the Stamp column on each write, called
	// once per write (one value for every row of one UpdateMatching).
	// Default: the current time in UTC as RFC 3339 text,
	// time.Now().UTC().Format(time.RFC3339Nano).
	StampValue func() any
	// Label names a column that names a row for people, such as a
	// product's name: summaries then read `Update product "Green tea"
	// (TEA-003)` instead of `Update product TEA-003`. A row whose label is
	// NULL is named by its key alone.
	Label string
	// MaxRows caps the rows one UpdateMatching change may update (default
	// 500, at most 1000, the Guard's limit of resources per change). A
	// preview that matches more is refused and asks for a narrower
	// condition. The proposal must also fit the Guard's
	// Options.MaxPayloadBytes (64 KiB by default: about 400 rows of
	// one changed column; raise it for more).
	MaxRows int
}

// DefaultMaxRows is Config.MaxRows when left zero; maxRowsLimit is the
// most it may be, the Guard's limit of resources per change.
const (
	DefaultMaxRows = 500
	maxRowsLimit   = 1000
)

// Table is one table of an application's database, opened by Open. Create,
// Update and Delete register guarded operations on it; Get and List read it.
type Table struct {
	db      *sql.DB
	dialect Dialect
	kind    string
	name    string   // quoted, schema-qualified
	cols    []column // in the order of the table (or of Config.Columns)
	key     string
	version string // "" for none
	// integerKey: the key column holds integers, so other keys are refused.
	integerKey bool
	newKey     func(ctx context.Context) (any, error)
	// selectList reads every column; byKey is " WHERE key = <param 1>".
	selectList, byKey string
	// skip holds the columns left out of a row's state: the ignored ones
	// and the stamp. ignored holds Config.Ignore alone.
	skip, ignored map[string]bool
	stamp         string // "" for none
	stampValue    func() any
	label         string // "" for none
	maxRows       int
	// beforeCheck, when set, runs inside every apply and undo right
	// before the row is read for the check, or before the write whose
	// WHERE is the check (tests make a person's edit there).
	beforeCheck func()
}

type column struct {
	name, dbType string
}

// ident is what a table or column name must look like: a plain SQL
// identifier, so that quoting it is all it takes to make it safe.
var ident = regexp.MustCompile(`^[A-Za-z_][A-Za-z0-9_]{0,62}$`)

// Open checks the table described by c in db and returns it. The table must
// exist: Open reads its columns, and refuses a name that is not a plain
// identifier (letters, digits, underscores) or names no column of the
// table.
func Open(ctx context.Context, db *sql.DB, c Config) (*Table, error) {
	if db == nil {
		return nil, errors.New("sqltable.Open: the database is nil")
	}
	d := c.Dialect
	if d == Detect {
		var err error
		if d, err = detect(db); err != nil {
			return nil, err
		}
	}
	t := &Table{db: db, dialect: d, kind: c.Kind, key: c.Key, version: c.Version, newKey: c.NewKey,
		stamp: c.Stamp, stampValue: c.StampValue, label: c.Label, maxRows: c.MaxRows}
	if t.key == "" {
		t.key = "id"
	}
	parts := strings.Split(c.Table, ".")
	if len(parts) > 2 {
		return nil, fmt.Errorf("sqltable.Open: table %q: want a name or schema.name", c.Table)
	}
	quoted := make([]string, len(parts))
	for i, p := range parts {
		if !ident.MatchString(p) {
			return nil, fmt.Errorf("sqltable.Open: table %q: %q is not a plain identifier (letters, digits and underscores, not starting with a digit)", c.Table, p)
		}
		quoted[i] = quote(p)
	}
	t.name = strings.Join(quoted, ".")
	if t.kind == "" {
		t.kind = parts[len(parts)-1]
	}
	all, err := t.discover(ctx)
	if err != nil {
		return nil, err
	}
	if err := t.pick(all, c.Columns); err != nil {
		return nil, err
	}
	if err := t.roles(c); err != nil {
		return nil, err
	}
	names := make([]string, len(t.cols))
	for i, col := range t.cols {
		names[i] = quote(col.name)
		if d == SQLite {
			// A unary plus hides the declared type from the driver, which
			// would otherwise parse DATETIME text into a time.Time and lose
			// the exact text stored; the value itself is unchanged.
			names[i] = "+" + names[i]
		}
	}
	t.selectList = strings.Join(names, ", ")
	for _, col := range t.cols {
		if col.name == t.key {
			t.integerKey = isInteger(d, col.dbType)
		}
	}
	if t.newKey == nil && t.integerKey {
		t.newKey = func(context.Context) (any, error) { return RandomKey(), nil }
	}
	if t.newKey == nil {
		t.newKey = func(context.Context) (any, error) {
			return nil, changeset.Refuse("a new %s needs its key (%s): this table makes none", t.kind, t.key)
		}
	}
	t.byKey = " WHERE " + quote(t.key) + " = " + t.param(1)
	return t, nil
}

// discover returns the table's columns with their declared types.
func (t *Table) discover(ctx context.Context) ([]column, error) {
	rows, err := t.db.QueryContext(ctx, "SELECT * FROM "+t.name+" WHERE 1 = 0")
	if err != nil {
		return nil, fmt.Errorf("sqltable.Open: read the columns of %s: %w", t.name, err)
	}
	defer rows.Close()
	types, err := rows.ColumnTypes()
	if err != nil {
		return nil, fmt.Errorf("sqltable.Open: read the columns of %s: %w", t.name, err)
	}
	cols := make([]column, len(types))
	for i, ct := range types {
		cols[i] = column{name: ct.Name(), dbType: strings.ToUpper(ct.DatabaseTypeName())}
	}
	return cols, rows.Err()
}

// pick keeps the columns named in want (all when empty) and checks Key and
// Version.
func (t *Table) pick(all []column, want []string) error {
	find := func(name string) (column, bool) {
		i := slices.IndexFunc(all, func(c column) bool { return c.name == name })
		if i < 0 {
			return column{}, false
		}
		return all[i], true
	}
	have := make([]string, len(all))
	for i, c := range all {
		have[i] = c.name
	}
	check := func(role, name string) error {
		if !ident.MatchString(name) {
			return fmt.Errorf("sqltable.Open: %s column %q of %s is not a plain identifier (letters, digits and underscores, not starting with a digit)", role, name, t.name)
		}
		if _, ok := find(name); !ok {
			return fmt.Errorf("sqltable.Open: %s has no column %q (it has %s)", t.name, name, strings.Join(have, ", "))
		}
		return nil
	}
	if len(want) == 0 {
		for _, c := range all {
			if !ident.MatchString(c.name) {
				return fmt.Errorf("sqltable.Open: column %q of %s is not a plain identifier; list the columns to use in Config.Columns", c.name, t.name)
			}
		}
		t.cols = all
	} else {
		for _, name := range want {
			if err := check("the", name); err != nil {
				return err
			}
			if slices.ContainsFunc(t.cols, func(c column) bool { return c.name == name }) {
				return fmt.Errorf("sqltable.Open: column %q is listed twice in Config.Columns", name)
			}
			c, _ := find(name)
			t.cols = append(t.cols, c)
		}
	}
	inCols := func(name string) bool {
		return slices.ContainsFunc(t.cols, func(c column) bool { return c.name == name })
	}
	if err := check("the key", t.key); err != nil {
		return err
	}
	if !inCols(t.key) {
		return fmt.Errorf("sqltable.Open: Config.Columns must include the key column %q", t.key)
	}
	if t.version != "" {
		if err := check("the version", t.version); err != nil {
			return err
		}
		if !inCols(t.version) {
			return fmt.Errorf("sqltable.Open: Config.Columns must include the version column %q", t.version)
		}
		if t.version == t.key {
			return fmt.Errorf("sqltable.Open: the version column cannot be the key")
		}
	}
	for _, c := range t.cols {
		if c.dbType == "BLOB" || c.dbType == "BYTEA" {
			return fmt.Errorf("sqltable.Open: column %q of %s holds binary data (%s), which sqltable does not carry; leave it out with Config.Columns", c.name, t.name, c.dbType)
		}
	}
	return nil
}

// roles checks the columns that Config.Ignore, Stamp and Label name, and
// MaxRows.
func (t *Table) roles(c Config) error {
	check := func(role, name string) error {
		if !t.has(name) {
			return fmt.Errorf("sqltable.Open: the %s column %q is not a column of %s that the adapter reads", role, name, t.name)
		}
		if name == t.key || name == t.version {
			return fmt.Errorf("sqltable.Open: the %s column %q is the key or the version, which always count", role, name)
		}
		return nil
	}
	t.skip, t.ignored = map[string]bool{}, map[string]bool{}
	if t.version != "" {
		// The version is the adapter's compare-and-set token, not anyone's
		// work: every undo bumps it, so a state holding it would never
		// read as the older change of a run left it.
		t.skip[t.version] = true
	}
	for _, name := range c.Ignore {
		if err := check("ignored", name); err != nil {
			return err
		}
		t.skip[name], t.ignored[name] = true, true
	}
	if t.stamp != "" {
		if err := check("stamp", t.stamp); err != nil {
			return err
		}
		t.skip[t.stamp] = true
		if t.stampValue == nil {
			t.stampValue = func() any { return time.Now().UTC().Format(time.RFC3339Nano) }
		}
	} else if t.stampValue != nil {
		return errors.New("sqltable.Open: Config.StampValue is set without Config.Stamp")
	}
	if t.label != "" && !t.has(t.label) {
		return fmt.Errorf("sqltable.Open: the label column %q is not a column of %s that the adapter reads", t.label, t.name)
	}
	switch {
	case t.maxRows == 0:
		t.maxRows = DefaultMaxRows
	case t.maxRows < 0 || t.maxRows > maxRowsLimit:
		return fmt.Errorf("sqltable.Open: Config.MaxRows is %d; want 1 to %d (the Guard's limit of resources per change)", t.maxRows, maxRowsLimit)
	}
	return nil
}

// isInteger reports whether a column of the declared type holds integers:
// SQLite's rule for INTEGER affinity, PostgreSQL's integer types.
func isInteger(d Dialect, dbType string) bool {
	if d == SQLite {
		return strings.Contains(dbType, "INT")
	}
	return dbType == "INT2" || dbType == "INT4" || dbType == "INT8"
}

// detect picks the dialect from the driver's type.
func detect(db *sql.DB) (Dialect, error) {
	switch name := fmt.Sprintf("%T", db.Driver()); name {
	case "*sqlite.Driver", "*sqlite3.SQLiteDriver":
		return SQLite, nil
	case "*stdlib.Driver", "*pq.Driver":
		return PostgreSQL, nil
	default:
		return Detect, fmt.Errorf("sqltable.Open: cannot tell the SQL dialect of the driver %s; set Config.Dialect", name)
	}
}

// RandomKey returns a random integer from 1 to 2^53-1: a key that a preview
// can name without writing anything (no sequence to reserve from), that
// JavaScript clients keep exact (2^53 is where their numbers stop counting
// integers), and that collides with one of a million existing rows about
// once in nine billion creates; a create that does collide is refused at
// preview ("already exists"), or by the apply's check.
func RandomKey() int64 { return rand.Int64N(1<<53-1) + 1 }

func quote(name string) string { return `"` + strings.ReplaceAll(name, `"`, `""`) + `"` }

// param is the n-th parameter (from 1) in the table's dialect.
func (t *Table) param(n int) string {
	if t.dialect == PostgreSQL {
		return "$" + strconv.Itoa(n)
	}
	return "?"
}

// querier is what both *sql.DB and *sql.Tx offer.
type querier interface {
	QueryContext(ctx context.Context, query string, args ...any) (*sql.Rows, error)
}

// Get returns the row whose key is key, or nil when there is none.
func (t *Table) Get(ctx context.Context, key any) (Row, error) {
	k, err := canonicalValue(t.key, key)
	if err != nil {
		return nil, err
	}
	return t.get(ctx, t.db, k, false)
}

// List returns every row, by key. It is meant for the small tables an
// agent edits row by row.
func (t *Table) List(ctx context.Context) ([]Row, error) {
	rows, err := t.db.QueryContext(ctx, "SELECT "+t.selectList+" FROM "+t.name+" ORDER BY "+quote(t.key))
	if err != nil {
		return nil, err
	}
	return t.scan(rows)
}

// get reads one row by its canonical key, locking it (PostgreSQL's FOR
// UPDATE) when lock is set.
func (t *Table) get(ctx context.Context, q querier, key any, lock bool) (Row, error) {
	query := "SELECT " + t.selectList + " FROM " + t.name + t.byKey
	if lock && t.beforeCheck != nil {
		t.beforeCheck()
	}
	if lock && t.dialect == PostgreSQL {
		query += " FOR UPDATE"
	}
	rows, err := q.QueryContext(ctx, query, key)
	if err != nil {
		return nil, err
	}
	return t.one(rows)
}

// one returns the only row of rows, or nil.
func (t *Table) one(rows *sql.Rows) (Row, error) {
	all, err := t.scan(rows)
	if err != nil || len(all) == 0 {
		return nil, err
	}
	if len(all) > 1 {
		return nil, fmt.Errorf("sqltable: %d rows of %s have one key; the key column %q must be unique", len(all), t.name, t.key)
	}
	return all[0], nil
}

// scan reads rows of t.cols into canonical rows, and closes them.
func (t *Table) scan(rows *sql.Rows) ([]Row, error) {
	defer rows.Close()
	out := []Row{}
	vals := make([]any, len(t.cols))
	ptrs := make([]any, len(t.cols))
	for i := range vals {
		ptrs[i] = &vals[i]
	}
	for rows.Next() {
		if err := rows.Scan(ptrs...); err != nil {
			return nil, err
		}
		r := make(Row, len(t.cols))
		for i, c := range t.cols {
			v, err := dbValue(t.dialect, c.name, c.dbType, vals[i])
			if err != nil {
				return nil, fmt.Errorf("sqltable: %s: %w", t.name, err)
			}
			r[c.name] = v
		}
		out = append(out, r)
	}
	return out, rows.Err()
}
