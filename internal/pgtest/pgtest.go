// Package pgtest gives each test a PostgreSQL database of its own.
//
// [DSN] returns the URL of a new, empty database that is dropped when the
// test ends. The databases live on the server that
// CHANGESET_TEST_POSTGRES_DSN names when it is set (its user needs the
// CREATEDB privilege); otherwise the first call starts a throwaway cluster
// from the system's PostgreSQL binaries (initdb and pg_ctl under
// /usr/lib/postgresql/*/bin, or on PATH) in a temporary directory,
// listening on a free loopback port, and every later call of the same test
// process shares it. A package that uses DSN must call [Stop] from its
// TestMain after the tests ran:
//
//	func TestMain(m *testing.M) {
//		code := m.Run()
//		pgtest.Stop()
//		os.Exit(code)
//	}
//
// When neither a server URL nor the binaries are available, DSN skips the
// test with a message that says so. With CHANGESET_REQUIRE_POSTGRES set
// (.ci/run sets it) it fails the test instead, so that CI cannot pass
// without running the PostgreSQL tests.
package pgtest

import (
	"context"
	"crypto/rand"
	"database/sql"
	"encoding/hex"
	"errors"
	"fmt"
	"net"
	"net/url"
	"os"
	"os/exec"
	"os/user"
	"path/filepath"
	"sort"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	_ "github.com/jackc/pgx/v5/stdlib" // registers the "pgx" database/sql driver
)

// Environment variables read by this package.
const (
	// EnvDSN names an existing server to create the test databases on,
	// as a postgres:// URL whose user may create databases.
	EnvDSN = "CHANGESET_TEST_POSTGRES_DSN"
	// EnvRequire, when set to anything but "" or "0", makes a missing
	// PostgreSQL fail the tests instead of skipping them.
	EnvRequire = "CHANGESET_REQUIRE_POSTGRES"
)

// server is where the test databases are created.
type server struct {
	base  *url.URL // an administrator's URL; DSN replaces its path
	admin *sql.DB  // connected to base, for CREATE and DROP DATABASE

	// A cluster this package started; dir is empty for an external server.
	dir, data, pgCtl string
	asPostgres       bool
}

var (
	mu      sync.Mutex
	started *server
	failure error // why no server is available, once a start failed
)

// DSN returns the URL of a new, empty PostgreSQL database for t, dropped
// (with any connections left to it) when t ends. See the package
// documentation for where it lives and what happens when PostgreSQL is
// missing.
func DSN(t testing.TB) string {
	t.Helper()
	s, err := get()
	if err != nil {
		unavailable(t, err)
	}
	name := "test_" + randomHex(8)
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	// The name is this package's own hexadecimal string: nothing to quote.
	if _, err := s.admin.ExecContext(ctx, "CREATE DATABASE "+name); err != nil {
		t.Fatalf("pgtest: create database %s on %s: %v", name, redacted(s.base), err)
	}
	t.Cleanup(func() {
		ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
		defer cancel()
		if _, err := s.admin.ExecContext(ctx, "DROP DATABASE IF EXISTS "+name+" WITH (FORCE)"); err != nil {
			t.Errorf("pgtest: drop database %s: %v", name, err)
		}
	})
	u := *s.base
	u.Path = "/" + name
	q := u.Query()
	q.Del("dbname") // it would override the path
	u.RawQuery = q.Encode()
	return u.String()
}

// Stop stops the cluster DSN started, if any, and removes its files. It is
// safe to call when DSN was never called.
func Stop() {
	mu.Lock()
	defer mu.Unlock()
	s := started
	started = nil
	if s == nil {
		return
	}
	s.admin.Close()
	if s.dir == "" {
		return
	}
	if out, err := s.command(s.pgCtl, "-D", s.data, "-m", "immediate", "-w", "stop").CombinedOutput(); err != nil {
		fmt.Fprintf(os.Stderr, "pgtest: pg_ctl stop: %v\n%s", err, out)
	}
	os.RemoveAll(s.dir)
}

// unavailable skips t, loudly, or fails it when EnvRequire is set.
func unavailable(t testing.TB, err error) {
	t.Helper()
	if v := os.Getenv(EnvRequire); v != "" && v != "0" {
		t.Fatalf("PostgreSQL is required (%s=%s) but unavailable: %v", EnvRequire, v, err)
	}
	t.Skipf("SKIPPING PostgreSQL tests: %v (install PostgreSQL, e.g. apt-get install postgresql, or set %s to a postgres:// URL whose user may create databases)", err, EnvDSN)
}

// get returns the server, starting a cluster on first use. A failure is
// remembered so that every later test skips at once.
func get() (*server, error) {
	mu.Lock()
	defer mu.Unlock()
	if started != nil {
		return started, nil
	}
	if failure != nil {
		return nil, failure
	}
	var s *server
	var err error
	if dsn := os.Getenv(EnvDSN); dsn != "" {
		s, err = external(dsn)
	} else {
		s, err = startCluster()
	}
	if err != nil {
		failure = err
		return nil, err
	}
	started = s
	return s, nil
}

// external connects to the server named by EnvDSN.
func external(dsn string) (*server, error) {
	u, err := url.Parse(dsn)
	if err != nil || (u.Scheme != "postgres" && u.Scheme != "postgresql") {
		return nil, fmt.Errorf("%s is not a postgres:// URL", EnvDSN)
	}
	return connect(u, "")
}

