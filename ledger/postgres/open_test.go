package postgres_test

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"net/url"
	"strings"
	"sync"
	"testing"

	"github.com/mcp-changeset/changeset-go/internal/pgtest"
	"github.com/mcp-changeset/changeset-go/ledger"
	"github.com/mcp-changeset/changeset-go/ledger/driver"
	"github.com/mcp-changeset/changeset-go/ledger/postgres"
)

// withParam returns dsn with the query parameter key set to value.
func withParam(t testing.TB, dsn, key, value string) string {
	t.Helper()
	u, err := url.Parse(dsn)
	if err != nil {
		t.Fatal(err)
	}
	q := u.Query()
	q.Set(key, value)
	u.RawQuery = q.Encode()
	return u.String()
}

// open opens the ledger at dsn and closes it when t ends.
func open(t testing.TB, dsn string, opts ledger.OpenOptions) *postgres.Backend {
	t.Helper()
	b, err := postgres.Open(context.Background(), dsn, opts)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { b.Close() })
	return b
}

// rawDB connects to dsn without the ledger, to look or to meddle.
func rawDB(t testing.TB, dsn string) *sql.DB {
	t.Helper()
	db, err := sql.Open("pgx", dsn)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { db.Close() })
	return db
}

func mustExec(t testing.TB, db *sql.DB, query string, args ...any) {
	t.Helper()
	if _, err := db.Exec(query, args...); err != nil {
		t.Fatalf("%s: %v", query, err)
	}
}

// tables lists the tables of schema.
func tables(t testing.TB, db *sql.DB, schema string) string {
	t.Helper()
	var s string
	err := db.QueryRow(`SELECT coalesce(string_agg(tablename, ' ' ORDER BY tablename), '') FROM pg_tables WHERE schemaname = $1`, schema).Scan(&s)
	if err != nil {
		t.Fatal(err)
	}
	return s
}

func TestOpen_CreatesOnlyWhenAsked(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	dsn := pgtest.DSN(t)
	db := rawDB(t, dsn)
	for _, opts := range []ledger.OpenOptions{{}, {ReadOnly: true}, {ReadOnly: true, Create: true}} {
		_, err := postgres.Open(ctx, dsn, opts)
		if !errors.Is(err, ledger.ErrNotExist) {
			t.Errorf("Open(%+v) of an empty database = %v, want ErrNotExist", opts, err)
		}
	}
	_, err := postgres.Open(ctx, withParam(t, dsn, "changeset_schema", "absent"), ledger.OpenOptions{})
	if !errors.Is(err, ledger.ErrNotExist) {
		t.Errorf("Open of a missing schema = %v, want ErrNotExist", err)
	}
	var schemas int
	db.QueryRow(`SELECT count(*) FROM pg_namespace WHERE nspname = 'absent'`).Scan(&schemas)
	if got := tables(t, db, "public"); got != "" || schemas != 0 {
		t.Errorf("refused opens created tables %q or schemas (%d)", got, schemas)
	}
	b := open(t, dsn, ledger.OpenOptions{Create: true})
	if got := tables(t, db, "public"); got != "change_deps changes changeset_migrations ledger_approvals ledger_chain_head ledger_decisions ledger_history ledger_history_pruned ledger_outbox meta runs" {
		t.Errorf("tables of a new ledger: %q", got)
	}
	if b.Schema() != "public" {
		t.Errorf("Schema() = %q", b.Schema())
	}
	var versions string
	if err := db.QueryRow(`SELECT string_agg(version || ':' || name, ' ' ORDER BY version) FROM changeset_migrations`).Scan(&versions); err != nil ||
		versions != "1:001_initial.sql 2:002_redaction.sql 3:003_failures_deps_sessions.sql 4:004_history.sql 5:005_prune_entries.sql 6:006_undo_found.sql 7:007_resources.sql 8:008_flat_lists.sql "+
			"9:009_approvals.sql 10:010_declined.sql 11:011_outbox.sql 12:012_run_started_by.sql 13:013_history_chain.sql" {
		t.Errorf("changeset_migrations: %q %v", versions, err)
	}
	// Opened again, with or without create, it is used as it is.
	open(t, dsn, ledger.OpenOptions{})
	open(t, dsn, ledger.OpenOptions{Create: true})
	open(t, dsn, ledger.OpenOptions{ReadOnly: true})
}

