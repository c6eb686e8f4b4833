package changeset_test

import (
	"context"
	"database/sql"
	"testing"

	changeset "github.com/mcp-changeset/changeset-go"
	"github.com/modelcontextprotocol/go-sdk/mcp"
)

// registerTxSet registers "txset", a transactional operation on a table kept in the
// ledger's own database. Its statements use $n placeholders, which both
// SQLite and PostgreSQL take.
func registerTxSet(t *testing.T, g *changeset.Guard) {
	t.Helper()
	if _, err := g.Ledger().DB().Exec(`CREATE TABLE kvt (k TEXT PRIMARY KEY, v TEXT NOT NULL)`); err != nil {
		t.Fatal(err)
	}
	read, write := kvtRead, kvtWrite
	changeset.Register(g, &mcp.Tool{Name: "txset"}, changeset.Operation[setIn, setIn, setOut]{
		Preview: func(ctx context.Context, in setIn) (*changeset.Proposal[setIn], error) {
			return &changeset.Proposal[setIn]{Payload: in, Summary: "Set " + in.Key,
				Diff: changeset.DiffFields(nil, map[string]any{in.Key: in.Value})}, nil
		},
		ApplyTx: func(ctx context.Context, tx *sql.Tx, p setIn) (setOut, error) {
			prev, err := read(ctx, tx, p.Key)
			if err != nil {
				return setOut{}, err
			}
			return setOut{Previous: prev}, write(ctx, tx, p.Key, p.Value)
		},
		UndoTx: func(ctx context.Context, tx *sql.Tx, p setIn, r setOut) error {
			return write(ctx, tx, p.Key, r.Previous)
		},
		ObserveTx: func(ctx context.Context, tx *sql.Tx, p setIn) (any, error) {
			return read(ctx, tx, p.Key)
		},
	})
}

func kvtValue(t *testing.T, g *changeset.Guard, k string) string {
	t.Helper()
	var v string
	if err := g.Ledger().DB().QueryRow(`SELECT v FROM kvt WHERE k = $1`, k).Scan(&v); err != nil && err != sql.ErrNoRows {
		t.Fatal(err)
	}
	return v
}

func TestApproval_TransactionalOperationAsksAndApplies(t *testing.T) {
	t.Parallel()
	onEachBackend(t, func(t *testing.T, kit backendKit) {
		f := newApprovalFixtureOn(t, kit)
		registerTxSet(t, f.guard)
		u := says(decline, yes, yes)
		cs := f.connect(clientOptions{protocol: protoLegacy, user: u})
		id := mustCall(t, cs, "preview_txset", map[string]any{"key": "a", "value": "1"})["change_id"].(string)

		mustFail(t, cs, "apply_change", map[string]any{"change_id": id}, "declined")
		if f.status(id) != "pending" || kvtValue(t, f.guard, "a") != "" {
			t.Fatal("a declined transactional apply wrote")
		}
		mustCall(t, cs, "apply_change", map[string]any{"change_id": id})
		if f.status(id) != "applied" || kvtValue(t, f.guard, "a") != "1" {
			t.Fatalf("status %s, a = %q", f.status(id), kvtValue(t, f.guard, "a"))
		}
		mustCall(t, cs, "undo_change", map[string]any{"change_id": id})
		if f.status(id) != "undone" || kvtValue(t, f.guard, "a") != "" {
			t.Fatalf("status %s, a = %q", f.status(id), kvtValue(t, f.guard, "a"))
		}

		// The state check before asking runs inside the rolled-back transaction.
		id = mustCall(t, cs, "preview_txset", map[string]any{"key": "b", "value": "1"})["change_id"].(string)
		if _, err := f.guard.Ledger().DB().Exec(`INSERT INTO kvt (k, v) VALUES ('b', 'edited')`); err != nil {
			t.Fatal(err)
		}
		mustFail(t, cs, "apply_change", map[string]any{"change_id": id}, "changed after the preview")
		if n, _ := u.asked(); n != 3 || f.status(id) != "pending" {
			t.Fatalf("asked %d times, status %s", n, f.status(id))
		}
	})
}

// kvtRead reads key k of the kvt table in tx ("" when it has none).
func kvtRead(ctx context.Context, tx *sql.Tx, k string) (string, error) {
	var v string
	err := tx.QueryRowContext(ctx, `SELECT v FROM kvt WHERE k = $1`, k).Scan(&v)
	if err == sql.ErrNoRows {
		return "", nil
	}
	return v, err
}

// kvtWrite sets key k of the kvt table to v in tx.
func kvtWrite(ctx context.Context, tx *sql.Tx, k, v string) error {
	_, err := tx.ExecContext(ctx, `INSERT INTO kvt (k, v) VALUES ($1, $2) ON CONFLICT (k) DO UPDATE SET v = excluded.v`, k, v)
	return err
}
