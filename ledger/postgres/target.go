package postgres

import (
	"errors"
	"fmt"
	"net/url"
	"regexp"
	"strconv"
	"strings"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/mcp-changeset/changeset-go/ledger"
)

// Query parameters of a ledger URL that this package reads and removes
// before the rest of the URL reaches pgx.
const (
	// schemaParam names the schema that holds the ledger's tables.
	schemaParam = "changeset_schema"
	// maxConnsParam bounds the connection pool.
	maxConnsParam = "changeset_max_conns"
)

// DefaultSchema holds the ledger's tables when the URL names no
// changeset_schema.
const DefaultSchema = "public"

// DefaultMaxConns is the size of the connection pool when the URL sets no
// changeset_max_conns. Every open claim transaction holds one connection,
// so this bounds the claims a process runs at once.
const DefaultMaxConns = 10

// Pool settings that are not configurable. Idle connections are closed
// after a while and every connection is replaced now and then, so that a
// failover or a restarted pooler is noticed without errors piling up.
const (
	maxIdleConns    = 5
	connMaxIdleTime = 5 * time.Minute
	connMaxLifetime = 30 * time.Minute
)

// schemaName is what changeset_schema accepts: a lowercase SQL identifier
// that PostgreSQL would not fold or reserve.
var schemaName = regexp.MustCompile(`^[a-z_][a-z0-9_]{0,62}$`)

// target is a parsed ledger URL.
type target struct {
	conn     *pgx.ConnConfig
	schema   string // the schema's name, unquoted
	explicit bool   // the URL named the schema
	maxConns int
	location string // the URL without credentials, for messages
}

// parseTarget reads a postgres:// or postgresql:// URL. It takes out and
// validates this package's own parameters, and returns the connection
// configuration for the rest.
func parseTarget(raw string, opts ledger.OpenOptions) (*target, error) {
	u, err := url.Parse(raw)
	if err != nil {
		// url.Error repeats the URL, password and all.
		return nil, errors.New("the ledger URL cannot be parsed (expected postgres://user:password@host:port/database?changeset_schema=name)")
	}
	if u.Scheme != "postgres" && u.Scheme != "postgresql" {
		return nil, fmt.Errorf("the ledger URL must start with postgres:// or postgresql://, not %s://", u.Scheme)
	}
	t := &target{schema: DefaultSchema, maxConns: DefaultMaxConns}
	// u.Query would silently drop what it cannot parse (a ';', a bad
	// escape), changeset_schema included.
	q, err := url.ParseQuery(u.RawQuery)
	if err != nil {
		return nil, errors.New("the query of the ledger URL cannot be parsed (separate parameters with '&' and escape special characters)")
	}
	if vs, ok := q[schemaParam]; ok {
		s := vs[len(vs)-1]
		if !schemaName.MatchString(s) || strings.HasPrefix(s, "pg_") || s == "information_schema" {
			return nil, fmt.Errorf("%s=%q is not a usable schema name: use 1 to 63 lowercase letters, digits and underscores, starting with a letter or underscore and not with pg_", schemaParam, s)
		}
		t.schema, t.explicit = s, true
		q.Del(schemaParam)
	}
	if vs, ok := q[maxConnsParam]; ok {
		n, err := strconv.Atoi(vs[len(vs)-1])
		if err != nil || n < 1 || n > 1000 {
			return nil, fmt.Errorf("%s=%q must be a number of connections from 1 to 1000", maxConnsParam, vs[len(vs)-1])
		}
		t.maxConns = n
		q.Del(maxConnsParam)
	}
	t.location = redact(u, t)
	u.RawQuery = q.Encode()
	cfg, err := pgx.ParseConfig(u.String())
	if err != nil {
		// pgx redacts the password from its parse errors.
		return nil, fmt.Errorf("the ledger URL is not valid: %w", err)
	}
	rp := cfg.RuntimeParams
	if _, ok := rp["application_name"]; !ok {
		rp["application_name"] = "changeset-go"
	}
	// lock_timeout is PostgreSQL's busy timeout: a statement that waits
	// longer for a row lock (another process's claim of the same change)
	// fails with lock_not_available, reported as ledger.ErrBusy.
	if _, ok := rp["lock_timeout"]; !ok {
		rp["lock_timeout"] = strconv.FormatInt(max(opts.BusyTimeout.Milliseconds(), 1), 10) + "ms"
	}
	if opts.ReadOnly {
		rp["default_transaction_read_only"] = "on"
	}
	// The ledger's statements name their schema; the search path is for
	// the application's own tables (through DB), so that they land
	// beside the ledger's. A search_path in the URL wins.
	if _, ok := rp["search_path"]; !ok && t.explicit {
		rp["search_path"] = pgx.Identifier{t.schema}.Sanitize() + ", public"
	}
	t.conn = cfg
	return t, nil
}

// redact returns u as it may appear in messages: the scheme, hosts, ports,
// database and schema, and nothing else. The user name and password are
// dropped, and so are all other query parameters, since password,
// sslpassword and others can carry secrets.
func redact(u *url.URL, t *target) string {
	c := url.URL{Scheme: u.Scheme, Host: u.Host, Path: u.Path}
	keep := url.Values{}
	q, _ := url.ParseQuery(u.RawQuery) // parseTarget checked it
	for _, k := range []string{"host", "port", "dbname"} {
		if v := q.Get(k); v != "" {
			keep.Set(k, v)
		}
	}
	if t.explicit {
		keep.Set(schemaParam, t.schema)
	}
	c.RawQuery = keep.Encode()
	return c.String()
}
