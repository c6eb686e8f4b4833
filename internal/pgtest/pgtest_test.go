package pgtest_test

import (
	"context"
	"database/sql"
	"os"
	"testing"

	"github.com/mcp-changeset/changeset-go/internal/pgtest"
)

func TestMain(m *testing.M) {
	code := m.Run()
	pgtest.Stop()
	os.Exit(code)
}

func TestDSN_EachTestGetsAnEmptyDatabaseOfItsOwn(t *testing.T) {
	ctx := context.Background()
	seen := map[string]bool{}
	for range 3 {
		dsn := pgtest.DSN(t)
		db, err := sql.Open("pgx", dsn)
		if err != nil {
			t.Fatal(err)
		}
		defer db.Close()
		var name string
		var tables int
		if err := db.QueryRowContext(ctx, `SELECT current_database(),
			(SELECT count(*) FROM pg_tables WHERE schemaname = 'public')`).Scan(&name, &tables); err != nil {
			t.Fatal(err)
		}
		if seen[name] || tables != 0 {
			t.Errorf("database %s: seen before %v, %d tables", name, seen[name], tables)
		}
		seen[name] = true
		if _, err := db.ExecContext(ctx, `CREATE TABLE t (x int)`); err != nil {
			t.Fatal(err)
		}
	}
}

func TestDSN_ServerEncodingIsUTF8(t *testing.T) {
	db, err := sql.Open("pgx", pgtest.DSN(t))
	if err != nil {
		t.Fatal(err)
	}
	defer db.Close()
	var enc string
	if err := db.QueryRow(`SHOW server_encoding`).Scan(&enc); err != nil || enc != "UTF8" {
		t.Errorf("server_encoding = %q, %v", enc, err)
	}
}
