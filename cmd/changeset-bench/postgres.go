package main

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"fmt"
	"net/url"
	"os"
	"time"

	changeset "github.com/mcp-changeset/changeset-go"
)

// postgresPhases measures the PostgreSQL ledger at o.postgres: the
// process phases with o.pgClients client processes, beside the baseline
// on the same database. Unless the URL names a changeset_schema, the ledger
// lives in a schema made for this run and dropped at the end.
func postgresPhases(ctx context.Context, o *options, r *report, prog *progress) error {
	u, err := url.Parse(o.postgres)
	if err != nil {
		return fmt.Errorf("--postgres: the URL cannot be parsed")
	}
	q := u.Query()
	ours := ""
	if q.Get("changeset_schema") == "" {
		b := make([]byte, 4)
		rand.Read(b)
		ours = "changeset_bench_" + hex.EncodeToString(b)
		q.Set("changeset_schema", ours)
		u.RawQuery = q.Encode()
	}
	target := u.String()
	g, err := changeset.New(nil, changeset.Options{LedgerPath: target, WriteMode: changeset.WriteGuarded, Durability: durability})
	if err != nil {
		return fmt.Errorf("postgres: %w", err)
	}
	defer func() {
		if ours != "" {
			g.Ledger().DB().ExecContext(context.WithoutCancel(ctx), "DROP SCHEMA "+ours+" CASCADE")
		}
		g.Close()
	}()
	work, err := os.MkdirTemp(o.dir, "changeset-bench-pg-") // marker and change files
	if err != nil {
		return err
	}
	defer os.RemoveAll(work)
	races := []int{o.pgClients[len(o.pgClients)-1]}
	raw := func(d time.Duration) (rawResult, error) { return rawCommits(ctx, g.Ledger().DB(), d, true) }
	return processPhases(ctx, o, r, prog, "postgres", func(int) string { return target }, work, o.pgClients, races, raw)
}
