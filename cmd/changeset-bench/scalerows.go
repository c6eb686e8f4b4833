package main

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"net/http"
	"net/http/httptest"
	"net/url"
	"os/exec"
	"slices"
	"strconv"
	"time"

	changeset "github.com/mcp-changeset/changeset-go"
	"github.com/mcp-changeset/changeset-go/dashboard"
	"github.com/mcp-changeset/changeset-go/ledger"
)

// scaleSubject is one built ledger under measurement: the dashboard of a
// Guard on it (in this process, as a server mounts it), and the
// mcp-changeset command that the command rows run against it.
type scaleSubject struct {
	n      int
	target string
	build  *buildResult
	cli    string

	l       *ledger.Ledger // nil once closed for the commands
	guard   *changeset.Guard
	dash    http.Handler
	cookies []*http.Cookie

	lookup      int    // the next of build.Lookups to look up
	output      string // what the last command printed
	wouldDelete int    // what the prune dry run said it would delete
}

// scaleLoginToken logs the measurements into the dashboard.
const scaleLoginToken = "changeset-bench-scale-login"

func newScaleSubject(ctx context.Context, target string, n int, b *buildResult, cli string) (*scaleSubject, error) {
	s := &scaleSubject{n: n, target: target, build: b, cli: cli}
	var err error
	if s.l, err = ledger.Open(ctx, target, ledger.OpenOptions{}); err != nil {
		return nil, err
	}
	if s.guard, err = changeset.New(nil, changeset.Options{Ledger: s.l}); err != nil {
		s.close()
		return nil, err
	}
	d, err := dashboard.New(s.guard, dashboard.Options{LoginToken: scaleLoginToken})
	if err != nil {
		s.close()
		return nil, err
	}
	s.dash = d
	rec := httptest.NewRecorder()
	d.ServeHTTP(rec, httptest.NewRequestWithContext(ctx, http.MethodGet, "/login?token="+url.QueryEscape(scaleLoginToken), nil))
	if rec.Code != http.StatusSeeOther {
		s.close()
		return nil, fmt.Errorf("dashboard login: %d", rec.Code)
	}
	s.cookies = rec.Result().Cookies()
	return s, nil
}

// close closes the ledger (the commands then have the file to
// themselves).
func (s *scaleSubject) close() {
	if s.l == nil {
		return
	}
	if s.guard != nil {
		s.guard.Close()
	}
	s.l.Close()
	s.l = nil
}

// get requests a dashboard page and returns its size; anything but 200
// is an error.
func (s *scaleSubject) get(ctx context.Context, path string) (int, error) {
	if s.l == nil {
		return 0, errors.New("the ledger is closed")
	}
	req := httptest.NewRequestWithContext(ctx, http.MethodGet, path, nil)
	for _, c := range s.cookies {
		req.AddCookie(c)
	}
	rec := httptest.NewRecorder()
	s.dash.ServeHTTP(rec, req)
	if rec.Code != http.StatusOK {
		return 0, fmt.Errorf("GET %s: %d: %.300s", path, rec.Code, rec.Body.String())
	}
	return rec.Body.Len(), nil
}

// command runs mcp-changeset with args (the subcommand first) on the
// ledger and returns the size of its output; an exit status other than
// want is an error.
func (s *scaleSubject) command(ctx context.Context, want int, args ...string) (int, error) {
	full := append([]string{args[0], "--ledger", s.target}, args[1:]...)
	cmd := exec.CommandContext(ctx, s.cli, full...)
	var out, stderr bytes.Buffer
	cmd.Stdout, cmd.Stderr = &out, &stderr
	err := cmd.Run()
	code := 0
	var exit *exec.ExitError
	if errors.As(err, &exit) {
		code = exit.ExitCode()
	} else if err != nil {
		return 0, err
	}
	if code != want {
		return 0, fmt.Errorf("mcp-changeset %s exited with %d, want %d: %.500s", args[0], code, want, stderr.String())
	}
	s.output = out.String()
	return out.Len(), nil
}

// scaleRow is one row of the table: a page or a command, timed on each
// ledger.
type scaleRow struct {
	key string
	// what names the row in the table; b is the larger ledger's build.
	what func(b *buildResult) string
	// cli rows run mcp-changeset, with the in-process ledger closed;
	// destructive ones run once, last.
	cli, destructive bool
	run              func(ctx context.Context, s *scaleSubject) (bytes int, err error)
}

