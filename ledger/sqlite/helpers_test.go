package sqlite

import (
	"context"
	"errors"
	"net/url"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/mcp-changeset/changeset-go/ledger"
	"github.com/mcp-changeset/changeset-go/ledger/internal/sqlval"
)

func TestEscapePath(t *testing.T) {
	t.Parallel()
	for in, want := range map[string]string{
		"/tmp/ledger.db":       "/tmp/ledger.db",
		"/a b/c?d#e%f&g=h.db":  "/a%20b/c%3Fd%23e%25f%26g%3Dh.db",
		"/C:/x/é.db":           "/C:/x/%C3%A9.db",
		"/100%25/x":            "/100%2525/x",
		"/-._~/semi;colon,+!$": "/-._~/semi%3Bcolon%2C%2B%21%24",
	} {
		if got := escapePath(in); got != want {
			t.Errorf("escapePath(%q) = %q, want %q", in, got, want)
		}
		if dec, err := url.PathUnescape(escapePath(in)); err != nil || dec != in {
			t.Errorf("escapePath(%q) does not decode back: %q, %v", in, dec, err)
		}
	}
}

func TestBuildDSN(t *testing.T) {
	t.Parallel()
	rw, err := buildDSN("/x/a?b.db", false, 2500*time.Millisecond)
	if err != nil {
		t.Fatal(err)
	}
	want := "file:/x/a%3Fb.db?_txlock=immediate&_pragma=busy_timeout(2500)&_pragma=journal_mode(WAL)&_pragma=synchronous(FULL)&_pragma=foreign_keys(ON)"
	if rw != want {
		t.Errorf("read-write DSN\n got %s\nwant %s", rw, want)
	}
	ro, _ := buildDSN("/x/a.db", true, time.Microsecond)
	if ro != "file:/x/a.db?mode=ro&_pragma=busy_timeout(1)" {
		t.Errorf("read-only DSN %s", ro)
	}
	rel, _ := buildDSN("rel.db", true, time.Second)
	if !strings.HasPrefix(rel, "file:/") {
		t.Errorf("relative path not made absolute: %s", rel)
	}
}

func TestCeilMicro(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		t    time.Time
		want int64
	}{
		{time.UnixMicro(5), 5},
		{time.Unix(0, 5001), 6},
		{time.Unix(0, -1), 0},
		{time.Unix(0, -1001), -1},
		{time.UnixMicro(-3), -3},
	} {
		if got := sqlval.CeilMicro(tc.t); got != tc.want {
			t.Errorf("sqlval.CeilMicro(%d ns) = %d, want %d", tc.t.UnixNano(), got, tc.want)
		}
	}
}

func TestChunksAndPlaceholders(t *testing.T) {
	t.Parallel()
	ids := make([]string, 2*maxIDsPerStatement+1)
	cs := chunks(ids)
	if len(cs) != 3 || len(cs[0]) != maxIDsPerStatement || len(cs[2]) != 1 {
		t.Errorf("chunks of %d: %d parts", len(ids), len(cs))
	}
	if chunks(nil) != nil {
		t.Error("chunks(nil) is not empty")
	}
	if placeholders(3) != "?, ?, ?" || placeholders(0) != "" {
		t.Errorf("placeholders: %q %q", placeholders(3), placeholders(0))
	}
}

func TestMigrationsMatchSchemaVersion(t *testing.T) {
	t.Parallel()
	if last := migrations[len(migrations)-1]; last.Version != SchemaVersion {
		t.Fatalf("the last migration, %s, is not schema version %d", last.Name, SchemaVersion)
	}
	for i, m := range migrations {
		if m.Version < i+1 || !strings.HasSuffix(m.Name, ".sql") || m.SQL == "" {
			t.Errorf("migration %d: %+v", i, m)
		}
	}
	if ApplicationID != 0x4D434353 || string([]byte{0x4D, 0x43, 0x43, 0x53}) != "MCCS" {
		t.Error("ApplicationID changed")
	}
}

func TestInterpretErrorPassesThrough(t *testing.T) {
	t.Parallel()
	b := &Backend{path: "/x"}
	if b.interpretError("op", nil) != nil {
		t.Error("nil became an error")
	}
	le := &ledger.Error{Op: "inner", Err: ledger.ErrConflict}
	if got := b.interpretError("outer", le); got != error(le) {
		t.Errorf("a *ledger.Error was wrapped again: %v", got)
	}
	plain := errors.New("boom")
	got := b.interpretError("op", plain)
	var e *ledger.Error
	if !errors.As(got, &e) || e.Location != "/x" || !errors.Is(got, plain) {
		t.Errorf("interpretError(plain) = %#v", got)
	}
}

// TestNetworkFSRefused replaces the filesystem probe, so it must not run in
// parallel with tests that open files.
func TestNetworkFSRefused(t *testing.T) {
	saved := detectNetworkFS
	detectNetworkFS = func(string) (string, bool) { return "NFS", true }
	defer func() { detectNetworkFS = saved }()

	ctx := context.Background()
	path := filepath.Join(t.TempDir(), "ledger.db")
	_, err := Open(ctx, path, ledger.OpenOptions{Create: true})
	if !errors.Is(err, ledger.ErrNetworkFS) || !strings.Contains(err.Error(), "NFS") {
		t.Errorf("Open on NFS = %v, want ErrNetworkFS", err)
	}
	if _, err := os.Stat(path); !errors.Is(err, os.ErrNotExist) {
		t.Error("the refused ledger was created")
	}
	b, err := Open(ctx, path, ledger.OpenOptions{Create: true, AllowNetworkFS: true})
	if err != nil {
		t.Fatalf("Open with AllowNetworkFS: %v", err)
	}
	b.Close()
	_, err = Open(ctx, path, ledger.OpenOptions{})
	if !errors.Is(err, ledger.ErrNetworkFS) {
		t.Errorf("reopening on NFS = %v, want ErrNetworkFS", err)
	}
}
