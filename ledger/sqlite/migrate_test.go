package sqlite

import (
	"context"
	"database/sql"
	"fmt"
	"path/filepath"
	"testing"
	"time"

	"github.com/mcp-changeset/changeset-go/ledger"
	"github.com/mcp-changeset/changeset-go/ledger/ledgertest"
)

// TestMigrate_UpgradesAVersion1LedgerInPlaceKeepingItsRows builds a ledger
// exactly as version 1 of this package left it, with rows, and opens it
// with the current code.
func TestMigrate_UpgradesAVersion1LedgerInPlaceKeepingItsRows(t *testing.T) {
	path := oldLedger(t, 1,
		`INSERT INTO runs (id, label, scope_hash, status, created_at, updated_at) VALUES ('run_00000000000000000001', 'old run', 's', 'open', 1000, 2000)`,
		`INSERT INTO changes (id, action, status, scope_hash, run_id, payload, payload_hash, diff, summary, applied_at, created_at, updated_at, expires_at)
		 VALUES ('chg_00000000000000000001', 'set', 'applied', 's', 'run_00000000000000000001', '{"k":"v"}', 'h', '[]', 'old change', 3000, 1000, 3000, 9000)`,
	)

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

// TestMigrate_UpgradesAVersion2LedgerInPlaceKeepingItsRows builds a ledger
// as version 2 of this package left it and opens it with the current code:
// old rows read back with the new fields' defaults (a run is a task run),
// and the new columns, side table, trigger and indexes are there.
func TestMigrate_UpgradesAVersion2LedgerInPlaceKeepingItsRows(t *testing.T) {
	path := oldLedger(t, 2,
		`INSERT INTO runs (id, label, scope_hash, status, created_at, updated_at) VALUES ('run_old', 'old run', 's', 'open', 1000, 2000)`,
		`INSERT INTO changes (id, action, status, scope_hash, run_id, payload, summary, error_type, error, applied_by, created_at, updated_at, redact_fields)
		 VALUES ('chg_old', 'set', 'apply_failed', 's', 'run_old', '{"k":"v"}', 'old change', 'E', 'boom', 'agent:old', 1000, 3000, '["k"]')`,
	)

	ctx := context.Background()
	b, err := Open(ctx, path, ledger.OpenOptions{BusyTimeout: ledger.DefaultBusyTimeout})
	if err != nil {
		t.Fatalf("open a version 2 ledger: %v", err)
	}
	defer b.Close()
	var version int
	if err := b.DB().QueryRow("PRAGMA user_version").Scan(&version); err != nil || version != SchemaVersion {
		t.Fatalf("user_version = %d (%v), want %d", version, err, SchemaVersion)
	}
	ledgertest.CheckUpgradedV1(t, b)
	var objects string
	err = b.DB().QueryRow(`SELECT group_concat(name, ' ') FROM (SELECT name FROM sqlite_schema
		WHERE type IN ('index', 'trigger', 'table') AND name NOT LIKE 'sqlite_%' ORDER BY name)`).Scan(&objects)
	want := "change_actors change_actors_applied change_actors_delete change_actors_insert " +
		"change_actors_previewed change_actors_undone change_deps change_deps_resource changes " +
		"changes_action changes_created changes_deps_insert changes_finished changes_open " +
		"changes_open_created changes_run_created_id changes_text changes_text_config " +
		"changes_text_data changes_text_delete changes_text_idx changes_text_insert changes_text_tail " +
		"changes_text_update ledger_approvals ledger_approvals_change ledger_approvals_open " +
		"ledger_approvals_run ledger_approvals_waiting ledger_decisions ledger_history " +
		"ledger_history_approval ledger_history_at ledger_history_change ledger_history_pruned ledger_history_run " +
		"ledger_outbox ledger_outbox_created ledger_outbox_delivered ledger_outbox_due " +
		"meta runs runs_created runs_session runs_started_by"
	if err != nil || objects != want {
		t.Errorf("schema objects after the upgrade:\n got %s (%v)\nwant %s", objects, err, want)
	}
	// The full-text index holds the rows the upgrade found (its backfill).
	if got, err := b.ListChanges(ctx, b.DB(), ledger.ChangeFilter{Text: "OLD CHANGE", Limit: 10}); err != nil || len(got) != 1 || got[0].ID != "chg_old" {
		t.Errorf("a search after the upgrade found %v (%v), want chg_old", got, err)
	}
	if n, err := b.CountChanges(ctx, b.DB(), ledger.ChangeFilter{Text: "old"}); err != nil || n != 1 {
		t.Errorf("a count after the upgrade = %d (%v), want 1", n, err)
	}
	// The table of actors holds the actors the upgrade found (its backfill).
	if got, err := b.ListChanges(ctx, b.DB(), ledger.ChangeFilter{By: "agent:old", Limit: 10}); err != nil || len(got) != 1 || got[0].ID != "chg_old" {
		t.Errorf("a page by actor after the upgrade found %v (%v), want chg_old", got, err)
	}
	for _, bad := range []string{
		`UPDATE changes SET failure = 'bogus' WHERE id = 'chg_old'`,
		`UPDATE changes SET nothing_written = 2 WHERE id = 'chg_old'`,
		`UPDATE runs SET kind = 'bogus' WHERE id = 'run_old'`,
	} {
		if _, err := b.DB().Exec(bad); err == nil {
			t.Errorf("%s was accepted", bad)
		}
	}
	if problems, err := b.Check(ctx); err != nil || len(problems) != 0 {
		t.Fatalf("check after the upgrade: %v %v", problems, err)
	}
}

// TestMigrate_Version5HistoryKeepsItsNumbering builds a version 5 ledger
// whose newest history entry was pruned (so sqlite_sequence remembers a
// number no entry holds any more) and opens it with the current code,
// which rebuilds the history without AUTOINCREMENT: every entry keeps its
// seq, a 'pruned' entry holds the remembered number, and the next entry
// is numbered above it.
func TestMigrate_Version5HistoryKeepsItsNumbering(t *testing.T) {
	path := oldLedger(t, 5,
		`INSERT INTO changes (id, action, status, scope_hash, payload, summary, created_at, updated_at, expires_at)
		 VALUES ('chg_old', 'set', 'expired', 's', '{"k":"v"}', 'old change', 1000, 3000, 2000)`,
		`INSERT INTO ledger_history (at, change_id, from_status, to_status, actor, note) VALUES (1000, 'chg_old', '', 'pending', 'agent:a', '')`,
		`INSERT INTO ledger_history (at, change_id, from_status, to_status, actor, note) VALUES (3000, 'chg_old', 'pending', 'expired', '', '')`,
		`INSERT INTO ledger_history (at, change_id, from_status, to_status, actor, note) VALUES (4000, 'chg_old', 'expired', 'expired', 'x', 'deleted below')`,
		`DELETE FROM ledger_history WHERE seq = 3`,
	)

	ctx := context.Background()
	b, err := Open(ctx, path, ledger.OpenOptions{BusyTimeout: ledger.DefaultBusyTimeout})
	if err != nil {
		t.Fatalf("open a version 5 ledger: %v", err)
	}
	defer b.Close()
	got, err := b.ListHistory(ctx, b.DB(), ledger.HistoryFilter{})
	if err != nil {
		t.Fatal(err)
	}
	if len(got) != 3 || got[0].Seq != 1 || got[1].Seq != 2 || got[1].To != "expired" || got[2].Seq != 3 ||
		got[2].To != ledger.HistoryPruned || got[2].ChangeID != "" || got[2].RunID != "" {
		t.Fatalf("history after the upgrade: %+v", got)
	}
	head, err := b.ChainHead(ctx, b.DB())
	if err != nil || head.Seq != 3 || head.Hash != got[2].Hash || head.Hash.IsZero() {
		t.Fatalf("the chain's head after the upgrade: %+v, %v; want entry 3, chained", head, err)
	}
	if err := b.AppendHistory(ctx, b.DB(), ledger.HistoryEntry{Seq: head.Seq + 1, At: time.Now(), ChangeID: "chg_old", From: "expired", To: "expired"}); err != nil {
		t.Fatal(err)
	}
	next, err := b.ListHistory(ctx, b.DB(), ledger.HistoryFilter{After: 3})
	if err != nil || len(next) != 1 || next[0].Seq != 4 {
		t.Fatalf("the entry after the upgrade: %+v, %v; want seq 4", next, err)
	}
	var autoinc int
	if err := b.DB().QueryRow(`SELECT count(*) FROM sqlite_schema WHERE name = 'ledger_history' AND sql LIKE '%AUTOINCREMENT%'`).Scan(&autoinc); err != nil || autoinc != 0 {
		t.Errorf("ledger_history still declared with AUTOINCREMENT (%d, %v)", autoinc, err)
	}
	if problems, err := b.Check(ctx); err != nil || len(problems) != 0 {
		t.Errorf("Check after the upgrade: %q, %v", problems, err)
	}
}

// oldLedger builds, in a new file, a ledger exactly as schema version
// version of this package left it (its migrations and identity, foreign
// keys on), runs rows on it, and returns its path.
func oldLedger(t *testing.T, version int, rows ...string) string {
	t.Helper()
	path := filepath.Join(t.TempDir(), fmt.Sprintf("v%d.db", version))
	db, err := sql.Open("sqlite", "file:"+path+"?_pragma=foreign_keys(ON)")
	if err != nil {
		t.Fatal(err)
	}
	defer db.Close()
	var stmts []string
	for _, m := range migrations {
		if m.Version <= version {
			stmts = append(stmts, m.SQL)
		}
	}
	stmts = append(stmts, fmt.Sprintf("PRAGMA application_id = %d", ApplicationID), fmt.Sprintf("PRAGMA user_version = %d", version))
	for _, s := range append(stmts, rows...) {
		if _, err := db.Exec(s); err != nil {
			t.Fatalf("%s: %v", s, err)
		}
	}
	return path
}

// TestMigrate_ChainsTheHistoryItFinds opens a ledger of schema 15, the
// last before the hash chain, holding history entries with a gap where a
// prune deleted some: the upgrade chains every one of them.
func TestMigrate_ChainsTheHistoryItFinds(t *testing.T) {
	path := oldLedger(t, 15,
		`INSERT INTO changes (id, action, status, scope_hash, payload, summary, created_at, updated_at, expires_at)
		 VALUES ('chg_old', 'set', 'expired', 's', '{"k":"v"}', 'old change', 1000, 3000, 2000)`,
		`INSERT INTO ledger_history (seq, at, change_id, from_status, to_status, actor, note) VALUES (3, 1000, 'chg_old', '', 'pending', 'agent:a', '')`,
		`INSERT INTO ledger_history (seq, at, change_id, from_status, to_status, actor, note) VALUES (7, 3000, 'chg_old', 'pending', 'expired', '', '')`,
		`INSERT INTO ledger_history (seq, at, from_status, to_status, actor, note) VALUES (9, 4000, '', 'pruned', 'operator:dan', 'pruned up to 2 changes')`,
	)
	l, err := ledger.Open(context.Background(), path, ledger.OpenOptions{})
	if err != nil {
		t.Fatal(err)
	}
	defer l.Close()
	ledgertest.CheckChainedAfterUpgrade(t, l, 3)
}
