package commitcount_test

import (
	"database/sql"
	"path/filepath"
	"testing"

	"github.com/mcp-changeset/changeset-go/internal/commitcount"
)

func TestCountsWritingCommitsOnly(t *testing.T) {
	commitcount.Enable()
	defer commitcount.Disable()
	db, err := sql.Open("sqlite", "file:"+filepath.Join(t.TempDir(), "x.db")+"?_txlock=immediate&_pragma=journal_mode(WAL)")
	if err != nil {
		t.Fatal(err)
	}
	defer db.Close()
	db.SetMaxOpenConns(1)
	if _, err := db.Exec("CREATE TABLE t (id INTEGER PRIMARY KEY, v TEXT)"); err != nil {
		t.Fatal(err)
	}
	start := commitcount.Commits()
	for i := range 3 {
		tx, _ := db.Begin()
		tx.Exec("INSERT INTO t (id, v) VALUES (?, 'a')", i)
		tx.Exec("UPDATE t SET v = 'b' WHERE id = ? AND v = 'a'", i)
		if err := tx.Commit(); err != nil {
			t.Fatal(err)
		}
	}
	tx, _ := db.Begin() // a write transaction that writes nothing
	var n int
	tx.QueryRow("SELECT count(*) FROM t").Scan(&n)
	tx.Commit()
	tx, _ = db.Begin() // one rolled back
	tx.Exec("INSERT INTO t (id, v) VALUES (99, 'a')")
	tx.Rollback()
	db.Exec("INSERT INTO t (id, v) VALUES (100, 'a')") // autocommit
	if got := commitcount.Commits() - start; got != 4 {
		t.Fatalf("counted %d commits, want 4", got)
	}
}
