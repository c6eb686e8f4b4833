package postgres

import (
	"context"
	"fmt"
	"strings"

	"github.com/jackc/pgx/v5"
	"github.com/mcp-changeset/changeset-go/ledger/internal/sqlval"
)

// constraints are the named constraints of the ledger's tables (see
// migrations/001_initial.sql), which Check expects to find, validated.
var constraints = map[string][]string{
	"runs":    {"runs_pkey", "runs_id_nonempty", "runs_status_valid"},
	"changes": {"changes_pkey", "changes_id_nonempty", "changes_status_valid", "changes_run_fkey", "changes_run_nonempty", "changes_applied_has_time"},
	"meta":    {"meta_pkey"},
	"ledger_approvals": {"ledger_approvals_pkey", "ledger_approvals_id_nonempty", "ledger_approvals_kind_valid", "ledger_approvals_status_valid",
		"ledger_approvals_target", "ledger_approvals_counts", "ledger_approvals_change_fkey", "ledger_approvals_run_fkey"},
	"ledger_decisions": {"ledger_decisions_pkey", "ledger_decisions_person_nonempty", "ledger_decisions_verdict_valid", "ledger_decisions_approval_fkey"},
	"ledger_outbox":    {"ledger_outbox_pkey", "ledger_outbox_id_nonempty", "ledger_outbox_name_nonempty", "ledger_outbox_attempts"},
}

// invariants are queries that count rows breaking a rule the constraints
// should have enforced; a constraint that was dropped, added NOT VALID, or
// bypassed (session_replication_role = replica skips foreign keys) lets
// such rows in.
var invariants = []struct{ what, query string }{
	{"changes with an unknown status", `SELECT count(*) FROM {changes} WHERE status NOT IN ('pending', 'expired', 'applying', 'applied', 'apply_failed', 'undoing', 'undone', 'undo_failed', 'declined')`},
	{"applied changes without applied_at", `SELECT count(*) FROM {changes} WHERE status = 'applied' AND applied_at IS NULL`},
	{"changes whose run does not exist", `SELECT count(*) FROM {changes} c WHERE c.run_id IS NOT NULL AND NOT EXISTS (SELECT 1 FROM {runs} r WHERE r.id = c.run_id)`},
	{"changes or runs with an empty ID", `SELECT (SELECT count(*) FROM {changes} WHERE id = '' OR run_id = '') + (SELECT count(*) FROM {runs} WHERE id = '')`},
	{"runs with an unknown status", `SELECT count(*) FROM {runs} WHERE status NOT IN ('open', 'undoing', 'undone', 'partially_undone')`},
}

// Check looks for what PostgreSQL's own guarantees would not catch, since
// PostgreSQL has no integrity check of the kind SQLite has: it returns one
// line per problem it finds, none when the ledger is sound. It checks that
// the schema version is this package's, that the database's encoding is
// UTF8, that the ledger's tables and every named constraint are present
// and validated, and that no row breaks the rules those constraints
// enforce. A failure to run a check is an error, except a missing table,
// which is a problem found.
func (b *Backend) Check(ctx context.Context) ([]string, error) { return b.check(ctx, true) }

// CheckRoutine is Check without its counts of rows that break a rule:
// each reads a whole table, and the constraints, present and validated,
// already keep such rows out. What it reads does not grow with the
// ledger.
func (b *Backend) CheckRoutine(ctx context.Context) ([]string, error) { return b.check(ctx, false) }

// check is Check, with the counts of rows that break a rule when rows is
// set.
func (b *Backend) check(ctx context.Context, rows bool) ([]string, error) {
	const op = "check"
	var problems []string
	id, err := readIdentity(ctx, b.db, b.schema)
	if err != nil {
		return nil, b.interpretError(op, err)
	}
	switch {
	case !id.tracked:
		return []string{"schema: " + b.schema + " has no changeset_migrations table"}, nil
	case id.version != SchemaVersion || id.versions > id.version:
		problems = append(problems, fmt.Sprintf("schema: changeset_migrations records %d versions up to %d, not up to %d", id.versions, id.version, SchemaVersion))
	}
	var enc string
	if err := b.db.QueryRowContext(ctx, `SELECT current_setting('server_encoding')`).Scan(&enc); err != nil {
		return nil, b.interpretError(op, err)
	}
	if enc != "UTF8" {
		problems = append(problems, "encoding: the database's encoding is "+enc+", not UTF8")
	}
	missing := false
	for _, table := range ownTables {
		found, err := b.checkConstraints(ctx, table)
		if err != nil {
			return nil, b.interpretError(op, err)
		}
		if found == nil {
			problems = append(problems, "table: "+b.schema+"."+table+" is missing")
			missing = true
			continue
		}
		problems = append(problems, found...)
	}
	if missing || !rows {
		return problems, nil
	}
	r := strings.NewReplacer("{changes}", pgx.Identifier{b.schema, "changes"}.Sanitize(), "{runs}", pgx.Identifier{b.schema, "runs"}.Sanitize())
	for _, inv := range invariants {
		var n int64
		if err := b.db.QueryRowContext(ctx, r.Replace(inv.query)).Scan(&n); err != nil {
			return nil, b.interpretError(op, err)
		}
		if n > 0 {
			problems = append(problems, fmt.Sprintf("rows: %d %s", n, inv.what))
		}
	}
	return problems, nil
}

// checkConstraints returns a problem for each expected constraint of table
// that is missing or not validated. It returns nil, not an empty slice,
// when the table itself is missing.
func (b *Backend) checkConstraints(ctx context.Context, table string) ([]string, error) {
	rows, err := b.db.QueryContext(ctx, `SELECT con.conname::text, con.convalidated
		FROM pg_class c
		JOIN pg_namespace n ON n.oid = c.relnamespace
		LEFT JOIN pg_constraint con ON con.conrelid = c.oid
		WHERE n.nspname = $1 AND c.relname = $2 AND c.relkind IN ('r', 'p')`, b.schema, table)
	if err != nil {
		return nil, err
	}
	exists := false
	validated := map[string]bool{}
	for rows.Next() {
		var name *string
		var ok *bool
		if err := rows.Scan(&name, &ok); err != nil {
			rows.Close()
			return nil, err
		}
		exists = true
		if name != nil {
			validated[*name] = ok != nil && *ok
		}
	}
	if err := sqlval.CloseRows(rows); err != nil {
		return nil, err
	}
	if !exists {
		return nil, nil
	}
	problems := []string{}
	for _, name := range constraints[table] {
		ok, found := validated[name]
		switch {
		case !found:
			problems = append(problems, "constraint: "+name+" of "+b.schema+"."+table+" is missing")
		case !ok:
			problems = append(problems, "constraint: "+name+" of "+b.schema+"."+table+" is not validated (added NOT VALID?)")
		}
	}
	return problems, nil
}
