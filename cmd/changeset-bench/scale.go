package main

import (
	"context"
	"crypto/rand"
	"database/sql"
	"encoding/hex"
	"errors"
	"fmt"
	"net/url"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"strings"
	"time"

	"github.com/mcp-changeset/changeset-go/ledger"
)

// The --scale mode: ledgers of a realistic mix (see scalegen.go) built
// through package ledger's API at two sizes, the base (10,000 changes
// unless --scale-base says otherwise) and N, and the pages and commands
// an operator uses timed on both, one row at a time, the base first, so
// that the ratio of the two compares like with like on a noisy machine.

// scaleOptions are the flags of --scale.
type scaleOptions struct {
	N    int    // --scale: the size measured
	Base int    // --scale-base: the size it is compared with
	CLI  string // --cli: a built mcp-changeset; "" builds one
	Keep bool   // --keep-ledgers: leave the ledgers behind
	// SkipSQLite (--skip-sqlite) measures PostgreSQL only.
	SkipSQLite bool
	Seed       uint64 // --scale-seed
	// MaxRuns (--scale-runs) is how many times a quick row is timed at
	// most.
	MaxRuns int
}

// check refuses sizes the builder cannot honour, and options that leave
// nothing to measure; postgres is the --postgres URL.
func (s *scaleOptions) check(postgres string) error {
	if s.N < scaleMinChanges || s.Base < scaleMinChanges {
		return fmt.Errorf("--scale and --scale-base must be at least %d changes (got %d and %d)", scaleMinChanges, s.N, s.Base)
	}
	if s.SkipSQLite && postgres == "" {
		return fmt.Errorf("--skip-sqlite leaves nothing to measure without --postgres")
	}
	if s.MaxRuns < 1 {
		return fmt.Errorf("--scale-runs must be at least 1, got %d", s.MaxRuns)
	}
	if s.N == s.Base {
		return fmt.Errorf("--scale %d is the same size as the base it is compared with; pick another (or set --scale-base)", s.N)
	}
	return nil
}

// scaleReport is what --scale measured; --json writes it.
type scaleReport struct {
	Command  string          `json:"command"`
	Started  time.Time       `json:"started"`
	Machine  machine         `json:"machine"`
	Base     int             `json:"base"`
	N        int             `json:"n"`
	Seed     uint64          `json:"seed"`
	MaxRuns  int             `json:"max_runs"`
	Backends []*scaleBackend `json:"backends"`
}

// scaleBackend is the measurement of one backend: its two ledgers (the
// base first) and a row per page or command.
type scaleBackend struct {
	Name    string            `json:"backend"`
	Ledgers [2]*scaleLedger   `json:"ledgers"`
	Rows    []*scaleRowResult `json:"rows"`
	Prune   [2]*pruneResult   `json:"prune"`
}

// scaleLedger is one built ledger.
type scaleLedger struct {
	Location string       `json:"location"`
	Size     int64        `json:"size_bytes"`
	Build    *buildResult `json:"build"`
}

// scaleRowResult is one row of the table: the same page or command on
// both ledgers.
type scaleRowResult struct {
	Key   string    `json:"key"`
	What  string    `json:"what"`
	Times [2]timing `json:"times"`
	// Ratio is the time at N over the time at the base.
	Ratio float64 `json:"ratio"`
}

// timing is the time of one row on one ledger: the median of Runs runs.
type timing struct {
	Median time.Duration `json:"median_ns"`
	Min    time.Duration `json:"min_ns"`
	Max    time.Duration `json:"max_ns"`
	Runs   int           `json:"runs"`
	// Bytes is the size of the page or of the command's output.
	Bytes int `json:"bytes"`
}

// pruneResult is what prune --older-than 30d --yes did to one ledger.
type pruneResult struct {
	WouldDelete int `json:"dry_run_changes"`
	Deleted     int `json:"deleted_changes"`
	DeletedRuns int `json:"deleted_runs"`
	// SizeBefore and SizeAfter are the ledger's size on disk (SQLite: the
	// file and its write-ahead log; PostgreSQL: the schema's tables,
	// indexes and TOAST).
	SizeBefore int64 `json:"size_before_bytes"`
	SizeAfter  int64 `json:"size_after_bytes"`
	// FreeBefore and FreeAfter are the bytes of the file's free pages
	// (SQLite only): space freed inside the file but not given back.
	FreeBefore int64 `json:"free_before_bytes,omitempty"`
	FreeAfter  int64 `json:"free_after_bytes,omitempty"`
	// Returned is the share of the space prune freed that went back to
	// the disk: shrink / (shrink + growth of the free pages). SQLite only;
	// -1 when prune freed nothing.
	Returned float64 `json:"returned"`
}

