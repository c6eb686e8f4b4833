package postgres_test

import (
	"context"
	"crypto/rand"
	"database/sql"
	"errors"
	"fmt"
	"net/url"
	"regexp"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/jackc/pgx/v5/pgconn"
	changeset "github.com/mcp-changeset/changeset-go"
	"github.com/mcp-changeset/changeset-go/changesettest"
	"github.com/mcp-changeset/changeset-go/internal/pgtest"
	"github.com/mcp-changeset/changeset-go/ledger"
	"github.com/mcp-changeset/changeset-go/ledger/postgres"
	"github.com/modelcontextprotocol/go-sdk/mcp"
)

// grantsFixture is a database whose ledger, in the schema notes, its
// owner created; roles made by newRole get what a test grants them.
type grantsFixture struct {
	target string  // the ledger's URL, logging in as the owner
	admin  *sql.DB // the owner's connection
}

func newGrantsFixture(t *testing.T) *grantsFixture {
	t.Helper()
	dsn := pgtest.DSN(t)
	target := withParam(t, dsn, "changeset_schema", "notes")
	b, err := postgres.Open(context.Background(), target, ledger.OpenOptions{Create: true})
	if err != nil {
		t.Fatal(err)
	}
	b.Close()
	return &grantsFixture{target: target, admin: rawDB(t, dsn)}
}

// newRole creates a login role that lives until t ends and returns its
// name and the ledger's URL logging in as it. It skips the test on a
// server where the test's user may not create roles.
func (f *grantsFixture) newRole(t *testing.T, prefix string) (name, target string) {
	t.Helper()
	name = prefix + "_" + strings.ToLower(rand.Text()[:10])
	password := rand.Text()
	if _, err := f.admin.Exec(fmt.Sprintf(`CREATE ROLE %s LOGIN PASSWORD '%s'`, name, password)); err != nil {
		var pe *pgconn.PgError
		if errors.As(err, &pe) && pe.Code == "42501" {
			t.Skipf("the test server's user may not create roles (CREATEROLE), which this test needs: %v", err)
		}
		t.Fatal(err)
	}
	t.Cleanup(func() {
		mustExec(t, f.admin, `DROP OWNED BY `+name) // the privileges granted in this database
		mustExec(t, f.admin, `DROP ROLE `+name)
	})
	u, err := url.Parse(f.target)
	if err != nil {
		t.Fatal(err)
	}
	u.User = url.UserPassword(name, password)
	return name, u.String()
}

// grant runs statements, written for the role docRole, for role.
func (f *grantsFixture) grant(t *testing.T, statements, docRole, role string) {
	t.Helper()
	for line := range strings.Lines(statements) {
		if line = strings.TrimSpace(line); line != "" {
			mustExec(t, f.admin, strings.Replace(line, " TO "+docRole+";", " TO "+role+";", 1))
		}
	}
}

// items is the state the test's operation changes: values by key.
type items struct {
	mu sync.Mutex
	m  map[string]string
}

// get returns the item's value, nil when there is none.
func (s *items) get(key string) any {
	s.mu.Lock()
	defer s.mu.Unlock()
	if v, ok := s.m[key]; ok {
		return v
	}
	return nil
}

// set sets the item's value, or deletes it when value is nil, and
// returns what was there.
func (s *items) set(key string, value any) (previous any) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if v, ok := s.m[key]; ok {
		previous = v
	}
	if value == nil {
		delete(s.m, key)
	} else {
		s.m[key] = value.(string)
	}
	return previous
}

// item is put_item's payload: a value, a secret the ledger redacts once
// the change is over (which writes the redaction key to meta) and the
// items the change relies on (rows of change_deps).
type item struct {
	Key    string   `json:"key"`
	Value  string   `json:"value"`
	Secret string   `json:"secret" changeset:"redact"`
	Needs  []string `json:"needs,omitempty"`
}