func TestOpen_RefusesForeignTables(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	dsn := pgtest.DSN(t)
	db := rawDB(t, dsn)
	mustExec(t, db, `CREATE SCHEMA clash`)
	mustExec(t, db, `CREATE TABLE clash.changes (id int)`)
	mustExec(t, db, `CREATE SCHEMA other`)
	mustExec(t, db, `CREATE TABLE other.invoices (id int)`)

	clash := withParam(t, dsn, "changeset_schema", "clash")
	for _, opts := range []ledger.OpenOptions{{}, {Create: true}} {
		if _, err := postgres.Open(ctx, clash, opts); !errors.Is(err, ledger.ErrForeign) || !strings.Contains(err.Error(), "clash") {
			t.Errorf("Open(%+v) of a schema with someone's changes table = %v, want ErrForeign naming the schema", opts, err)
		}
	}
	if got := tables(t, db, "clash"); got != "changes" {
		t.Errorf("the foreign schema was changed: %q", got)
	}
	other := withParam(t, dsn, "changeset_schema", "other")
	if _, err := postgres.Open(ctx, other, ledger.OpenOptions{}); !errors.Is(err, ledger.ErrForeign) {
		t.Errorf("Open without create of a schema with other tables = %v, want ErrForeign", err)
	}
	// Asked to create, the ledger goes beside the application's tables.
	open(t, other, ledger.OpenOptions{Create: true})
	if got := tables(t, db, "other"); got != "change_deps changes changeset_migrations invoices ledger_approvals ledger_chain_head ledger_decisions ledger_history ledger_history_pruned ledger_outbox meta runs" {
		t.Errorf("tables: %q", got)
	}
}

func TestOpen_RefusesNewerAndDamagedSchemas(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	dsn := pgtest.DSN(t)
	db := rawDB(t, dsn)
	open(t, dsn, ledger.OpenOptions{Create: true}).Close()
	future := postgres.SchemaVersion + 1
	mustExec(t, db, `INSERT INTO changeset_migrations (version, name) VALUES ($1, 'future.sql')`, future)
	for _, opts := range []ledger.OpenOptions{{}, {Create: true}, {ReadOnly: true}} {
		_, err := postgres.Open(ctx, dsn, opts)
		if !errors.Is(err, ledger.ErrNewerSchema) || !strings.Contains(err.Error(), fmt.Sprintf("version %d", future)) {
			t.Errorf("Open(%+v) of a newer ledger = %v, want ErrNewerSchema naming the version", opts, err)
		}
	}
	mustExec(t, db, `DELETE FROM changeset_migrations`)
	if _, err := postgres.Open(ctx, dsn, ledger.OpenOptions{Create: true}); !errors.Is(err, ledger.ErrCorrupt) {
		t.Errorf("Open with an empty changeset_migrations = %v, want ErrCorrupt", err)
	}
}

func TestOpen_SchemasKeepLedgersApart(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	dsn := pgtest.DSN(t)
	a := open(t, withParam(t, dsn, "changeset_schema", "server_a"), ledger.OpenOptions{Create: true})
	b := open(t, withParam(t, dsn, "changeset_schema", "server_b"), ledger.OpenOptions{Create: true})
	pub := open(t, dsn, ledger.OpenOptions{Create: true})
	c := &ledger.Change{ID: "chg_1", Action: "a", Status: ledger.Pending, CreatedAt: t0, UpdatedAt: t0}
	if err := a.InsertChange(ctx, a.DB(), c); err != nil {
		t.Fatal(err)
	}
	for _, other := range []*postgres.Backend{b, pub} {
		if _, err := other.GetChange(ctx, other.DB(), "chg_1"); !errors.Is(err, ledger.ErrNotFound) {
			t.Errorf("schema %s sees schema server_a's change: %v", other.Schema(), err)
		}
	}
	if err := b.InsertChange(ctx, b.DB(), c); err != nil {
		t.Errorf("the same ID in another schema: %v", err)
	}
	// The application's own tables land beside the ledger's.
	if _, err := a.DB().ExecContext(ctx, `CREATE TABLE tickets (id int)`); err != nil {
		t.Fatal(err)
	}
	if got := tables(t, rawDB(t, dsn), "server_a"); got != "change_deps changes changeset_migrations ledger_approvals ledger_chain_head ledger_decisions ledger_history ledger_history_pruned ledger_outbox meta runs tickets" {
		t.Errorf("tables of server_a: %q", got)
	}
	if !strings.Contains(a.Location(), "changeset_schema=server_a") {
		t.Errorf("Location() = %q does not name the schema", a.Location())
	}
}