// runScale runs the --scale mode and prints its tables.
func runScale(ctx context.Context, o *options, args []string, prog *progress) (*scaleReport, error) {
	s := &o.scale
	if err := s.check(o.postgres); err != nil {
		return nil, err
	}
	rep := &scaleReport{
		Command: "changeset-bench " + strings.Join(redact(args), " "),
		Started: time.Now().UTC(),
		Machine: machine{CPU: cpuModel(), Cores: runtime.NumCPU(), Kernel: kernel(), GoVersion: runtime.Version(),
			Dir: o.dir, FSType: fsType(o.dir), LoadBefore: loadAverage()},
		Base: s.Base, N: s.N, Seed: s.Seed, MaxRuns: s.MaxRuns,
	}
	work, err := os.MkdirTemp(o.dir, "changeset-bench-scale-")
	if err != nil {
		return nil, err
	}
	if !s.Keep {
		defer os.RemoveAll(work)
	}
	cli := s.CLI
	if cli == "" {
		prog.begin("building mcp-changeset", 0)
		if cli, err = buildCLI(ctx, work); err != nil {
			return nil, err
		}
	}
	sizes := [2]int{s.Base, s.N}
	sqliteTargets := [2]string{filepath.Join(work, fmt.Sprintf("ledger-%d.db", s.Base)), filepath.Join(work, fmt.Sprintf("ledger-%d.db", s.N))}
	if !s.SkipSQLite {
		be, err := measureBackend(ctx, "sqlite", sizes, sqliteTargets, s, cli, prog, sqliteSpace)
		if err != nil {
			return nil, err
		}
		rep.Backends = append(rep.Backends, be)
	}
	if o.postgres != "" {
		targets, admin, drop, err := postgresTargets(ctx, o.postgres, sizes)
		if err != nil {
			return nil, err
		}
		defer func() {
			if !s.Keep {
				drop()
			}
			admin.Close()
		}()
		be, err := measureBackend(ctx, "postgres", sizes, targets, s, cli, prog, postgresSpace(admin))
		if err != nil {
			return nil, err
		}
		for i := range be.Ledgers {
			be.Ledgers[i].Location = redactURL(targets[i])
		}
		rep.Backends = append(rep.Backends, be)
	}
	if s.Keep {
		fmt.Fprintf(os.Stderr, "changeset-bench: the ledgers are kept in %s (and the PostgreSQL schemas named in the report)\n", work)
	}
	rep.Machine.LoadAfter = loadAverage()
	return rep, nil
}

// spaceFunc measures a ledger's size on disk and, where the backend can
// say, the bytes of its free pages.
type spaceFunc func(ctx context.Context, target string) (size, free int64, err error)

