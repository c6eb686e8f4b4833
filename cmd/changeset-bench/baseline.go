package main

import (
	"context"
	"database/sql"
	"fmt"
	"path/filepath"
	"strings"
	"time"
)

// rawPayload makes a baseline row about as large as a ledger row's JSON.
var rawPayload = strings.Repeat("x", 512)

// rawResult is one run of the physical baseline.
type rawResult struct {
	Commits int           `json:"commits"`
	Elapsed time.Duration `json:"elapsed_ns"`
	CPU     time.Duration `json:"cpu_ns"` // user+sys of this process, or 0 where unknown
}

// PerSecond is the commit rate.
func (r rawResult) PerSecond() float64 { return float64(r.Commits) / r.Elapsed.Seconds() }

// add sums two runs.
func (r rawResult) add(o rawResult) rawResult {
	return rawResult{Commits: r.Commits + o.Commits, Elapsed: r.Elapsed + o.Elapsed, CPU: r.CPU + o.CPU}
}

// sqliteDSN is the data source name ledger/sqlite builds for a read-write
// ledger: BEGIN IMMEDIATE, a busy timeout, WAL, synchronous=FULL and
// foreign keys.
func sqliteDSN(path string) (string, error) {
	abs, err := filepath.Abs(path)
	if err != nil {
		return "", err
	}
	return "file:" + escapePath(filepath.ToSlash(abs)) +
		"?_txlock=immediate&_pragma=busy_timeout(5000)&_pragma=journal_mode(WAL)&_pragma=synchronous(FULL)&_pragma=foreign_keys(ON)", nil
}

// escapePath percent-escapes every byte of p but unreserved URI
// characters, '/' and ':', as ledger/sqlite does.
func escapePath(p string) string {
	var sb strings.Builder
	for i := 0; i < len(p); i++ {
		c := p[i]
		if 'a' <= c && c <= 'z' || 'A' <= c && c <= 'Z' || '0' <= c && c <= '9' || strings.IndexByte("-._~/:", c) >= 0 {
			sb.WriteByte(c)
		} else {
			fmt.Fprintf(&sb, "%%%02X", c)
		}
	}
	return sb.String()
}

// openRawSQLite opens the SQLite file at path with the ledger's DSN and
// checks that the pragmas took.
func openRawSQLite(ctx context.Context, path string) (*sql.DB, error) {
	dsn, err := sqliteDSN(path)
	if err != nil {
		return nil, err
	}
	db, err := sql.Open("sqlite", dsn)
	if err != nil {
		return nil, err
	}
	var mode string
	var syncMode int
	err = db.QueryRowContext(ctx, "PRAGMA journal_mode").Scan(&mode)
	if err == nil {
		err = db.QueryRowContext(ctx, "PRAGMA synchronous").Scan(&syncMode)
	}
	if err != nil || !strings.EqualFold(mode, "wal") || syncMode != 2 {
		db.Close()
		return nil, fmt.Errorf("baseline pragmas: journal_mode %q, synchronous %d, err %v (want wal, 2)", mode, syncMode, err)
	}
	return db, nil
}

// rawCommits runs the physical baseline on db for d: transactions of one
// INSERT and one conditional UPDATE of the row it inserted (the shape of a
// preview followed by a claim), back to back from one goroutine. postgres
// selects $n placeholders.
func rawCommits(ctx context.Context, db *sql.DB, d time.Duration, postgres bool) (rawResult, error) {
	insert := `INSERT INTO bench_raw (id, status, payload) VALUES (?, 'pending', ?)`
	update := `UPDATE bench_raw SET status = 'applied' WHERE id = ? AND status = 'pending'`
	create := `CREATE TABLE IF NOT EXISTS bench_raw (id BIGINT PRIMARY KEY, status TEXT NOT NULL, payload TEXT NOT NULL)`
	if postgres {
		insert = `INSERT INTO bench_raw (id, status, payload) VALUES ($1, 'pending', $2)`
		update = `UPDATE bench_raw SET status = 'applied' WHERE id = $1 AND status = 'pending'`
	}
	if _, err := db.ExecContext(ctx, create); err != nil {
		return rawResult{}, fmt.Errorf("baseline table: %w", err)
	}
	var next int64
	if err := db.QueryRowContext(ctx, `SELECT COALESCE(MAX(id), 0) FROM bench_raw`).Scan(&next); err != nil {
		return rawResult{}, err
	}
	cpu0 := cpuTime()
	start := time.Now()
	n := 0
	for time.Since(start) < d {
		next++
		tx, err := db.BeginTx(ctx, nil)
		if err != nil {
			return rawResult{}, err
		}
		if _, err := tx.ExecContext(ctx, insert, next, rawPayload); err != nil {
			tx.Rollback()
			return rawResult{}, err
		}
		res, err := tx.ExecContext(ctx, update, next)
		if err != nil {
			tx.Rollback()
			return rawResult{}, err
		}
		if k, _ := res.RowsAffected(); k != 1 {
			tx.Rollback()
			return rawResult{}, fmt.Errorf("baseline: conditional update changed %d rows", k)
		}
		if err := tx.Commit(); err != nil {
			return rawResult{}, err
		}
		n++
	}
	return rawResult{Commits: n, Elapsed: time.Since(start), CPU: cpuTime() - cpu0}, nil
}