// Exit statuses of mcp-changeset.
const (
	exitOK     = 0
	exitDryRun = 2
)

// scaleRows lists the rows in the order they are measured: in-process
// first (opening, lookups, dashboard pages), then the commands, prune
// last.
func scaleRows() []scaleRow {
	p := scaleProbes
	page := func(key, what string, path func(s *scaleSubject) string) scaleRow {
		return scaleRow{key: key, what: func(*buildResult) string { return what },
			run: func(ctx context.Context, s *scaleSubject) (int, error) { return s.get(ctx, path(s)) }}
	}
	fixed := func(path string) func(*scaleSubject) string { return func(*scaleSubject) string { return path } }
	list := func(key, flag, value, kind string) scaleRow {
		return scaleRow{key: key, cli: true, what: func(*buildResult) string {
			return fmt.Sprintf("`list --%s %s` (%s)", flag, value, kind)
		}, run: func(ctx context.Context, s *scaleSubject) (int, error) {
			return s.command(ctx, exitOK, "list", "--"+flag, value)
		}}
	}
	return []scaleRow{
		{key: "open-read-only", what: func(*buildResult) string { return "opening the ledger read-only (every CLI command)" },
			run: func(ctx context.Context, s *scaleSubject) (int, error) {
				l, err := ledger.Open(ctx, s.target, ledger.OpenOptions{ReadOnly: true})
				if err != nil {
					return 0, err
				}
				return 0, l.Close()
			}},
		{key: "open-read-write", what: func(*buildResult) string { return "opening the ledger read-write (every server start)" },
			run: func(ctx context.Context, s *scaleSubject) (int, error) {
				l, err := ledger.Open(ctx, s.target, ledger.OpenOptions{Create: true})
				if err != nil {
					return 0, err
				}
				return 0, l.Close()
			}},
		{key: "lookup", what: func(*buildResult) string { return "an indexed lookup: `Ledger.Change` by ID" },
			run: func(ctx context.Context, s *scaleSubject) (int, error) {
				id := s.build.Lookups[s.lookup%len(s.build.Lookups)]
				s.lookup++
				_, err := s.l.Change(ctx, id)
				return 0, err
			}},
		page("page-changes", "dashboard `/changes` (the newest page)", fixed("/changes")),
		page("page-changes-cursor", "cursor paging: dashboard `/changes?before=…` halfway down", func(s *scaleSubject) string {
			m := s.build.Middle
			return "/changes?before=" + strconv.FormatInt(m.CreatedAt.UnixMicro(), 10) + "." + m.ID
		}),
		page("page-q-common", "dashboard `q="+p.TextCommon+"` (text search, common word)", fixed("/changes?q="+p.TextCommon)),
		page("page-q-rare", fmt.Sprintf("dashboard `q=%s` (text search, %d changes)", p.TextRare, scaleRare), fixed("/changes?q="+p.TextRare)),
		page("page-q-absent", "dashboard `q="+p.TextAbsent+"` (text search, no change)", fixed("/changes?q="+p.TextAbsent)),
		page("page-runs", "dashboard `/` (runs, the newest page)", fixed("/")),
		page("page-runs-cursor", "cursor paging: dashboard `/?before=…` (runs) halfway down", func(s *scaleSubject) string {
			return "/?before=" + s.build.MiddleRun.ID
		}),
		page("page-run", fmt.Sprintf("the run page: dashboard `/runs/{id}` (%d changes)", scaleRunSize), func(s *scaleSubject) string {
			return "/runs/" + s.build.TypicalRun
		}),
		page("page-change", "dashboard `/changes/{id}` (a change and its history)", func(s *scaleSubject) string {
			return "/changes/" + s.build.Middle.ID
		}),
		{key: "verify", what: func(*buildResult) string {
			return "`Ledger.Verify` (every history entry hashed again, every row against its history: `verify`)"
		}, run: func(ctx context.Context, s *scaleSubject) (int, error) {
			v, err := s.l.Verify(ctx, ledger.VerifyOptions{})
			if err == nil && !v.OK() {
				err = fmt.Errorf("verify found problems in the built ledger: %q", v.Problems)
			}
			return 0, err
		}},
		{key: "cli-show", cli: true, what: func(*buildResult) string { return "`show ID` (a command that reads one row)" },
			run: func(ctx context.Context, s *scaleSubject) (int, error) {
				return s.command(ctx, exitOK, "show", s.build.Middle.ID)
			}},
		list("cli-by-common", "by", p.ByCommon, "common"),
		list("cli-by-rare", "by", p.ByRare, fmt.Sprintf("%d changes", scaleRare)),
		list("cli-by-absent", "by", p.ByAbsent, "absent"),
		list("cli-action-common", "action", p.ActionCommon, "common"),
		list("cli-action-rare", "action", p.ActionRare, fmt.Sprintf("%d changes", scaleRare)),
		list("cli-action-absent", "action", p.ActionAbsent, "absent"),
		{key: "cli-expire", cli: true, what: func(b *buildResult) string {
			return fmt.Sprintf("`expire` (dry run; %s pending, all stale)", thousands(b.ByStatus[ledger.Pending]))
		}, run: func(ctx context.Context, s *scaleSubject) (int, error) {
			return s.command(ctx, exitDryRun, "expire")
		}},
		{key: "cli-check", cli: true, what: func(*buildResult) string { return "`check`" },
			run: func(ctx context.Context, s *scaleSubject) (int, error) {
				n, err := s.command(ctx, exitOK, "check")
				if err == nil && s.output != "ok\n" {
					err = fmt.Errorf("check found problems in the built ledger: %.500s", s.output)
				}
				return n, err
			}},
		{key: "cli-prune-dry", cli: true, what: func(*buildResult) string { return "`prune --older-than 30d` (dry run)" },
			run: func(ctx context.Context, s *scaleSubject) (int, error) {
				n, err := s.command(ctx, exitDryRun, "prune", "--older-than", "30d")
				if err == nil {
					var changes int
					var word string
					if _, err := fmt.Sscanf(s.output, "would delete %d %s", &changes, &word); err == nil {
						s.wouldDelete = changes
					}
				}
				return n, err
			}},
		{key: "cli-prune", cli: true, destructive: true, what: func(*buildResult) string { return "`prune --older-than 30d --yes`" },
			run: func(ctx context.Context, s *scaleSubject) (int, error) {
				return s.command(ctx, exitOK, "prune", "--older-than", "30d", "--yes")
			}},
	}
}