func TestOpen_ReplicasStartingTogetherMigrateOnce(t *testing.T) {
	t.Parallel()
	base := pgtest.DSN(t)
	dsn := withParam(t, base, "changeset_schema", "shared")
	var wg sync.WaitGroup
	for range 8 {
		wg.Go(func() {
			b, err := postgres.Open(context.Background(), dsn, ledger.OpenOptions{Create: true})
			if err != nil {
				t.Error(err)
				return
			}
			b.Close()
		})
	}
	wg.Wait()
	var n int
	if err := rawDB(t, base).QueryRow(`SELECT count(*) FROM shared.changeset_migrations`).Scan(&n); err != nil || n != len(strings.Fields(postgres.RecordedVersions())) {
		t.Errorf("%d migrations recorded (%v), want %d", n, err, len(strings.Fields(postgres.RecordedVersions())))
	}
}

func TestOpen_ReadOnlyWritesNothing(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	dsn := pgtest.DSN(t)
	w := open(t, dsn, ledger.OpenOptions{Create: true})
	c := &ledger.Change{ID: "chg_1", Action: "a", Status: ledger.Pending, CreatedAt: t0, UpdatedAt: t0}
	if err := w.InsertChange(ctx, w.DB(), c); err != nil {
		t.Fatal(err)
	}
	r := open(t, dsn, ledger.OpenOptions{ReadOnly: true})
	if _, err := r.GetChange(ctx, r.DB(), "chg_1"); err != nil {
		t.Error(err)
	}
	if problems, err := r.Check(ctx); err != nil || len(problems) != 0 {
		t.Errorf("Check = %q, %v", problems, err)
	}
	if _, err := r.BeginWrite(ctx); !errors.Is(err, ledger.ErrReadOnly) {
		t.Errorf("BeginWrite = %v, want ErrReadOnly", err)
	}
	c.ID = "chg_2"
	if err := r.InsertChange(ctx, r.DB(), c); !errors.Is(err, ledger.ErrReadOnly) {
		t.Errorf("InsertChange = %v, want ErrReadOnly", err)
	}
	if _, _, err := r.DeleteRuns(ctx, r.DB(), []string{"run_1"}); !errors.Is(err, ledger.ErrReadOnly) {
		t.Errorf("DeleteRuns = %v, want ErrReadOnly", err)
	}
}

func TestOpen_RefusesADatabaseThatIsNotUTF8(t *testing.T) {
	t.Parallel()
	dsn := pgtest.DSN(t)
	db := rawDB(t, dsn)
	if _, err := db.Exec(`CREATE DATABASE ascii_db ENCODING 'SQL_ASCII' LC_COLLATE 'C' LC_CTYPE 'C' TEMPLATE template0`); err != nil {
		t.Skipf("cannot create a SQL_ASCII database here: %v", err)
	}
	t.Cleanup(func() { db.Exec(`DROP DATABASE ascii_db WITH (FORCE)`) })
	u, _ := url.Parse(dsn)
	u.Path = "/ascii_db"
	_, err := postgres.Open(context.Background(), u.String(), ledger.OpenOptions{Create: true})
	if err == nil || !strings.Contains(err.Error(), "SQL_ASCII") || !strings.Contains(err.Error(), "UTF8") {
		t.Errorf("Open of a SQL_ASCII database = %v, want a refusal naming both encodings", err)
	}
}

