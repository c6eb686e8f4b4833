package postgres

import (
	"errors"
	"regexp"
	"strings"
	"testing"
	"time"

	"github.com/jackc/pgx/v5/pgconn"
	"github.com/mcp-changeset/changeset-go/ledger"
)

func TestParseTarget_TakesOutItsOwnParameters(t *testing.T) {
	t.Parallel()
	tg, err := parseTarget("postgres://app:s3cret@db.internal:6432/notes?sslmode=disable&changeset_schema=tenant_7&changeset_max_conns=3",
		ledger.OpenOptions{BusyTimeout: 2500 * time.Millisecond})
	if err != nil {
		t.Fatal(err)
	}
	if tg.schema != "tenant_7" || !tg.explicit || tg.maxConns != 3 {
		t.Errorf("schema %q explicit %v max conns %d", tg.schema, tg.explicit, tg.maxConns)
	}
	c := tg.conn
	if c.Host != "db.internal" || c.Port != 6432 || c.Database != "notes" || c.User != "app" || c.Password != "s3cret" {
		t.Errorf("connection: %s:%d/%s as %s", c.Host, c.Port, c.Database, c.User)
	}
	for k, want := range map[string]string{
		"search_path":      `"tenant_7", public`,
		"lock_timeout":     "2500ms",
		"application_name": "changeset-go",
	} {
		if got := c.RuntimeParams[k]; got != want {
			t.Errorf("runtime parameter %s = %q, want %q", k, got, want)
		}
	}
	for _, k := range []string{schemaParam, maxConnsParam, "default_transaction_read_only"} {
		if v, ok := c.RuntimeParams[k]; ok {
			t.Errorf("runtime parameter %s = %q reached the server", k, v)
		}
	}
}

func TestParseTarget_Defaults(t *testing.T) {
	t.Parallel()
	tg, err := parseTarget("postgresql://localhost/app?search_path=mine&lock_timeout=9s&application_name=svc", ledger.OpenOptions{ReadOnly: true})
	if err != nil {
		t.Fatal(err)
	}
	if tg.schema != DefaultSchema || tg.explicit || tg.maxConns != DefaultMaxConns {
		t.Errorf("schema %q explicit %v max conns %d", tg.schema, tg.explicit, tg.maxConns)
	}
	for k, want := range map[string]string{
		"search_path": "mine", "lock_timeout": "9s", "application_name": "svc", "default_transaction_read_only": "on",
	} {
		if got := tg.conn.RuntimeParams[k]; got != want {
			t.Errorf("runtime parameter %s = %q, want %q (the URL's own value wins)", k, got, want)
		}
	}
}

func TestParseTarget_RefusesBadInput(t *testing.T) {
	t.Parallel()
	for target, want := range map[string]string{
		"postgres://h/db?changeset_schema=Tenant":      "not a usable schema name",
		"postgres://h/db?changeset_schema=a-b":         "not a usable schema name",
		"postgres://h/db?changeset_schema=":            "not a usable schema name",
		"postgres://h/db?changeset_schema=pg_temp":     "not a usable schema name",
		"postgres://h/db?changeset_schema=" + long(64): "not a usable schema name",
		`postgres://h/db?changeset_schema=x";drop`:     "cannot be parsed",
		`postgres://h/db?changeset_schema=x%22`:        "not a usable schema name",
		`postgres://h/db?changeset_schema=%zz`:         "cannot be parsed",
		"postgres://h/db?changeset_max_conns=0":        "from 1 to 1000",
		"postgres://h/db?changeset_max_conns=lots":     "from 1 to 1000",
		"mysql://h/db":                                     "must start with postgres://",
		"postgres://u:s3cret@h:notaport/db":                "cannot be parsed",
		"postgres://u:s3cret@h/db?sslmode=sometimes-maybe": "not valid",
	} {
		_, err := parseTarget(target, ledger.OpenOptions{})
		if err == nil || !strings.Contains(err.Error(), want) {
			t.Errorf("parseTarget(%q) = %v, want an error saying %q", target, err, want)
		}
		if err != nil && strings.Contains(err.Error(), "s3cret") {
			t.Errorf("parseTarget(%q): the error shows the password: %v", target, err)
		}
	}
	if _, err := parseTarget("postgres://h/db?changeset_schema="+long(63), ledger.OpenOptions{}); err != nil {
		t.Errorf("a 63-character schema name was refused: %v", err)
	}
}

