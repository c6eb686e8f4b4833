package main

import (
	"context"
	"database/sql"
	"fmt"
	"os"
	"sync"
	"time"

	changeset "github.com/mcp-changeset/changeset-go"
	"github.com/modelcontextprotocol/go-sdk/mcp"
)

// The operations the benchmark drives. They do as little as an operation
// can, so that what is measured is the library and the ledger.
const (
	// opOrdinary sets a key of an in-memory map: an ordinary Operation
	// with Observe and Undo, whose apply is claimed in one transaction
	// and recorded in another.
	opOrdinary = "bench_set"
	// opTx sets a row of a table in the ledger's own database: a
	// transactional operation, applied in one transaction with its bookkeeping.
	opTx = "bench_set_tx"
	// opRace appends its tag to the process's marker file and has neither
	// Observe nor Undo: processes race to apply changes that the parent
	// previewed, so no process can observe the parent's state.
	opRace = "bench_race"
)

// setIn is the input and payload of every operation. Tag is unique per
// change, so that the marker files show a change applied twice.
type setIn struct {
	Key   string `json:"key"`
	Value string `json:"value"`
	Tag   string `json:"tag"`
}

type setOut struct {
	Previous string `json:"previous"`
}

// txSchema is the table of opTx, beside the ledger's tables. applies
// counts the applies of each tag and is never decremented, so that a value
// above 1 is a double apply.
const txSchema = `
CREATE TABLE IF NOT EXISTS bench_kv (key TEXT PRIMARY KEY, value TEXT NOT NULL);
CREATE TABLE IF NOT EXISTS bench_applies (tag TEXT PRIMARY KEY, n INTEGER NOT NULL);
`

// store is the state of the operations in one process.
type store struct {
	mu sync.Mutex
	m  map[string]string

	// marker, when not nil, gets one line per apply: the change's tag.
	marker *os.File
	// callStart is when the current Apply call started, and claimed how
	// long after it the operation's Apply ran: the claim's latency. Each
	// worker applies from one goroutine.
	callStart time.Time
	claimed   time.Duration
	// seq numbers the changes of this process, for unique tags.
	seq int
}

func newStore(marker *os.File) *store { return &store{m: map[string]string{}, marker: marker} }

func (s *store) get(k string) string {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.m[k]
}

func (s *store) set(k, v string) string {
	s.mu.Lock()
	defer s.mu.Unlock()
	old := s.m[k]
	s.m[k] = v
	return old
}

// mark records an apply of tag: the time since the Apply call began, and
// a line in the marker file (one write(2), so that lines from processes
// never interleave).
func (s *store) mark(tag string) error {
	s.claimed = time.Since(s.callStart)
	if s.marker == nil {
		return nil
	}
	_, err := s.marker.WriteString(tag + "\n")
	return err
}

// register adds the three operations to g. withTx adds opTx and its
// table; the PostgreSQL runs leave it out.
func register(g *changeset.Guard, s *store, withTx bool) error {
	preview := func(ctx context.Context, in setIn) (*changeset.Proposal[setIn], error) {
		return &changeset.Proposal[setIn]{
			Payload:  in,
			Diff:     changeset.DiffFields(map[string]any{in.Key: s.get(in.Key)}, map[string]any{in.Key: in.Value}),
			Summary:  "set " + in.Key,
			Resource: "key:" + in.Key,
		}, nil
	}
	changeset.Register(g, &mcp.Tool{Name: opOrdinary}, changeset.Operation[setIn, setIn, setOut]{
		Preview: preview,
		Apply: func(ctx context.Context, p setIn) (setOut, error) {
			if err := s.mark(p.Tag); err != nil {
				return setOut{}, err
			}
			return setOut{Previous: s.set(p.Key, p.Value)}, nil
		},
		Undo: func(ctx context.Context, p setIn, r setOut) error {
			s.set(p.Key, r.Previous)
			return nil
		},
		Observe: func(ctx context.Context, p setIn) (any, error) { return s.get(p.Key), nil },
	})
	changeset.Register(g, &mcp.Tool{Name: opRace}, changeset.Operation[setIn, setIn, struct{}]{
		AllowEmptyDiff: true, // the benchmark measures the path, not the diff
		Preview: func(ctx context.Context, in setIn) (*changeset.Proposal[setIn], error) {
			return &changeset.Proposal[setIn]{Payload: in, Summary: "race " + in.Tag}, nil
		},
		Apply: func(ctx context.Context, p setIn) (struct{}, error) { return struct{}{}, s.mark(p.Tag) },
	})
	if !withTx {
		return nil
	}
	if _, err := g.Ledger().DB().Exec(txSchema); err != nil {
		return fmt.Errorf("create the benchmark's tables: %w", err)
	}
	changeset.Register(g, &mcp.Tool{Name: opTx}, changeset.Operation[setIn, setIn, setOut]{
		AllowEmptyDiff: true, // the benchmark measures the path, not the diff
		Preview: func(ctx context.Context, in setIn) (*changeset.Proposal[setIn], error) {
			return &changeset.Proposal[setIn]{Payload: in, Summary: "set " + in.Key, Resource: "row:" + in.Key}, nil
		},
		ApplyTx: func(ctx context.Context, tx *sql.Tx, p setIn) (setOut, error) {
			old, err := txGet(ctx, tx, p.Key)
			if err != nil {
				return setOut{}, err
			}
			if _, err := tx.ExecContext(ctx, `INSERT INTO bench_kv (key, value) VALUES (?, ?)
				ON CONFLICT (key) DO UPDATE SET value = excluded.value`, p.Key, p.Value); err != nil {
				return setOut{}, err
			}
			_, err = tx.ExecContext(ctx, `INSERT INTO bench_applies (tag, n) VALUES (?, 1)
				ON CONFLICT (tag) DO UPDATE SET n = n + 1`, p.Tag)
			return setOut{Previous: old}, err
		},
		UndoTx: func(ctx context.Context, tx *sql.Tx, p setIn, r setOut) error {
			_, err := tx.ExecContext(ctx, `UPDATE bench_kv SET value = ? WHERE key = ?`, r.Previous, p.Key)
			return err
		},
		ObserveTx: func(ctx context.Context, tx *sql.Tx, p setIn) (any, error) { return txGet(ctx, tx, p.Key) },
	})
	return nil
}

func txGet(ctx context.Context, tx *sql.Tx, key string) (string, error) {
	var v string
	err := tx.QueryRowContext(ctx, `SELECT value FROM bench_kv WHERE key = ?`, key).Scan(&v)
	if err == sql.ErrNoRows {
		return "", nil
	}
	return v, err
}

// cycle previews, applies and undoes one change of op through the Go API,
// and returns how long the apply's claim took (see store).
func cycle(ctx context.Context, g *changeset.Guard, s *store, op, key, tag string) (time.Duration, error) {
	p, err := g.Preview(ctx, op, setIn{Key: key, Value: tag, Tag: tag})
	if err != nil {
		return 0, fmt.Errorf("preview: %w", err)
	}
	s.callStart, s.claimed = time.Now(), 0
	a, err := g.Apply(ctx, p.ChangeID, p.ConfirmationToken)
	if err != nil {
		return 0, fmt.Errorf("apply: %w", err)
	}
	claim := s.claimed
	if op == opTx {
		claim = time.Since(s.callStart) // the whole transaction is the claim
	}
	if _, err := g.Undo(ctx, p.ChangeID, a.UndoToken); err != nil {
		return 0, fmt.Errorf("undo: %w", err)
	}
	return claim, nil
}