// connect opens the administrator's pool on u and checks that it answers.
func connect(u *url.URL, dir string) (*server, error) {
	admin, err := sql.Open("pgx", u.String())
	if err != nil {
		return nil, err
	}
	admin.SetMaxOpenConns(4)
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	if err := admin.PingContext(ctx); err != nil {
		admin.Close()
		return nil, fmt.Errorf("cannot connect to %s: %w", redacted(u), err)
	}
	return &server{base: u, admin: admin, dir: dir}, nil
}

// startCluster initialises and starts a cluster of its own.
func startCluster() (*server, error) {
	initdb, pgCtl, err := findBinaries()
	if err != nil {
		return nil, err
	}
	s := &server{pgCtl: pgCtl, asPostgres: os.Geteuid() == 0}
	parent := os.TempDir()
	if s.asPostgres {
		parent = "/tmp" // the postgres user must be able to reach it
	}
	dir, err := os.MkdirTemp(parent, "changeset-pgtest-")
	if err != nil {
		return nil, err
	}
	fail := func(err error) (*server, error) {
		os.RemoveAll(dir)
		return nil, err
	}
	if s.asPostgres {
		// initdb refuses to run as root: run the cluster as postgres,
		// in a directory it owns.
		u, err := user.Lookup("postgres")
		if err != nil {
			return fail(fmt.Errorf("running as root, the cluster must run as the postgres user, which is missing: %w", err))
		}
		uid, _ := strconv.Atoi(u.Uid)
		gid, _ := strconv.Atoi(u.Gid)
		if err := os.Chown(dir, uid, gid); err != nil {
			return fail(err)
		}
		if _, err := exec.LookPath("runuser"); err != nil {
			return fail(fmt.Errorf("running as root needs runuser to start the cluster as postgres: %w", err))
		}
	}
	s.dir, s.data = dir, filepath.Join(dir, "data")
	out, err := s.command(initdb, "-D", s.data, "-A", "trust", "-U", "postgres",
		"-E", "UTF8", "--locale=C", "--no-sync").CombinedOutput()
	if err != nil {
		return fail(fmt.Errorf("initdb: %v\n%s", err, out))
	}
	// A free port can be taken between the probe and the server's
	// bind; try a few.
	for attempt := 0; ; attempt++ {
		port, err := freePort()
		if err != nil {
			return fail(err)
		}
		opts := fmt.Sprintf("-k %s -p %d -c listen_addresses=127.0.0.1 -c max_connections=200", dir, port)
		logFile := filepath.Join(dir, "server.log")
		out, err := s.command(pgCtl, "-D", s.data, "-l", logFile, "-o", opts, "-w", "-t", "60", "start").CombinedOutput()
		if err != nil {
			log, _ := os.ReadFile(logFile)
			if attempt < 2 {
				continue
			}
			return fail(fmt.Errorf("pg_ctl start: %v\n%s\n%s", err, out, log))
		}
		base := &url.URL{Scheme: "postgres", User: url.User("postgres"),
			Host: net.JoinHostPort("127.0.0.1", strconv.Itoa(port)), Path: "/postgres", RawQuery: "sslmode=disable"}
		srv, err := connect(base, dir)
		if err != nil {
			s.command(pgCtl, "-D", s.data, "-m", "immediate", "stop").Run()
			return fail(err)
		}
		srv.data, srv.pgCtl, srv.asPostgres = s.data, s.pgCtl, s.asPostgres
		return srv, nil
	}
}

// command runs a PostgreSQL program, as the postgres user when the tests
// run as root.
func (s *server) command(name string, args ...string) *exec.Cmd {
	if s.asPostgres {
		return exec.Command("runuser", append([]string{"-u", "postgres", "--", name}, args...)...)
	}
	return exec.Command(name, args...)
}

// findBinaries returns initdb and pg_ctl of the newest PostgreSQL under
// /usr/lib/postgresql, or from PATH.
func findBinaries() (initdb, pgCtl string, err error) {
	dirs, _ := filepath.Glob("/usr/lib/postgresql/*/bin")
	sort.Slice(dirs, func(i, j int) bool { return version(dirs[i]) > version(dirs[j]) })
	for _, d := range dirs {
		i, p := filepath.Join(d, "initdb"), filepath.Join(d, "pg_ctl")
		if isFile(i) && isFile(p) {
			return i, p, nil
		}
	}
	i, err1 := exec.LookPath("initdb")
	p, err2 := exec.LookPath("pg_ctl")
	if err := errors.Join(err1, err2); err != nil {
		return "", "", fmt.Errorf("no PostgreSQL server binaries (initdb, pg_ctl) under /usr/lib/postgresql/*/bin or on PATH")
	}
	return i, p, nil
}

// version is the major version in /usr/lib/postgresql/<version>/bin.
func version(binDir string) int {
	v, _ := strconv.Atoi(filepath.Base(filepath.Dir(binDir)))
	return v
}

func isFile(p string) bool {
	fi, err := os.Stat(p)
	return err == nil && fi.Mode().IsRegular()
}

// freePort returns a loopback TCP port that nothing listened on a moment ago.
func freePort() (int, error) {
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return 0, err
	}
	defer l.Close()
	return l.Addr().(*net.TCPAddr).Port, nil
}

func randomHex(n int) string {
	b := make([]byte, n)
	rand.Read(b)
	return hex.EncodeToString(b)
}

// redacted is u without its password, for messages.
func redacted(u *url.URL) string {
	c := *u
	if c.User != nil {
		c.User = url.User(c.User.Username())
	}
	return strings.TrimSuffix(c.String(), "?")
}