func long(n int) string { return strings.Repeat("s", n) }

func TestRedact_KeepsNoCredentials(t *testing.T) {
	t.Parallel()
	for target, want := range map[string]string{
		"postgres://app:s3cret@db:5432/notes?sslmode=require&password=s3cret&sslpassword=s3cret": "postgres://db:5432/notes",
		"postgres://app@db/notes?changeset_schema=t1":                                            "postgres://db/notes?changeset_schema=t1",
		"postgresql:///notes?host=/var/run/postgresql&user=app&password=s3cret":                  "postgresql:///notes?host=%2Fvar%2Frun%2Fpostgresql",
		"postgres://a:s3cret@h1:5432,h2:5433/notes":                                              "postgres://h1:5432,h2:5433/notes",
	} {
		tg, err := parseTarget(target, ledger.OpenOptions{})
		if err != nil {
			t.Fatalf("parseTarget(%q): %v", target, err)
		}
		if tg.location != want || strings.Contains(tg.location, "s3cret") || strings.Contains(tg.location, "app") {
			t.Errorf("location of %q = %q, want %q", target, tg.location, want)
		}
	}
}

func TestInterpretError_MapsSQLStates(t *testing.T) {
	t.Parallel()
	b := &Backend{location: "postgres://db/x"}
	for code, want := range map[string]error{
		codeLockNotAvailable:   ledger.ErrBusy,
		codeQueryCanceled:      ledger.ErrBusy,
		codeTooManyConnections: ledger.ErrBusy,
		codeSerialization:      ledger.ErrBusy,
		codeDeadlock:           ledger.ErrBusy,
		codeReadOnlyTx:         ledger.ErrReadOnly,
		codeUndefinedTable:     ledger.ErrCorrupt,
		codeUndefinedSchema:    ledger.ErrCorrupt,
	} {
		pe := &pgconn.PgError{Code: code, Message: "m"}
		err := b.interpretError("op", pe)
		var le *ledger.Error
		if !errors.Is(err, want) || !errors.As(err, &le) || le.Location != b.location || !errors.Is(err, pe) {
			t.Errorf("SQLSTATE %s: %v, want a *ledger.Error wrapping %v and the driver's error", code, err, want)
		}
		if errors.Is(err, ledger.ErrConflict) {
			t.Errorf("SQLSTATE %s became ErrConflict, which callers never retry", code)
		}
	}
	for code, want := range map[string]string{
		codeUniqueViolation:     "already exists",
		codeForeignKeyViolation: "run that does not exist",
		codeCheckViolation:      "constraint changes_status_valid",
		codeBadCharacter:        "valid UTF-8 without NUL",
	} {
		err := b.interpretError("op", &pgconn.PgError{Code: code, ConstraintName: "changes_status_valid"})
		if err == nil || !strings.Contains(err.Error(), want) {
			t.Errorf("SQLSTATE %s: %v, want it to say %q", code, err, want)
		}
	}
}

func TestInterpretError_PassesThrough(t *testing.T) {
	t.Parallel()
	b := &Backend{location: "postgres://db/x"}
	if b.interpretError("op", nil) != nil {
		t.Error("nil became an error")
	}
	le := &ledger.Error{Op: "inner", Err: ledger.ErrConflict}
	if got := b.interpretError("outer", le); got != error(le) {
		t.Errorf("a *ledger.Error was wrapped again: %v", got)
	}
	plain := errors.New("boom")
	if got := b.interpretError("op", plain); !errors.Is(got, plain) || !strings.Contains(got.Error(), b.location) {
		t.Errorf("interpretError(plain) = %v", got)
	}
}

func TestMigrationsMatchSchemaVersion(t *testing.T) {
	t.Parallel()
	if last := migrations[len(migrations)-1]; last.Version != SchemaVersion {
		t.Fatalf("the last migration, %s, is not schema version %d", last.Name, SchemaVersion)
	}
	all := ""
	for i, m := range migrations {
		if m.Version < i+1 || !strings.HasSuffix(m.Name, ".sql") || m.SQL == "" {
			t.Errorf("migration %d: %+v", i, m)
		}
		all += m.SQL
	}
	// Check knows every constraint the migrations name.
	for _, names := range constraints {
		for _, n := range names {
			if !regexp.MustCompile(`CONSTRAINT ` + n + `\s`).MatchString(all) {
				t.Errorf("constraint %s is not named in the migrations", n)
			}
		}
	}
}