// measureBackend builds both ledgers of one backend and measures every
// row on them.
func measureBackend(ctx context.Context, name string, sizes [2]int, targets [2]string, s *scaleOptions, cli string,
	prog *progress, space spaceFunc) (*scaleBackend, error) {
	be := &scaleBackend{Name: name}
	var subjects [2]*scaleSubject
	defer func() {
		for _, sub := range subjects {
			if sub != nil {
				sub.close()
			}
		}
	}()
	for i, n := range sizes {
		b, err := buildAt(ctx, name, targets[i], n, s.Seed, prog)
		if err != nil {
			return nil, err
		}
		size, _, err := space(ctx, targets[i])
		if err != nil {
			return nil, err
		}
		be.Ledgers[i] = &scaleLedger{Location: targets[i], Size: size, Build: b}
		if subjects[i], err = newScaleSubject(ctx, targets[i], n, b, cli); err != nil {
			return nil, err
		}
	}
	rows := scaleRows()
	for _, row := range rows {
		if row.destructive {
			continue
		}
		if row.cli && subjects[0].l != nil { // the commands run with the ledger closed here
			for _, sub := range subjects {
				sub.close()
			}
		}
		prog.begin(fmt.Sprintf("%s: %s", name, row.key), 0)
		times, err := timePair(ctx, subjects, row, s.MaxRuns)
		if err != nil {
			return nil, fmt.Errorf("%s, %s: %w", name, row.key, err)
		}
		res := &scaleRowResult{Key: row.key, What: row.what(subjects[1].build), Times: times}
		res.Ratio = float64(res.Times[1].Median) / float64(max(res.Times[0].Median, 1))
		be.Rows = append(be.Rows, res)
	}
	// Prune last: it changes the ledgers.
	for _, row := range rows {
		if !row.destructive {
			continue
		}
		res := &scaleRowResult{Key: row.key, What: row.what(subjects[1].build)}
		for i, sub := range subjects {
			prog.begin(fmt.Sprintf("%s, %d changes: %s", name, sub.n, row.key), 0)
			p := &pruneResult{Returned: -1}
			var err error
			if p.SizeBefore, p.FreeBefore, err = space(ctx, sub.target); err != nil {
				return nil, err
			}
			p.WouldDelete = sub.wouldDelete
			start := time.Now()
			n, err := row.run(ctx, sub)
			d := time.Since(start)
			if err != nil {
				return nil, fmt.Errorf("%s, %d changes, %s: %w", name, sub.n, row.key, err)
			}
			t := timing{Median: d, Min: d, Max: d, Runs: 1, Bytes: n}
			p.Deleted, p.DeletedRuns = parsePruned(sub.output)
			if p.SizeAfter, p.FreeAfter, err = space(ctx, sub.target); err != nil {
				return nil, err
			}
			shrink, freed := p.SizeBefore-p.SizeAfter, p.FreeAfter-p.FreeBefore
			if name == "sqlite" && shrink+freed > 0 {
				p.Returned = float64(shrink) / float64(shrink+freed)
			}
			res.Times[i], be.Prune[i] = t, p
		}
		res.Ratio = float64(res.Times[1].Median) / float64(max(res.Times[0].Median, 1))
		be.Rows = append(be.Rows, res)
	}
	return be, nil
}

// parsePruned reads the counts of prune's last line, "deleted 1 change
// and 3 runs …", whatever the plurals.
func parsePruned(out string) (changes, runs int) {
	for line := range strings.Lines(out) {
		var c, r int
		var cw, rw string
		if n, _ := fmt.Sscanf(line, "deleted %d %s and %d %s", &c, &cw, &r, &rw); n == 4 {
			return c, r
		}
	}
	return -1, -1
}

// buildAt creates the ledger at target and builds a ledger of n changes
// in it.
func buildAt(ctx context.Context, backend, target string, n int, seed uint64, prog *progress) (*buildResult, error) {
	l, err := ledger.Open(ctx, target, ledger.OpenOptions{Create: true})
	if err != nil {
		return nil, err
	}
	defer l.Close()
	if c, err := l.CountChanges(ctx, ledger.ChangeFilter{}); err != nil || c > 0 {
		return nil, fmt.Errorf("%s is not empty (%d changes, %v): give a new place for the ledger", redactURL(target), c, err)
	}
	prog.begin(fmt.Sprintf("%s: building a ledger of %d changes", backend, n), 0)
	start := time.Now()
	return buildLedger(ctx, l, n, seed, time.Now(), func(done int) {
		if el := time.Since(start).Seconds(); el > 0 && done > 0 {
			prog.note(fmt.Sprintf("%d of %d, %.0f changes/s", done, n, float64(done)/el))
		}
	})
}

// buildCLI compiles mcp-changeset into dir.
func buildCLI(ctx context.Context, dir string) (string, error) {
	bin := filepath.Join(dir, "mcp-changeset")
	cmd := exec.CommandContext(ctx, "go", "build", "-o", bin, "github.com/mcp-changeset/changeset-go/cmd/mcp-changeset")
	if out, err := cmd.CombinedOutput(); err != nil {
		return "", fmt.Errorf("go build of mcp-changeset (run from within the module, or give one with --cli): %v\n%s", err, out)
	}
	return bin, nil
}

