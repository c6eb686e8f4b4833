package postgres

import (
	"context"
	"errors"
	"fmt"
	"strings"

	"github.com/jackc/pgx/v5"
)

// ErrMissingPrivilege is the cause of an open refused because the
// database role lacks a privilege that the ledger needs at run time. The
// error names each missing privilege and the GRANT statements that give
// them; docs/postgres.md lists them all.
var ErrMissingPrivilege = errors.New("the database role lacks privileges the ledger needs")

// grant is what a role needs on one object of a ledger's schema.
type grant struct {
	kind   string   // "SCHEMA", "TABLE" or "SEQUENCE"
	name   string   // the object's name in the schema; "" for the schema itself
	privs  []string // in the order GRANT lists them
	reader bool     // a read-only open needs SELECT on it (USAGE for the schema)
}

// grants are the privileges a read-write open needs, object by object:
// every table and sequence the backend touches after the migrations
// (statements in postgres.go, history.go, meta.go, changes.go, runs.go).
// A migration that adds a table or a statement that touches one in a new
// way must add it here; docs/postgres.md shows these statements, and a
// test holds the two together and runs the library under exactly them.
//
//   - changes, runs: every transition is an UPDATE (SELECT … FOR UPDATE
//     needs UPDATE too), Prune DELETEs.
//   - change_deps: a change's dependencies are INSERTed with it and read
//     by a run's undo; the foreign key deletes them with the change, as
//     the table's owner, so no DELETE.
//   - ledger_history: INSERTed by every transition and by Prune (with the
//     seq the ledger numbers it), read by history pages, DELETEd by Prune
//     with the changes and runs they describe.
//   - ledger_history_pruned: Prune INSERTs the links of the entries it
//     deletes; Verify reads them.
//   - ledger_chain_head: every append UPDATEs its one row (which needs
//     SELECT too, for the row's own values).
//   - meta: the redaction and approval keys are INSERTed once (ON
//     CONFLICT DO NOTHING) and read; never updated or deleted.
//   - ledger_approvals: INSERTed when an agent asks, UPDATEd by every
//     decision and use (SELECT … FOR UPDATE needs UPDATE too); the foreign
//     keys delete approvals with their change or run.
//   - ledger_decisions: INSERTed by each decision, read before it; the
//     foreign key deletes them with their approval.
//   - ledger_outbox: INSERTed with the transitions that cause events;
//     senders lease and finish events (UPDATE) and prune delivered ones
//     (DELETE). Read-only opens never read it.
//   - changeset_migrations: read at every open.
var grants = []grant{
	{kind: "SCHEMA", privs: []string{"USAGE"}, reader: true},
	{kind: "TABLE", name: "changes", privs: []string{"SELECT", "INSERT", "UPDATE", "DELETE"}, reader: true},
	{kind: "TABLE", name: "runs", privs: []string{"SELECT", "INSERT", "UPDATE", "DELETE"}, reader: true},
	{kind: "TABLE", name: "change_deps", privs: []string{"SELECT", "INSERT"}, reader: true},
	{kind: "TABLE", name: "ledger_history", privs: []string{"SELECT", "INSERT", "DELETE"}, reader: true},
	{kind: "TABLE", name: "ledger_history_pruned", privs: []string{"SELECT", "INSERT"}, reader: true},
	{kind: "TABLE", name: "ledger_chain_head", privs: []string{"SELECT", "UPDATE"}},
	{kind: "TABLE", name: "meta", privs: []string{"SELECT", "INSERT"}},
	{kind: "TABLE", name: "ledger_approvals", privs: []string{"SELECT", "INSERT", "UPDATE"}, reader: true},
	{kind: "TABLE", name: "ledger_decisions", privs: []string{"SELECT", "INSERT"}, reader: true},
	{kind: "TABLE", name: "ledger_outbox", privs: []string{"SELECT", "INSERT", "UPDATE", "DELETE"}},
	{kind: "TABLE", name: "changeset_migrations", privs: []string{"SELECT"}, reader: true},
}

// needed returns the grants a role needs: all of them for a read-write
// open; for a read-only open, SELECT on the tables that reads use (meta,
// which holds keys, is not one of them) and USAGE on the schema.
func needed(readOnly bool) []grant {
	if !readOnly {
		return grants
	}
	var out []grant
	for _, g := range grants {
		if g.reader {
			if g.kind == "TABLE" {
				g.privs = []string{"SELECT"}
			}
			out = append(out, g)
		}
	}
	return out
}