func TestOpen_RegisteredForPostgresURLs(t *testing.T) {
	t.Parallel()
	dsn := pgtest.DSN(t)
	for _, scheme := range []string{"postgres", "postgresql"} {
		target := scheme + strings.TrimPrefix(dsn, "postgres")
		l, err := ledger.Open(context.Background(), target, ledger.OpenOptions{Create: true})
		if err != nil {
			t.Fatalf("%s: %v", scheme, err)
		}
		if _, ok := driver.BackendOf(l).(*postgres.Backend); !ok {
			t.Errorf("%s: backend is %T", scheme, driver.BackendOf(l))
		}
		l.Close()
	}
}

func TestOpen_PasswordNeverShows(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	dsn := pgtest.DSN(t)
	u, _ := url.Parse(dsn)
	u.User = url.UserPassword(u.User.Username(), "s3cret-pw")
	q := u.Query()
	q.Set("sslpassword", "s3cret-pw")
	u.RawQuery = q.Encode()
	b := open(t, u.String(), ledger.OpenOptions{Create: true}) // trust authentication ignores it
	if strings.Contains(b.Location(), "s3cret") || strings.Contains(b.Location(), "postgres@") {
		t.Errorf("Location() = %q shows credentials", b.Location())
	}
	_, err := b.GetChange(ctx, b.DB(), "chg_none")
	if err == nil || strings.Contains(err.Error(), "s3cret") {
		t.Errorf("error %v", err)
	}
	// A server that cannot be reached: the connection error names the
	// host, never the password.
	u.Host = "127.0.0.1:1"
	_, err = postgres.Open(ctx, u.String(), ledger.OpenOptions{Create: true})
	if err == nil || strings.Contains(err.Error(), "s3cret") {
		t.Errorf("Open of an unreachable server = %v", err)
	}
}

func TestOpen_UpgradesAnOlderLedgerOnce(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	dsn := pgtest.DSN(t)
	db := rawDB(t, dsn)
	// A ledger as version 1 of this package left it, with a row in it.
	oldLedger(t, db, 1)
	mustExec(t, db, `INSERT INTO changes (id, action, status, payload, created_at, updated_at) VALUES ('chg_old', 'a', 'pending', '{"k":1}', 1, 1)`)

	if _, err := postgres.Open(ctx, dsn, ledger.OpenOptions{ReadOnly: true}); !errors.Is(err, ledger.ErrReadOnly) {
		t.Errorf("read-only Open of an older ledger = %v, want ErrReadOnly (it cannot upgrade)", err)
	}
	// Replicas of the new version start together: one upgrades.
	var wg sync.WaitGroup
	for range 4 {
		wg.Go(func() {
			b, err := postgres.Open(ctx, dsn, ledger.OpenOptions{})
			if err != nil {
				t.Error(err)
				return
			}
			b.Close()
		})
	}
	wg.Wait()
	var versions string
	if err := db.QueryRow(`SELECT string_agg(version::text, ' ' ORDER BY version) FROM changeset_migrations`).Scan(&versions); err != nil || versions != postgres.RecordedVersions() {
		t.Errorf("versions after the upgrade: %q, %v", versions, err)
	}
	b := open(t, dsn, ledger.OpenOptions{})
	c, err := b.GetChange(ctx, b.DB(), "chg_old")
	if err != nil || string(c.Payload) != `{"k":1}` || c.RedactFields != nil || !c.RedactedAt.IsZero() {
		t.Fatalf("the old row after the upgrade: %+v, %v", c, err)
	}
	c.RedactFields, c.RedactedAt = []string{"k"}, t0
	if err := b.UpdateChange(ctx, b.DB(), c, ledger.Pending); err != nil {
		t.Fatal(err)
	}
	if problems, err := b.Check(ctx); err != nil || len(problems) != 0 {
		t.Errorf("Check after the upgrade = %q, %v", problems, err)
	}
}
