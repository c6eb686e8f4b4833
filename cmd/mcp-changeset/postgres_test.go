package main

import (
	"context"
	"database/sql"
	"net/url"
	"reflect"
	"testing"

	changeset "github.com/mcp-changeset/changeset-go"
	"github.com/mcp-changeset/changeset-go/internal/pgtest"
	"github.com/mcp-changeset/changeset-go/ledger"
)

// snapshot reads every change and run of the ledger at target, to compare
// before and after a command that must not change it.
func snapshot(t *testing.T, target string) ([]*ledger.Change, []*ledger.Run) {
	t.Helper()
	ctx := context.Background()
	l, err := ledger.Open(ctx, target, ledger.OpenOptions{ReadOnly: true})
	if err != nil {
		t.Fatal(err)
	}
	defer l.Close()
	changes, err := l.Changes(ctx, ledger.ChangeFilter{})
	if err != nil {
		t.Fatal(err)
	}
	runs, err := l.Runs(ctx, ledger.RunFilter{})
	if err != nil {
		t.Fatal(err)
	}
	return changes, runs
}

func TestPostgres_URLWorksLikeAPath(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	dsn := pgtest.DSN(t)
	target := dsn + "?changeset_schema=notes"
	if u, err := url.Parse(dsn); err == nil && u.RawQuery != "" {
		target = dsn + "&changeset_schema=notes"
	}
	if u, err := url.Parse(dsn); err == nil {
		if pw, ok := u.User.Password(); ok {
			addSecret("the PostgreSQL password", pw)
		}
	}

	// Never created: not the ledger, not its schema.
	wantErr(t, run(t, nil, "list", "--ledger", target), "ledger does not exist")
	db, err := sql.Open("pgx", dsn)
	if err != nil {
		t.Fatal(err)
	}
	defer db.Close()
	var schemas int
	if err := db.QueryRowContext(ctx, `SELECT count(*) FROM information_schema.schemata WHERE schema_name = 'notes'`).Scan(&schemas); err != nil {
		t.Fatal(err)
	}
	if schemas != 0 {
		t.Error("a read-only open of a missing PostgreSQL ledger created its schema")
	}

	l, err := ledger.Open(ctx, target, ledger.OpenOptions{Create: true})
	if err != nil {
		t.Fatal(err)
	}
	g, err := changeset.New(nil, changeset.Options{Ledger: l, WriteMode: changeset.WriteGuarded})
	if err != nil {
		t.Fatal(err)
	}
	registerOps(g, &store{m: map[string]string{}})
	ids := map[string]string{}
	for _, role := range []string{"applied", "pending", "failed", "applying"} {
		op := "set"
		if role == "failed" {
			op = "fail"
		}
		p, err := g.Preview(ctx, op, setIn{Key: role, Value: "v"})
		if err != nil {
			t.Fatal(err)
		}
		ids[role] = p.ChangeID
		addSecret("a PostgreSQL confirmation token", p.ConfirmationToken)
		if role == "pending" || role == "applying" {
			continue
		}
		if res, err := g.Apply(ctx, p.ChangeID, p.ConfirmationToken); err == nil {
			addSecret("a PostgreSQL undo token", res.UndoToken)
		}
	}
	err = l.WithTx(ctx, func(tx *ledger.Tx) error {
		c, err := tx.Change(ids["applying"])
		if err != nil {
			return err
		}
		c.Status, c.ConfirmHash, c.AppliedBy = ledger.Applying, "", "agent"
		return tx.UpdateChange(c, ledger.Pending)
	})
	if err != nil {
		t.Fatal(err)
	}
	changes, err := l.Changes(ctx, ledger.ChangeFilter{})
	if err != nil {
		t.Fatal(err)
	}
	for _, c := range changes {
		for _, d := range []string{string(c.ScopeHash), string(c.PayloadHash), string(c.StateHash), string(c.ConfirmHash), string(c.UndoHash)} {
			addSecret("a digest of a PostgreSQL ledger", d)
		}
	}
	l.Close()

	beforeChanges, beforeRuns := snapshot(t, target)
	want(t, run(t, nil, "--ledger", target, "list"), exitOK, ids["applied"], ids["pending"], ids["failed"], ids["applying"])
	want(t, run(t, nil, "list", "--json", "--status", "applying"), exitError) // no ledger given
	want(t, run(t, []string{LedgerEnv + "=" + target}, "list", "--json", "--status", "applying"), exitOK, ids["applying"])
	want(t, run(t, []string{LedgerEnv + "=" + target}, "show", ids["failed"]), exitOK, secretErrorText)
	want(t, run(t, []string{LedgerEnv + "=" + target}, "runs", "--json"), exitOK, `"runs": []`)
	want(t, run(t, []string{LedgerEnv + "=" + target}, "check"), exitOK, "ok")
	want(t, run(t, []string{LedgerEnv + "=" + target}, "reconcile", ids["applying"], "--note", "checked"), exitDryRun)
	want(t, run(t, []string{LedgerEnv + "=" + target}, "expire"), exitDryRun, "would expire 0 pending changes")
	want(t, run(t, []string{LedgerEnv + "=" + target}, "prune", "--older-than-days", "0"), exitDryRun, "would delete 1 change")
	afterChanges, afterRuns := snapshot(t, target)
	if !reflect.DeepEqual(beforeChanges, afterChanges) || !reflect.DeepEqual(beforeRuns, afterRuns) {
		t.Fatal("a read-only command changed the PostgreSQL ledger")
	}

	want(t, run(t, []string{LedgerEnv + "=" + target}, "reconcile", ids["applying"], "--note", "checked", "--yes"), exitOK, "applying → apply_failed")
	want(t, run(t, []string{LedgerEnv + "=" + target}, "prune", "--older-than-days", "0", "--yes"), exitOK, "deleted 2 changes")
	wantErr(t, run(t, []string{LedgerEnv + "=" + target}, "show", ids["failed"]), "not found")
}
