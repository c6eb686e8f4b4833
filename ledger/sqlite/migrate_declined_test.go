package sqlite

import (
	"context"
	"database/sql"
	"path/filepath"
	"strings"
	"testing"

	"github.com/mcp-changeset/changeset-go/ledger"
)

// schemaText lists every object of the database's schema with its SQL,
// one a line, by name.
func schemaText(t *testing.T, b *Backend) string {
	t.Helper()
	rows, err := b.DB().Query(`SELECT type, name, tbl_name, coalesce(sql, '') FROM sqlite_schema ORDER BY name`)
	if err != nil {
		t.Fatal(err)
	}
	defer rows.Close()
	var out []string
	for rows.Next() {
		var typ, name, table, text string
		if err := rows.Scan(&typ, &name, &table, &text); err != nil {
			t.Fatal(err)
		}
		out = append(out, typ+" "+name+" on "+table+": "+text)
	}
	if err := rows.Err(); err != nil {
		t.Fatal(err)
	}
	return strings.Join(out, "\n")
}

// TestMigrate_Version10LedgerLearnsDeclined upgrades a ledger of schema
// version 10, with rows, to the current schema: its schema is then exactly
// a fresh ledger's, SQLite's integrity check passes, and every connection
// of the pool, not only the one that migrated, accepts the new status.
func TestMigrate_Version10LedgerLearnsDeclined(t *testing.T) {
	path := oldLedger(t, 10,
		`INSERT INTO runs (id, label, scope_hash, status, created_at, updated_at) VALUES ('run_old', 'old run', 's', 'open', 1000, 2000)`,
		`INSERT INTO changes (id, action, status, scope_hash, run_id, payload, summary, created_at, updated_at, expires_at, applied_at, depends_on)
		 VALUES ('chg_old', 'set', 'applied', 's', 'run_old', '{"k":"v"}', 'old change', 1000, 3000, 9000, 3000, '["rule:1"]')`,
		`INSERT INTO changes (id, action, status, scope_hash, payload, summary, created_at, updated_at, expires_at)
		 VALUES ('chg_pending', 'set', 'pending', 's', '{"k":"w"}', 'pending change', 1000, 1000, 9000)`,
		`INSERT INTO ledger_history (at, change_id, run_id, from_status, to_status, actor, note) VALUES (1000, 'chg_old', 'run_old', '', 'pending', 'agent:a', '')`,
	)
	ctx := context.Background()
	b, err := Open(ctx, path, ledger.OpenOptions{BusyTimeout: ledger.DefaultBusyTimeout})
	if err != nil {
		t.Fatal(err)
	}
	defer b.Close()
	fresh, err := Open(ctx, filepath.Join(t.TempDir(), "fresh.db"), ledger.OpenOptions{Create: true, BusyTimeout: ledger.DefaultBusyTimeout})
	if err != nil {
		t.Fatal(err)
	}
	defer fresh.Close()
	if got, want := schemaText(t, b), schemaText(t, fresh); got != want {
		t.Errorf("the upgraded schema differs from a fresh one:\n got %s\nwant %s", got, want)
	}
	if !strings.Contains(schemaText(t, b), statusesAfter13) {
		t.Error("the changes table does not list 'declined'")
	}
	if problems, err := b.Check(ctx); err != nil || len(problems) != 0 {
		t.Fatalf("Check after the upgrade: %q, %v", problems, err)
	}
	// Several connections at once, each made to write the new status.
	var conns []interface{ Close() error }
	defer func() {
		for _, c := range conns {
			c.Close()
		}
	}()
	for i := range 4 {
		conn, err := b.DB().Conn(ctx)
		if err != nil {
			t.Fatal(err)
		}
		conns = append(conns, conn)
		if _, err := conn.ExecContext(ctx, `UPDATE changes SET status = 'declined' WHERE id = 'chg_pending'`); err != nil {
			t.Fatalf("connection %d refuses the status declined: %v", i, err)
		}
		if _, err := conn.ExecContext(ctx, `UPDATE changes SET status = 'bogus' WHERE id = 'chg_pending'`); err == nil {
			t.Fatalf("connection %d accepts an unknown status", i)
		}
	}
	c, err := b.GetChange(ctx, b.DB(), "chg_old")
	if err != nil || c.Status != ledger.Applied || len(c.DependsOn) != 1 {
		t.Fatalf("the old change after the upgrade: %+v, %v", c, err)
	}
	h, err := b.ListHistory(ctx, b.DB(), ledger.HistoryFilter{ChangeID: "chg_old"})
	if err != nil || len(h) != 1 || h[0].ApprovalID != "" {
		t.Fatalf("the old change's history after the upgrade: %+v, %v", h, err)
	}
}

// TestMigrate_DeclinedRefusesAChangesTableItDidNotWrite opens a version 12
// ledger whose changes table's text is not the one this package wrote
// (here, spaced otherwise): the upgrade is refused and rolled back whole,
// leaving the ledger at version 12.
func TestMigrate_DeclinedRefusesAChangesTableItDidNotWrite(t *testing.T) {
	path := oldLedger(t, 12,
		`PRAGMA writable_schema = ON`,
		`UPDATE sqlite_schema SET sql = replace(sql, '''undone'', ''undo_failed''))', '''undone'',''undo_failed''))') WHERE name = 'changes'`,
		`PRAGMA writable_schema = OFF`,
	)
	_, err := Open(context.Background(), path, ledger.OpenOptions{BusyTimeout: ledger.DefaultBusyTimeout})
	if err == nil || !strings.Contains(err.Error(), "013_declined.sql") || !strings.Contains(err.Error(), "not the one this program wrote") {
		t.Fatalf("open of a ledger with a changes table of another text: %v", err)
	}
	var version int
	db, err := sql.Open("sqlite", "file:"+path)
	if err != nil {
		t.Fatal(err)
	}
	defer db.Close()
	if err := db.QueryRow(`PRAGMA user_version`).Scan(&version); err != nil || version != 12 {
		t.Fatalf("user_version after the refused upgrade = %d (%v), want 12", version, err)
	}
	var n int
	if err := db.QueryRow(`SELECT count(*) FROM sqlite_schema WHERE name = 'ledger_outbox'`).Scan(&n); err != nil || n != 0 {
		t.Fatalf("the refused upgrade left a later migration's table (%d, %v)", n, err)
	}
}
