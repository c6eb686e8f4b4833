package postgres_test

import (
	"context"
	"database/sql"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"github.com/mcp-changeset/changeset-go/internal/pgtest"
	"github.com/mcp-changeset/changeset-go/ledger"
	"github.com/mcp-changeset/changeset-go/ledger/ledgertest"
	"github.com/mcp-changeset/changeset-go/ledger/postgres"
)

// oldLedger builds, in the public schema of db, a ledger exactly as the
// version of this package whose schema was version left it: its
// changeset_migrations table and the migration files up to version.
func oldLedger(t *testing.T, db *sql.DB, version int) {
	t.Helper()
	mustExec(t, db, `CREATE TABLE changeset_migrations (
		version    integer     NOT NULL PRIMARY KEY CHECK (version > 0),
		name       text        NOT NULL,
		applied_at timestamptz NOT NULL DEFAULT now()
	)`)
	files, err := filepath.Glob("migrations/*.sql")
	if err != nil || len(files) < version {
		t.Fatalf("migration files: %v, %v", files, err)
	}
	slices.Sort(files)
	for i, f := range files[:version] {
		text, err := os.ReadFile(f)
		if err != nil {
			t.Fatal(err)
		}
		mustExec(t, db, string(text))
		mustExec(t, db, `INSERT INTO changeset_migrations (version, name) VALUES ($1, $2)`, i+1, filepath.Base(f))
	}
}

// indexes lists the indexes of the public schema.
func indexes(t *testing.T, db *sql.DB) []string {
	t.Helper()
	var s string
	err := db.QueryRow(`SELECT string_agg(indexname, ' ' ORDER BY indexname) FROM pg_indexes WHERE schemaname = 'public'`).Scan(&s)
	if err != nil {
		t.Fatal(err)
	}
	return strings.Fields(s)
}

func TestMigrate_UpgradesAVersion2LedgerKeepingItsRows(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	dsn := pgtest.DSN(t)
	db := rawDB(t, dsn)
	oldLedger(t, db, 2)
	mustExec(t, db, `INSERT INTO runs (id, label, scope_hash, status, created_at, updated_at) VALUES ('run_old', 'old run', 's', 'open', 1000, 2000)`)
	mustExec(t, db, `INSERT INTO changes (id, action, status, scope_hash, run_id, payload, summary, error_type, error, created_at, updated_at, redact_fields)
		VALUES ('chg_old', 'set', 'apply_failed', 's', 'run_old', '{"k":"v"}', 'old change', 'E', 'boom', 1000, 3000, '["k"]')`)

	b := open(t, dsn, ledger.OpenOptions{})
	var versions string
	if err := db.QueryRow(`SELECT string_agg(version::text, ' ' ORDER BY version) FROM changeset_migrations`).Scan(&versions); err != nil || versions != postgres.RecordedVersions() {
		t.Fatalf("versions after the upgrade: %q, %v", versions, err)
	}
	ledgertest.CheckUpgradedV1(t, b)
	got := indexes(t, db)
	for _, want := range []string{"runs_session", "changes_scope_status", "changes_run_created_id", "change_deps_resource", "change_deps_pkey",
		"changes_text", "changes_action", "changes_previewed_by", "changes_applied_by", "changes_undone_by", "changes_status_created"} {
		if !slices.Contains(got, want) {
			t.Errorf("index %s missing after the upgrade: %v", want, got)
		}
	}
	// The trigram index holds the rows the upgrade found.
	if found, err := b.ListChanges(ctx, b.DB(), ledger.ChangeFilter{Text: "OLD CHANGE", Limit: 10}); err != nil || len(found) != 1 || found[0].ID != "chg_old" {
		t.Errorf("a search after the upgrade found %v (%v), want chg_old", found, err)
	}
	if slices.Contains(got, "changes_run_created") {
		t.Errorf("the index that changes_run_created_id replaces is still there: %v", got)
	}
	if problems, err := b.Check(ctx); err != nil || len(problems) != 0 {
		t.Errorf("Check after the upgrade = %q, %v", problems, err)
	}
	// Constraints of the new columns hold on the upgraded ledger.
	for _, bad := range []string{
		`UPDATE changes SET failure = 'bogus' WHERE id = 'chg_old'`,
		`UPDATE runs SET kind = 'bogus' WHERE id = 'run_old'`,
	} {
		if _, err := db.Exec(bad); err == nil {
			t.Errorf("%s was accepted", bad)
		}
	}
}

// TestMigrate_ChainsTheHistoryItFinds opens a ledger of schema 12, the
// last before the hash chain, holding history entries with a gap where a
// prune deleted some: the upgrade chains every one of them, and drops the
// history's foreign keys (a prune now deletes entries itself).
func TestMigrate_ChainsTheHistoryItFinds(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	dsn := pgtest.DSN(t)
	db := rawDB(t, dsn)
	oldLedger(t, db, 12)
	mustExec(t, db, `INSERT INTO changes (id, action, status, scope_hash, payload, summary, created_at, updated_at, expires_at)
		VALUES ('chg_old', 'set', 'expired', 's', '{"k":"v"}', 'old change', 1000, 3000, 2000)`)
	mustExec(t, db, `INSERT INTO ledger_history (seq, at, change_id, from_status, to_status, actor, note) VALUES
		(3, 1000, 'chg_old', '', 'pending', 'agent:a', ''),
		(7, 3000, 'chg_old', 'pending', 'expired', '', ''),
		(9, 4000, NULL, '', 'pruned', 'operator:dan', 'pruned up to 2 changes')`)
	l, err := ledger.Open(ctx, dsn, ledger.OpenOptions{})
	if err != nil {
		t.Fatal(err)
	}
	defer l.Close()
	var keys int
	if err := db.QueryRow(`SELECT count(*) FROM pg_constraint WHERE conrelid = 'ledger_history'::regclass AND contype = 'f'`).Scan(&keys); err != nil || keys != 0 {
		t.Errorf("ledger_history keeps %d foreign keys (%v), want none", keys, err)
	}
	ledgertest.CheckChainedAfterUpgrade(t, l, 3)
}