// sqliteSpace returns the size of a SQLite ledger (the file and its
// write-ahead log) and the bytes of its free pages.
func sqliteSpace(ctx context.Context, path string) (size, free int64, err error) {
	for _, p := range []string{path, path + "-wal"} {
		fi, err := os.Stat(p)
		if errors.Is(err, os.ErrNotExist) {
			continue
		}
		if err != nil {
			return 0, 0, err
		}
		size += fi.Size()
	}
	abs, err := filepath.Abs(path)
	if err != nil {
		return 0, 0, err
	}
	db, err := sql.Open("sqlite", "file:"+escapePath(filepath.ToSlash(abs))+"?mode=ro&_pragma=busy_timeout(5000)")
	if err != nil {
		return 0, 0, err
	}
	defer db.Close()
	var pages, pageSize int64
	if err := db.QueryRowContext(ctx, "PRAGMA freelist_count").Scan(&pages); err != nil {
		return 0, 0, fmt.Errorf("free pages of %s: %w", path, err)
	}
	if err := db.QueryRowContext(ctx, "PRAGMA page_size").Scan(&pageSize); err != nil {
		return 0, 0, err
	}
	return size, pages * pageSize, nil
}

// postgresTargets makes the URLs of two fresh schemas in the database at
// base, one per size, and returns a connection for measuring them and a
// function that drops them.
func postgresTargets(ctx context.Context, base string, sizes [2]int) (targets [2]string, admin *sql.DB, drop func(), err error) {
	u, err := url.Parse(base)
	if err != nil {
		return targets, nil, nil, fmt.Errorf("--postgres: the URL cannot be parsed")
	}
	if u.Query().Get("changeset_schema") != "" {
		return targets, nil, nil, fmt.Errorf("--postgres: with --scale, give the database without changeset_schema: the bench makes a fresh schema for each ledger")
	}
	b := make([]byte, 4)
	rand.Read(b)
	var schemas []string
	for i, n := range sizes {
		schema := fmt.Sprintf("changeset_scale_%s_%d", hex.EncodeToString(b), n)
		q := u.Query()
		q.Set("changeset_schema", schema)
		v := *u
		v.RawQuery = q.Encode()
		targets[i] = v.String()
		schemas = append(schemas, schema)
	}
	// The first ledger's connection serves for the sizes and the drop.
	l, err := ledger.Open(ctx, targets[0], ledger.OpenOptions{Create: true})
	if err != nil {
		return targets, nil, nil, fmt.Errorf("postgres: %w", err)
	}
	drop = func() {
		for _, s := range schemas {
			l.DB().ExecContext(context.WithoutCancel(ctx), "DROP SCHEMA IF EXISTS "+s+" CASCADE")
		}
	}
	return targets, l.DB(), drop, nil
}

// postgresSpace returns the size of a PostgreSQL ledger's schema: its
// tables with their indexes and TOAST. Free space is not reported.
func postgresSpace(db *sql.DB) spaceFunc {
	return func(ctx context.Context, target string) (int64, int64, error) {
		u, err := url.Parse(target)
		if err != nil {
			return 0, 0, err
		}
		var size int64
		err = db.QueryRowContext(ctx, `SELECT COALESCE(sum(pg_total_relation_size(c.oid)), 0)::bigint
			FROM pg_class c JOIN pg_namespace n ON n.oid = c.relnamespace
			WHERE n.nspname = $1 AND c.relkind = 'r'`, u.Query().Get("changeset_schema")).Scan(&size)
		return size, 0, err
	}
}

// redactURL hides a password in a postgres:// target; paths are returned
// as they are.
func redactURL(target string) string {
	if u, err := url.Parse(target); err == nil && u.User != nil {
		return u.Redacted()
	}
	return target
}

// scaleMain runs --scale and prints (and with --json writes) its report.
func scaleMain(ctx context.Context, o *options, args []string, prog *progress) error {
	rep, err := runScale(ctx, o, args, prog)
	prog.close()
	if err != nil {
		return err
	}
	rep.print(os.Stdout)
	if o.jsonPath != "" {
		return rep.writeJSON(o.jsonPath)
	}
	return nil
}