// registerItems registers put_item, which creates or sets an item; its
// undo puts back what was there, deleting an item it created.
func registerItems(g *changesettest.Guard, s *items) {
	op := changeset.Operation[item, item, any]{
		Preview: func(ctx context.Context, in item) (*changeset.Proposal[item], error) {
			var deps []string
			for _, n := range in.Needs {
				deps = append(deps, "item:"+n)
			}
			return &changeset.Proposal[item]{
				Payload:   in,
				Summary:   "Set " + in.Key,
				Resource:  "item:" + in.Key,
				DependsOn: deps,
				Diff:      changeset.DiffFields(map[string]any{"value": s.get(in.Key)}, map[string]any{"value": in.Value}),
			}, nil
		},
		Apply: func(ctx context.Context, p item) (any, error) { return s.set(p.Key, p.Value), nil },
		Undo: func(ctx context.Context, p item, previous any) error {
			s.set(p.Key, previous)
			return nil
		},
		Observe: func(ctx context.Context, p item) (any, error) {
			return s.get(p.Key), nil
		},
	}
	changeset.Register(g.Guard, &mcp.Tool{Name: "put_item", Description: "Set an item."}, op)
}

// The server's role, given exactly the grants docs/postgres.md lists,
// runs everything the library does: a preview, its apply and its undo; a
// run of changes that depend on each other, undone as a whole; expiry of
// a stale preview; the history, the check, and a prune that deletes it
// all. The operator's read-only role, given exactly its grants, reads
// and checks the ledger.
func TestPrivileges_TheDocumentedGrantsAreEnough(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	f := newGrantsFixture(t)
	role, target := f.newRole(t, "app")
	f.grant(t, postgres.DocGrants(t, "app"), "app", role)

	g := changesettest.NewGuard(t, changeset.Options{LedgerPath: target})
	store := &items{m: map[string]string{"a": "0"}}
	registerItems(g, store)

	// One change: preview, apply, undo.
	p, err := g.Preview("put_item", item{Key: "a", Value: "1", Secret: "s3cret"})
	if err != nil {
		t.Fatal(err)
	}
	a, err := g.Apply(p)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := g.Undo(a); err != nil {
		t.Fatal(err)
	}
	if store.get("a") != "0" {
		t.Fatalf("after the undo a = %v", store.get("a"))
	}

	// A run: two changes that create items, the second relying on the
	// first, undone together after a dry run (which looks for changes
	// that depend on what the undo removes).
	var run struct {
		RunID string `json:"run_id"`
	}
	if err := g.Call("start_run", map[string]any{"label": "grants"}, &run); err != nil {
		t.Fatal(err)
	}
	for _, in := range []map[string]any{
		{"key": "c", "value": "2", "secret": "x", "run_id": run.RunID},
		{"key": "d", "value": "3", "secret": "y", "needs": []string{"c"}, "run_id": run.RunID},
	} {
		p, err := g.Preview("put_item", in)
		if err != nil {
			t.Fatal(err)
		}
		if _, err := g.Apply(p); err != nil {
			t.Fatal(err)
		}
	}
	var dry struct {
		Token string `json:"confirmation_token"`
	}
	if err := g.Call("undo_run", map[string]any{"run_id": run.RunID}, &dry); err != nil {
		t.Fatal(err)
	}
	var undone struct {
		Status string `json:"status"`
	}
	if err := g.Call("undo_run", map[string]any{"run_id": run.RunID, "dry_run": false, "confirmation_token": dry.Token}, &undone); err != nil {
		t.Fatal(err)
	}
	if undone.Status != "undone" || store.get("c") != nil || store.get("d") != nil {
		t.Fatalf("the run's undo: %s, c = %v, d = %v", undone.Status, store.get("c"), store.get("d"))
	}

	// A preview left alone expires.
	if _, err := g.Preview("put_item", item{Key: "a", Value: "4"}); err != nil {
		t.Fatal(err)
	}
	g.Clock.Advance(24 * time.Hour)
	l := g.Guard.Ledger()
	if expired, err := l.ExpireStale(ctx); err != nil || len(expired) != 1 {
		t.Fatalf("ExpireStale = %v, %v; want one change", expired, err)
	}

	// What the role wrote, seen by the owner: dependencies, history and
	// the redaction key.
	var deps, history, keys int
	if err := f.admin.QueryRow(`SELECT (SELECT count(*) FROM notes.change_deps), (SELECT count(*) FROM notes.ledger_history),
		(SELECT count(*) FROM notes.meta WHERE key LIKE '%redact%')`).Scan(&deps, &history, &keys); err != nil {
		t.Fatal(err)
	}
	if deps != 1 || history == 0 || keys != 1 {
		t.Fatalf("change_deps %d rows, ledger_history %d, redaction keys %d; want 1, some, 1", deps, history, keys)
	}
	if entries, err := l.History(ctx, ledger.HistoryFilter{RunID: run.RunID}); err != nil || len(entries) == 0 {
		t.Fatalf("History of the run = %d entries, %v", len(entries), err)
	}
	if problems, err := l.Check(ctx); err != nil || len(problems) > 0 {
		t.Fatalf("Check = %q, %v", problems, err)
	}

	// The operator's read-only role reads and checks it.
	ops, opsTarget := f.newRole(t, "ops")
	f.grant(t, postgres.DocGrants(t, "ops"), "ops", ops)
	ro, err := ledger.Open(ctx, opsTarget, ledger.OpenOptions{ReadOnly: true})
	if err != nil {
		t.Fatal(err)
	}
	defer ro.Close()
	if changes, err := ro.Changes(ctx, ledger.ChangeFilter{}); err != nil || len(changes) != 4 {
		t.Fatalf("the read-only role's ListChanges = %d changes, %v; want 4", len(changes), err)
	}
	if changes, err := ro.Changes(ctx, ledger.ChangeFilter{DependsOn: "item:c"}); err != nil || len(changes) != 1 {
		t.Fatalf("the read-only role's ListChanges(DependsOn) = %d changes, %v; want 1", len(changes), err)
	}
	if runs, err := ro.Runs(ctx, ledger.RunFilter{}); err != nil || len(runs) != 2 {
		t.Fatalf("the read-only role's ListRuns = %d runs, %v; want 2 (the session's and the task's)", len(runs), err)
	}
	if problems, err := ro.Check(ctx); err != nil || len(problems) > 0 {
		t.Fatalf("the read-only role's Check = %q, %v", problems, err)
	}

	// Prune, as the server's role, deletes it all, with its history.
	g.Clock.Advance(time.Second) // past the expiry: Prune takes rows updated before now
	res, err := l.Prune(ctx, ledger.PruneOptions{By: "operator:test"})
	if err != nil {
		t.Fatal(err)
	}
	if len(res.Changes) != 4 || len(res.Runs) != 2 {
		t.Fatalf("Prune deleted %d changes and %d runs, want 4 and 2", len(res.Changes), len(res.Runs))
	}
	if err := f.admin.QueryRow(`SELECT (SELECT count(*) FROM notes.change_deps), (SELECT count(*) FROM notes.ledger_history WHERE to_status <> 'pruned')`).Scan(&deps, &history); err != nil {
		t.Fatal(err)
	}
	if deps != 0 || history != 0 {
		t.Fatalf("after Prune: change_deps %d rows, history %d entries of changes and runs; want none", deps, history)
	}
}

