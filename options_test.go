package changeset_test

import (
	"bytes"
	"context"
	"database/sql"
	"errors"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	changeset "github.com/mcp-changeset/changeset-go"
	"github.com/mcp-changeset/changeset-go/ledger"
)

func TestNew_RefusesInvalidOptions(t *testing.T) {
	path := filepath.Join(t.TempDir(), "l.db")
	for name, tc := range map[string]struct {
		opts changeset.Options
		want string
	}{
		"no ledger":              {changeset.Options{}, "LedgerPath"},
		"ttl below min":          {changeset.Options{LedgerPath: path, TTL: 10 * time.Second}, "outside"},
		"ttl above max":          {changeset.Options{LedgerPath: path, TTL: 2 * time.Hour}, "outside"},
		"min above max":          {changeset.Options{LedgerPath: path, MinTTL: time.Hour, MaxTTL: time.Minute}, "greater"},
		"negative ttl":           {changeset.Options{LedgerPath: path, TTL: -time.Second}, "negative"},
		"negative undo ttl":      {changeset.Options{LedgerPath: path, UndoTTL: -2 * time.Second}, "NoExpiry"},
		"undo ttl above max":     {changeset.Options{LedgerPath: path, UndoTTL: 48 * time.Hour, MaxUndoTTL: 24 * time.Hour}, "exceeds"},
		"no expiry with max":     {changeset.Options{LedgerPath: path, UndoTTL: changeset.NoExpiry, MaxUndoTTL: time.Hour}, "not allowed"},
		"negative payload limit": {changeset.Options{LedgerPath: path, MaxPayloadBytes: -1}, "negative"},
		"negative result limit":  {changeset.Options{LedgerPath: path, MaxResultBytes: -1}, "negative"},
		"negative busy timeout":  {changeset.Options{LedgerPath: path, BusyTimeout: -1}, "negative"},
		"negative clock skew":    {changeset.Options{LedgerPath: path, MaxClockSkew: -1}, "negative"},
		"unknown write mode":     {changeset.Options{LedgerPath: path, WriteMode: "yolo"}, "unknown WriteMode"},
		"bad prefix":             {changeset.Options{LedgerPath: path, Prefix: "a b"}, "Prefix"},
	} {
		t.Run(name, func(t *testing.T) {
			g, err := changeset.New(nil, tc.opts)
			if err == nil {
				g.Close()
				t.Fatal("accepted")
			}
			if !strings.Contains(err.Error(), tc.want) {
				t.Fatalf("error %q does not contain %q", err, tc.want)
			}
		})
	}
	if _, err := os.Stat(path); !errors.Is(err, os.ErrNotExist) {
		t.Error("invalid options created a ledger")
	}
}

func TestNew_RefusesLedgersItCannotTrust(t *testing.T) {
	dir := t.TempDir()
	text := filepath.Join(dir, "notes.txt")
	os.WriteFile(text, []byte("hello, not a database\n"), 0o600)
	for name, path := range map[string]string{
		"text file":      text,
		"missing parent": filepath.Join(dir, "no", "such", "dir", "l.db"),
		"directory":      dir,
	} {
		t.Run(name, func(t *testing.T) {
			before, _ := os.ReadFile(path)
			g, err := changeset.New(nil, changeset.Options{LedgerPath: path})
			if err == nil {
				g.Close()
				t.Fatal("accepted")
			}
			if !isLedgerError(err) {
				t.Fatalf("error %v (%T) is not a LedgerError", err, err)
			}
			after, _ := os.ReadFile(path)
			if string(before) != string(after) {
				t.Fatal("the file was changed")
			}
		})
	}
	if _, err := ledger.Open(context.Background(), filepath.Join(dir, "missing.db"), ledger.OpenOptions{}); !errors.Is(err, ledger.ErrNotExist) {
		t.Fatalf("missing ledger with create=false: %v", err)
	}
	if _, err := os.Stat(filepath.Join(dir, "missing.db")); !errors.Is(err, os.ErrNotExist) {
		t.Fatal("Open(create=false) created the file")
	}
}

func TestNew_RefusesForeignNewerAndCorruptLedgers(t *testing.T) {
	dir := t.TempDir()
	rawExec := func(path, stmt string) {
		t.Helper()
		db, err := sql.Open("sqlite", "file:"+path)
		if err != nil {
			t.Fatal(err)
		}
		defer db.Close()
		if _, err := db.Exec(stmt); err != nil {
			t.Fatal(err)
		}
	}
	newLedger := func(name string) string {
		path := filepath.Join(dir, name)
		g, err := changeset.New(nil, changeset.Options{LedgerPath: path})
		if err != nil {
			t.Fatal(err)
		}
		if _, err := g.Ledger().Changes(context.Background(), ledger.ChangeFilter{}); err != nil {
			t.Fatal(err)
		}
		g.Close()
		return path
	}

	foreign := filepath.Join(dir, "foreign.db")
	rawExec(foreign, "CREATE TABLE changes (id TEXT PRIMARY KEY, status TEXT)")
	newer := newLedger("newer.db")
	rawExec(newer, "PRAGMA user_version = 99")
	corrupt := newLedger("corrupt.db")
	data, _ := os.ReadFile(corrupt)
	for i := 4096; i < len(data); i++ {
		data[i] = byte(i * 7)
	}
	os.WriteFile(corrupt, data, 0o600)
	os.Remove(corrupt + "-wal")
	os.Remove(corrupt + "-shm")

	for name, tc := range map[string]struct {
		path string
		want error
	}{
		"foreign": {foreign, ledger.ErrForeign},
		"newer":   {newer, ledger.ErrNewerSchema},
		"corrupt": {corrupt, ledger.ErrCorrupt},
	} {
		t.Run(name, func(t *testing.T) {
			before, _ := os.ReadFile(tc.path)
			g, err := changeset.New(nil, changeset.Options{LedgerPath: tc.path})
			if err == nil {
				_, err = g.Ledger().Changes(context.Background(), ledger.ChangeFilter{})
				g.Close()
			}
			if !isLedgerError(err) || !errors.Is(err, tc.want) {
				t.Fatalf("got %v, want a LedgerError wrapping %v", err, tc.want)
			}
			after, _ := os.ReadFile(tc.path)
			if !bytes.Equal(before, after) {
				t.Fatal("the file was changed")
			}
		})
	}
}
