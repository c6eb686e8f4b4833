package main

import (
	"context"
	"database/sql"
	"errors"
	"io/fs"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"
)

// execSQL runs statements on the SQLite file at path through the driver
// directly, as another program would.
func execSQL(t *testing.T, path string, stmts ...string) {
	t.Helper()
	db, err := sql.Open("sqlite", "file:"+path)
	if err != nil {
		t.Fatal(err)
	}
	defer db.Close()
	for _, s := range stmts {
		if _, err := db.Exec(s); err != nil {
			t.Fatalf("%s: %v", s, err)
		}
	}
}

// everyCommand is every subcommand that opens a ledger, read-only and
// changing, with and without --yes.
func everyCommand(id string) [][]string {
	return [][]string{
		{"list"}, {"list", "--json"}, {"show", id}, {"show", id, "--json"}, {"runs"}, {"runs", "--json"}, {"check"}, {"verify"}, {"verify", "--json"},
		{"reconcile", id, "--note", "n"}, {"reconcile", id, "--note", "n", "--yes"},
		{"prune", "--older-than-days", "1"}, {"prune", "--older-than-days", "0", "--include-applied", "--yes"},
		{"expire"}, {"expire", "--yes"},
	}
}

func TestRefusedLedgers_ClearErrorExit1AndFileUnchanged(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	const id = "chg_00000000000000000000"
	cases := []struct {
		name  string
		make  func(path string)
		wants []string
	}{
		{"foreign SQLite file with the ledger's tables", func(path string) {
			os.Rename(populate(t).path, path)
			execSQL(t, path, "PRAGMA application_id = 0")
		}, []string{"not a changeset ledger", "without the ledger's application_id", "left unchanged"}},
		{"another application's SQLite file", func(path string) {
			execSQL(t, path, "CREATE TABLE notes (body TEXT)", "INSERT INTO notes VALUES ('mine')", "PRAGMA application_id = 1234")
		}, []string{"not a changeset ledger", "application_id 0x000004D2", "left unchanged"}},
		{"empty file", func(path string) {
			os.WriteFile(path, nil, 0o600)
		}, []string{"not a changeset ledger: the file is empty"}},
		{"text file", func(path string) {
			os.WriteFile(path, []byte("theme = dark\nlanguage = en\n"), 0o600)
		}, []string{"not a changeset ledger: not a SQLite database", "check the path"}},
		{"newer schema", func(path string) {
			os.Rename(populate(t).path, path)
			execSQL(t, path, "PRAGMA user_version = 99")
		}, []string{"newer than this program supports", "schema version 99", "upgrade this program"}},
	}
	for _, tc := range cases {
		path := filepath.Join(dir, strings.ReplaceAll(tc.name, " ", "_"))
		tc.make(path)
		before := readFile(t, path)
		for _, args := range everyCommand(id) {
			r := runL(t, path, args...)
			if r.code != exitError {
				t.Fatalf("%s: %v: %s", tc.name, args, r)
			}
			for _, w := range tc.wants {
				if !strings.Contains(r.stderr, w) {
					t.Errorf("%s: %v: stderr lacks %q:\n%s", tc.name, args, w, r.stderr)
				}
			}
			if r.stdout != "" {
				t.Errorf("%s: %v printed %q", tc.name, args, r.stdout)
			}
			sameBytes(t, path, before, tc.name+": "+strings.Join(args, " "))
		}
	}
}

func TestMissingLedger_IsNeverCreated(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	for _, path := range []string{filepath.Join(dir, "ledger.db"), filepath.Join(dir, "no", "such", "dir", "ledger.db")} {
		for _, args := range everyCommand("chg_00000000000000000000") {
			wantErr(t, runL(t, path, args...), "ledger does not exist", "check the path")
			if _, err := os.Stat(path); !errors.Is(err, fs.ErrNotExist) {
				t.Fatalf("%v created %s (%v)", args, path, err)
			}
		}
	}
	entries, _ := os.ReadDir(dir)
	if len(entries) != 0 {
		t.Errorf("the directory holds %d entries, want none", len(entries))
	}
	wantErr(t, runL(t, dir, "list"), "not a changeset ledger: it is a directory")
}

func TestReadOnlyFile_ReadCommandsWorkWritesAreRefused(t *testing.T) {
	t.Parallel()
	f := populate(t)
	if err := os.Chmod(f.path, 0o400); err != nil {
		t.Fatal(err)
	}
	before := readFile(t, f.path)
	key := filepath.Join(t.TempDir(), "checkpoint.key")
	for _, args := range [][]string{{"list"}, {"show", f.ids["applied"]}, {"runs", "--json"}, {"check", "--stale-after", "1000d"}, {"expire"}, {"prune", "--older-than-days", "0"},
		{"verify"}, {"checkpoint", "--key", key}} {
		r := runL(t, f.path, args...)
		if r.code == exitError {
			t.Errorf("%v on a read-only file: %s", args, r)
		}
		sameBytes(t, f.path, before, strings.Join(args, " "))
	}
	if os.Geteuid() == 0 {
		t.Log("running as root, which writes to a mode 0400 file regardless: the refusal of --yes is not checked")
		return
	}
	r := runL(t, f.path, "reconcile", f.ids["applying"], "--note", "n", "--yes")
	wantErr(t, r, "read-only")
	sameBytes(t, f.path, before, "reconcile --yes")
}

func TestBusyLedger_ChangingCommandFailsWithRemedy(t *testing.T) {
	if testing.Short() {
		t.Skip("waits for the busy timeout")
	}
	t.Parallel()
	ctx := context.Background()
	f := populate(t)
	db, err := sql.Open("sqlite", "file:"+f.path)
	if err != nil {
		t.Fatal(err)
	}
	defer db.Close()
	conn, err := db.Conn(ctx)
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close()
	if _, err := conn.ExecContext(ctx, "BEGIN IMMEDIATE"); err != nil {
		t.Fatal(err)
	}
	defer conn.ExecContext(ctx, "ROLLBACK")

	// Readers are not blocked by a writer.
	want(t, runL(t, f.path, "list", "--status", "pending"), exitOK, f.ids["stale"])
	start := time.Now()
	r := runL(t, f.path, "expire", "--yes")
	wantErr(t, r, "ledger is busy", "retry")
	t.Logf("refused after %v: %s", time.Since(start).Round(time.Millisecond), strings.TrimSpace(r.stderr))
}

func TestPostgresURL_NeverPrintsCredentials(t *testing.T) {
	t.Parallel()
	addSecret("the password of a postgres URL", "hunter2-secret")
	r := run(t, nil, "--ledger", "postgres://ops:hunter2-secret@127.0.0.1:1/ledger?sslmode=disable&connect_timeout=2", "list")
	if r.code != exitError || r.stderr == "" {
		t.Fatalf("list on an unreachable PostgreSQL ledger: %s", r)
	}
}
