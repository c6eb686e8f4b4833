package sqltable

import (
	"context"
	"database/sql"
	"errors"
	"path/filepath"
	"testing"

	changeset "github.com/mcp-changeset/changeset-go"
	"github.com/mcp-changeset/changeset-go/internal/commitcount"
	"github.com/mcp-changeset/changeset-go/internal/testkit"
	"github.com/modelcontextprotocol/go-sdk/mcp"
)

// BenchmarkCycle measures one preview and apply of an update of a row,
// through the adapter and through a hand-written operation doing the same
// (read the row at preview, check it and write it at apply, Observe), on
// the same SQLite table, in the ledger's database (with ApplyTx) and in one
// of its own (Operation). commits/op must be equal for both.
//
//	go test ./sqltable -run '^$' -bench Cycle -benchtime 2000x
//	TMPDIR=/dev/shm go test ./sqltable -run '^$' -bench Cycle    # CPU only
//
// cpu-ns/op is the process's CPU time (user and system) per cycle.
func BenchmarkCycle(b *testing.B) {
	for _, inLedger := range []bool{true, false} {
		where := map[bool]string{true: "ledger-db", false: "own-db"}[inLedger]
		for _, impl := range []string{"adapter", "hand"} {
			b.Run(where+"/"+impl, func(b *testing.B) { benchCycle(b, inLedger, impl == "adapter") })
		}
	}
}

func benchCycle(b *testing.B, inLedger, adapter bool) {
	commitcount.Enable()
	b.Cleanup(commitcount.Disable)
	ctx := context.Background()
	dir := b.TempDir()
	g, err := changeset.New(nil, changeset.Options{LedgerPath: filepath.Join(dir, "ledger.db"), WriteMode: changeset.WriteGuarded})
	if err != nil {
		b.Fatal(err)
	}
	b.Cleanup(func() { g.Close() })
	db := g.Ledger().DB()
	if !inLedger {
		// The ledger's own settings, so that both databases sync alike.
		db, err = sql.Open("sqlite", "file:"+filepath.Join(dir, "app.db")+"?_pragma=busy_timeout(5000)&_pragma=journal_mode(WAL)&_pragma=synchronous(FULL)")
		if err != nil {
			b.Fatal(err)
		}
		b.Cleanup(func() { db.Close() })
	}
	if _, err := db.Exec(schemas[SQLite] + `INSERT INTO people (id, name, email, version) VALUES (1, 'n', 'e', 1);`); err != nil {
		b.Fatal(err)
	}
	if adapter {
		tb, err := Open(ctx, db, Config{Table: "people", Kind: "person", Version: "version"})
		if err != nil {
			b.Fatal(err)
		}
		Update(g, &mcp.Tool{Name: "update"}, tb, func(_ context.Context, in handIn) (any, Row, error) {
			return in.ID, Row{"name": in.Name}, nil
		})
	} else {
		registerHand(g, db, inLedger)
	}
	names := []string{"a", "b"}
	b.ResetTimer()
	c0, cpu := commitcount.Commits(), testkit.CPUTime()
	for i := range b.N {
		p, err := g.Preview(ctx, "update", handIn{ID: 1, Name: names[i%2]})
		if err != nil {
			b.Fatal(err)
		}
		if _, err := g.Apply(ctx, p.ChangeID, p.ConfirmationToken); err != nil {
			b.Fatal(err)
		}
	}
	b.StopTimer()
	b.ReportMetric(float64(testkit.CPUTime()-cpu)/float64(b.N), "cpu-ns/op")
	b.ReportMetric(float64(commitcount.Commits()-c0)/float64(b.N), "commits/op")
}

type (
	handIn struct {
		ID   int64  `json:"id"`
		Name string `json:"name"`
	}
	person struct {
		ID        int64   `json:"id"`
		Name      string  `json:"name"`
		Email     *string `json:"email"`
		VIP       bool    `json:"vip"`
		Score     *int64  `json:"score"`
		Version   int64   `json:"version"`
		CreatedAt string  `json:"created_at"`
	}
	handPayload struct {
		Before person `json:"before"`
		After  person `json:"after"`
	}
)