// timePair times row on both ledgers, alternating between them run by
// run so that both meet the same load on a shared machine: the median
// of up to maxRuns runs (within about four seconds in all) for what is
// quick, one run for what takes seconds or changes the ledger.
func timePair(ctx context.Context, subjects [2]*scaleSubject, row scaleRow, maxRuns int) ([2]timing, error) {
	const (
		budget = 4 * time.Second // keep repeating quick runs this long in all
		slow   = 3 * time.Second // a run this long is not repeated
	)
	var (
		out   [2]timing
		runs  [2][]time.Duration
		done  [2]bool
		total time.Duration
	)
	for !done[0] || !done[1] {
		for i, s := range subjects {
			if done[i] {
				continue
			}
			if err := ctx.Err(); err != nil {
				return out, err
			}
			start := time.Now()
			n, err := row.run(ctx, s)
			d := time.Since(start)
			if err != nil {
				return out, fmt.Errorf("%d changes: %w", s.n, err)
			}
			out[i].Bytes = n
			runs[i] = append(runs[i], d)
			total += d
			done[i] = row.destructive || d >= slow || len(runs[i]) >= maxRuns || len(runs[i]) >= 3 && total >= budget
		}
	}
	for i := range out {
		r := runs[i]
		slices.Sort(r)
		out[i].Median, out[i].Min, out[i].Max, out[i].Runs = r[len(r)/2], r[0], r[len(r)-1], len(r)
	}
	return out, nil
}

// thousands writes n with thousands separators: 1,000,000.
func thousands(n int) string {
	s := strconv.Itoa(n)
	if n < 0 {
		return "-" + thousands(-n)
	}
	for i := len(s) - 3; i > 0; i -= 3 {
		s = s[:i] + "," + s[i:]
	}
	return s
}