// grantStatement is one GRANT of an error message.
var grantStatement = regexp.MustCompile(`GRANT [^;]*;`)

// Open refuses a role that lacks a privilege the ledger needs, naming
// each one and the GRANT that gives it, instead of opening a ledger whose
// first preview would fail; the GRANTs it names are all that is missing.
func TestOpen_NamesEachMissingPrivilege(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	f := newGrantsFixture(t)
	for _, tc := range []struct {
		name     string
		grants   string // for the role "app"
		readOnly bool
		want     []string // what the error must name
	}{{
		name: "the grants docs/postgres.md gave before change_deps and ledger_history",
		grants: `GRANT USAGE ON SCHEMA notes TO app;
			GRANT SELECT, INSERT, UPDATE, DELETE ON notes.changes, notes.runs, notes.meta TO app;
			GRANT SELECT ON notes.changeset_migrations TO app;`,
		want: []string{"lacks SELECT, INSERT on notes.change_deps; SELECT, INSERT, DELETE on notes.ledger_history; SELECT, INSERT on notes.ledger_history_pruned;",
			"GRANT SELECT, INSERT ON notes.change_deps, notes.ledger_history_pruned, notes.ledger_decisions TO ", "GRANT SELECT, INSERT, DELETE ON notes.ledger_history TO "},
	}, {
		name:   "the operator's read-only grants, opened to write",
		grants: strings.ReplaceAll(postgres.DocGrants(t, "ops"), " TO ops;", " TO app;"),
		want:   []string{"INSERT, UPDATE, DELETE on notes.changes;", "INSERT, UPDATE, DELETE on notes.runs;", "SELECT, INSERT on notes.meta;", "INSERT, DELETE on notes.ledger_history;", "INSERT on notes.ledger_history_pruned;"},
	}, {
		name:   "every table but not the schema",
		grants: strings.Replace(postgres.DocGrants(t, "app"), "GRANT USAGE ON SCHEMA notes TO app;\n", "", 1),
		want:   []string{"lacks USAGE on schema notes; as", "run: GRANT USAGE ON SCHEMA notes TO "},
	}, {
		name:     "the schema alone, opened read-only",
		grants:   `GRANT USAGE ON SCHEMA notes TO app;`,
		readOnly: true,
		want:     []string{"for a read-only open", "GRANT SELECT ON notes.changes, notes.runs, notes.change_deps, notes.ledger_history, notes.ledger_history_pruned, notes.ledger_approvals, notes.ledger_decisions, notes.changeset_migrations TO "},
	}} {
		t.Run(tc.name, func(t *testing.T) {
			role, target := f.newRole(t, "app")
			f.grant(t, tc.grants, "app", role)
			opts := ledger.OpenOptions{ReadOnly: tc.readOnly}
			_, err := postgres.Open(ctx, target, opts)
			if !errors.Is(err, postgres.ErrMissingPrivilege) {
				t.Fatalf("Open = %v, want ErrMissingPrivilege", err)
			}
			msg := err.Error()
			for _, w := range append(tc.want, "role "+role+" lacks", "docs/postgres.md") {
				if !strings.Contains(msg, w) {
					t.Errorf("the error does not say %q:\n%s", w, msg)
				}
			}
			// Running the GRANTs the error names is enough.
			statements := grantStatement.FindAllString(msg, -1)
			if len(statements) == 0 {
				t.Fatalf("the error names no GRANT:\n%s", msg)
			}
			for _, s := range statements {
				if !strings.HasSuffix(s, " TO "+role+";") {
					t.Errorf("%q does not grant to %s", s, role)
				}
				mustExec(t, f.admin, s)
			}
			b, err := postgres.Open(ctx, target, opts)
			if err != nil {
				t.Fatalf("Open after the GRANTs the error named: %v", err)
			}
			b.Close()
		})
	}
}

// Tables of another application are refused as foreign, whatever the
// role may do with them: the privilege check looks only at ledgers.
func TestOpen_ForeignTablesAreForeignForAnyRole(t *testing.T) {
	t.Parallel()
	f := newGrantsFixture(t)
	mustExec(t, f.admin, `CREATE SCHEMA other`)
	mustExec(t, f.admin, `CREATE TABLE other.changes (id int)`)
	_, target := f.newRole(t, "app")
	_, err := postgres.Open(context.Background(), withParam(t, target, "changeset_schema", "other"), ledger.OpenOptions{Create: true})
	if !errors.Is(err, ledger.ErrForeign) || errors.Is(err, postgres.ErrMissingPrivilege) {
		t.Fatalf("Open = %v, want ErrForeign", err)
	}
}