type handQuerier interface {
	QueryRowContext(ctx context.Context, q string, args ...any) *sql.Row
}

func getPerson(ctx context.Context, q handQuerier, id int64) (*person, error) {
	var p person
	err := q.QueryRowContext(ctx, `SELECT id, name, email, vip, score, version, created_at FROM people WHERE id = ?`, id).
		Scan(&p.ID, &p.Name, &p.Email, &p.VIP, &p.Score, &p.Version, &p.CreatedAt)
	if errors.Is(err, sql.ErrNoRows) {
		return nil, nil
	}
	return &p, err
}

// registerHand registers the hand-written update: what a developer would
// write for the same table without the adapter.
func registerHand(g *changeset.Guard, db *sql.DB, inLedger bool) {
	preview := func(ctx context.Context, in handIn) (*changeset.Proposal[handPayload], error) {
		cur, err := getPerson(ctx, db, in.ID)
		if err != nil || cur == nil {
			return nil, errors.Join(err, changeset.Refuse("no person %d", in.ID))
		}
		after := *cur
		after.Name, after.Version = in.Name, cur.Version+1
		diff, err := changeset.Diff(cur, after)
		if err != nil {
			return nil, err
		}
		return &changeset.Proposal[handPayload]{Payload: handPayload{*cur, after}, Diff: diff, Summary: "Update person",
			Resource: "person:1", Snapshot: &changeset.Snapshot{Value: cur}}, nil
	}
	apply := func(ctx context.Context, tx *sql.Tx, p handPayload) (person, error) {
		cur, err := getPerson(ctx, tx, p.Before.ID)
		if err != nil {
			return person{}, err
		}
		if cur == nil || cur.Version != p.Before.Version {
			return person{}, &changeset.StateChangedError{Phase: "apply"}
		}
		res, err := tx.ExecContext(ctx, `UPDATE people SET name = ?, version = version + 1 WHERE id = ? AND version = ?`, p.After.Name, p.Before.ID, p.Before.Version)
		if err != nil {
			return person{}, err
		}
		if n, _ := res.RowsAffected(); n != 1 {
			return person{}, &changeset.StateChangedError{Phase: "apply"}
		}
		got, err := getPerson(ctx, tx, p.Before.ID)
		if err != nil || got == nil {
			return person{}, err
		}
		return *got, nil
	}
	undo := func(ctx context.Context, tx *sql.Tx, p handPayload, r person) error {
		_, err := tx.ExecContext(ctx, `UPDATE people SET name = ?, version = version + 1 WHERE id = ? AND version = ?`, p.Before.Name, r.ID, r.Version)
		return err
	}
	observe := func(ctx context.Context, q handQuerier, p handPayload) (any, error) {
		cur, err := getPerson(ctx, q, p.Before.ID)
		if err != nil || cur == nil {
			return nil, err
		}
		return cur, nil
	}
	if inLedger {
		changeset.Register(g, &mcp.Tool{Name: "update"}, changeset.Operation[handIn, handPayload, person]{
			Preview:   preview,
			ApplyTx:   apply,
			UndoTx:    undo,
			ObserveTx: func(ctx context.Context, tx *sql.Tx, p handPayload) (any, error) { return observe(ctx, tx, p) },
		})
		return
	}
	changeset.Register(g, &mcp.Tool{Name: "update"}, changeset.Operation[handIn, handPayload, person]{
		Preview: preview,
		Apply: func(ctx context.Context, p handPayload) (person, error) {
			tx, err := db.BeginTx(ctx, nil)
			if err != nil {
				return person{}, err
			}
			defer tx.Rollback()
			out, err := apply(ctx, tx, p)
			if err != nil {
				return person{}, err
			}
			return out, tx.Commit()
		},
		Undo: func(ctx context.Context, p handPayload, r person) error {
			tx, err := db.BeginTx(ctx, nil)
			if err != nil {
				return err
			}
			defer tx.Rollback()
			if err := undo(ctx, tx, p, r); err != nil {
				return err
			}
			return tx.Commit()
		},
		Observe: func(ctx context.Context, p handPayload) (any, error) { return observe(ctx, db, p) },
	})
}