// grantSQL returns the GRANT statements that give role the privileges gs
// name on the ledger in schema, one a line: objects that need the same
// privileges share a statement, in the order they first appear.
func grantSQL(schema, role string, gs []grant) string {
	type stmt struct {
		kind, privs string
		objects     []string
	}
	var stmts []*stmt
	for _, g := range gs {
		object := quoteIdent(schema)
		if g.name != "" {
			object += "." + quoteIdent(g.name)
		}
		privs := strings.Join(g.privs, ", ")
		var s *stmt
		for _, o := range stmts {
			if o.kind == g.kind && o.privs == privs && g.kind != "SCHEMA" {
				s = o
			}
		}
		if s == nil {
			s = &stmt{kind: g.kind, privs: privs}
			stmts = append(stmts, s)
		}
		s.objects = append(s.objects, object)
	}
	var b strings.Builder
	for _, s := range stmts {
		on := ""
		if s.kind != "TABLE" {
			on = s.kind + " " // GRANT … ON t names a table without saying so
		}
		fmt.Fprintf(&b, "GRANT %s ON %s%s TO %s;\n", s.privs, on, strings.Join(s.objects, ", "), quoteIdent(role))
	}
	return b.String()
}

// quoteIdent quotes an identifier only when it needs it, so that the
// statements read as people write them ("notes.changes").
func quoteIdent(name string) string {
	plain := name != ""
	for i, r := range name {
		if !(r >= 'a' && r <= 'z' || r == '_' || i > 0 && r >= '0' && r <= '9') {
			plain = false
		}
	}
	if plain {
		return name
	}
	return pgx.Identifier{name}.Sanitize()
}

// checkPrivileges refuses to open a ledger whose role lacks a privilege
// that the ledger will need, naming each one and the GRANT that gives it:
// otherwise the server would start, and its first preview fail with an
// internal error. It runs before the migrations, in one statement whatever
// the ledger's size, and looks only at a schema that holds a ledger (one
// with changeset_migrations), and there only at the objects that exist:
// a ledger still to be created or upgraded is the migration's business,
// and tables of another application are refused as foreign, not as
// lacking privileges. Objects are found through the catalog, by OID, so
// that a missing USAGE on the schema is reported rather than fatal. The
// owner of the tables and a superuser have every privilege.
func (b *Backend) checkPrivileges(ctx context.Context) error {
	var kinds, names, privs []string
	var checks []grant // one privilege each
	for _, g := range needed(b.readOnly) {
		for _, p := range g.privs {
			kinds, names, privs = append(kinds, g.kind), append(names, g.name), append(privs, p)
			checks = append(checks, grant{kind: g.kind, name: g.name, privs: []string{p}})
		}
	}
	rows, err := b.db.QueryContext(ctx, `SELECT current_user::text, o.i, CASE o.kind
			WHEN 'SCHEMA' THEN has_schema_privilege(n.oid, o.priv)
			WHEN 'TABLE' THEN has_table_privilege(c.oid, o.priv)
			ELSE has_sequence_privilege(c.oid, o.priv) END
		FROM unnest($2::text[], $3::text[], $4::text[]) WITH ORDINALITY AS o (kind, name, priv, i)
		JOIN pg_namespace n ON n.nspname = $1
		LEFT JOIN pg_class c ON c.relnamespace = n.oid AND c.relname = o.name
		WHERE (o.kind = 'SCHEMA' OR c.oid IS NOT NULL)
		AND EXISTS (SELECT 1 FROM pg_class m WHERE m.relnamespace = n.oid AND m.relname = 'changeset_migrations')
		ORDER BY o.i`, b.schema, kinds, names, privs)
	if err != nil {
		return b.interpretError("check the privileges on", err)
	}
	var role string
	var lacking []grant // grouped by object
	for rows.Next() {
		var i int
		var held bool
		if err := rows.Scan(&role, &i, &held); err != nil {
			rows.Close()
			return b.interpretError("check the privileges on", err)
		}
		if held {
			continue
		}
		c := checks[i-1]
		if n := len(lacking); n > 0 && lacking[n-1].kind == c.kind && lacking[n-1].name == c.name {
			lacking[n-1].privs = append(lacking[n-1].privs, c.privs[0])
		} else {
			lacking = append(lacking, c)
		}
	}
	if err := rows.Err(); err != nil {
		return b.interpretError("check the privileges on", err)
	}
	if len(lacking) == 0 {
		return nil
	}
	var missing []string
	for _, g := range lacking {
		object := "schema " + b.schema
		switch g.kind {
		case "TABLE":
			object = b.schema + "." + g.name
		case "SEQUENCE":
			object = "sequence " + b.schema + "." + g.name
		}
		missing = append(missing, strings.Join(g.privs, ", ")+" on "+object)
	}
	how := "as the ledger's owner, run:"
	if b.readOnly {
		how = "for a read-only open, as the ledger's owner, run:"
	}
	statements := strings.ReplaceAll(strings.TrimSpace(grantSQL(b.schema, role, lacking)), "\n", " ")
	return b.openError(fmt.Errorf("%w: role %s lacks %s; %s %s (see \"Privileges\" in docs/postgres.md)",
		ErrMissingPrivilege, quoteIdent(role), strings.Join(missing, "; "), how, statements))
}
