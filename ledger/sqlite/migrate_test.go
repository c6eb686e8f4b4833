package sqlite

import (
	"context"
	"database/sql"
	"fmt"
	"path/filepath"
	"testing"

	"github.com/mcp-changeset/changeset-go/ledger"
)

// TestMigrate_UpgradesAVersion1LedgerInPlaceKeepingItsRows builds a ledger
// exactly as version 1 of this package left it, with rows, and opens it
// with the current code.
func TestMigrate_UpgradesAVersion1LedgerInPlaceKeepingItsRows(t *testing.T) {
	path := filepath.Join(t.TempDir(), "v1.db")
	db, err := sql.Open("sqlite", "file:"+path)
	if err != nil {
		t.Fatal(err)
	}
	stmts := []string{
		migrations[0].SQL,
		fmt.Sprintf("PRAGMA application_id = %d", ApplicationID),
		"PRAGMA user_version = 1",
		`INSERT INTO runs (id, label, scope_hash, status, created_at, updated_at) VALUES ('run_00000000000000000001', 'old run', 's', 'open', 1000, 2000)`,
		`INSERT INTO changes (id, action, status, scope_hash, run_id, payload, payload_hash, diff, summary, applied_at, created_at, updated_at, expires_at)
		 VALUES ('chg_00000000000000000001', 'set', 'applied', 's', 'run_00000000000000000001', '{"k":"v"}', 'h', '[]', 'old change', 3000, 1000, 3000, 9000)`,
	}
	for _, s := range stmts {
		if _, err := db.Exec(s); err != nil {
			t.Fatalf("%s: %v", s, err)
		}
	}
	db.Close()

	b, err := Open(context.Background(), path, ledger.OpenOptions{BusyTimeout: ledger.DefaultBusyTimeout})
	if err != nil {
		t.Fatalf("open a version 1 ledger: %v", err)
	}
	defer b.Close()
	var version int
	if err := b.DB().QueryRow("PRAGMA user_version").Scan(&version); err != nil || version != SchemaVersion {
		t.Fatalf("user_version = %d (%v), want %d", version, err, SchemaVersion)
	}
	ctx := context.Background()
	c, err := b.GetChange(ctx, b.DB(), "chg_00000000000000000001")
	if err != nil {
		t.Fatal(err)
	}
	if c.Status != ledger.Applied || c.Summary != "old change" || string(c.Payload) != `{"k":"v"}` || c.RunID != "run_00000000000000000001" ||
		c.AppliedAt.UnixMicro() != 3000 || c.RedactFields != nil || !c.RedactedAt.IsZero() {
		t.Fatalf("row after upgrade: %+v", c)
	}
	r, err := b.GetRun(ctx, b.DB(), "run_00000000000000000001")
	if err != nil || r.Label != "old run" {
		t.Fatalf("run after upgrade: %+v %v", r, err)
	}
	// The new columns work.
	c.RedactFields = []string{"k"}
	if err := b.UpdateChange(ctx, b.DB(), c, ledger.Applied); err != nil {
		t.Fatal(err)
	}
	if c2, _ := b.GetChange(ctx, b.DB(), c.ID); len(c2.RedactFields) != 1 {
		t.Fatalf("redact_fields not stored: %+v", c2)
	}
	if problems, err := b.Check(ctx); err != nil || len(problems) != 0 {
		t.Fatalf("check after upgrade: %v %v", problems, err)
	}
}

func TestMigrate_ReadOnlyOpenOfAnOlderLedgerIsRefusedUnchanged(t *testing.T) {
	path := filepath.Join(t.TempDir(), "v1.db")
	db, _ := sql.Open("sqlite", "file:"+path)
	for _, s := range []string{migrations[0].SQL, fmt.Sprintf("PRAGMA application_id = %d", ApplicationID), "PRAGMA user_version = 1"} {
		if _, err := db.Exec(s); err != nil {
			t.Fatal(err)
		}
	}
	db.Close()
	before := readFile(t, path)
	if _, err := Open(context.Background(), path, ledger.OpenOptions{ReadOnly: true, BusyTimeout: ledger.DefaultBusyTimeout}); err == nil {
		t.Fatal("a read-only open upgraded or accepted an old schema")
	}
	if string(readFile(t, path)) != string(before) {
		t.Fatal("the file changed")
	}
}
