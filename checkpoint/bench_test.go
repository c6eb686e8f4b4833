package checkpoint_test

import (
	"context"
	"crypto/ed25519"
	"encoding/json"
	"fmt"
	"path/filepath"
	"testing"
	"time"

	"github.com/mcp-changeset/changeset-go/checkpoint"
	"github.com/mcp-changeset/changeset-go/ledger"
)

// BenchmarkTake measures a checkpoint of a SQLite ledger of 10,000
// changes (20,000 history entries): what a Schedule's tick costs, almost
// all of it Verify's read of the history and the rows.
func BenchmarkTake(b *testing.B) {
	ctx := context.Background()
	l, err := ledger.Open(ctx, filepath.Join(b.TempDir(), "ledger.db"), ledger.OpenOptions{Create: true})
	if err != nil {
		b.Fatal(err)
	}
	defer l.Close()
	const changes, perTx = 10_000, 500
	for i := 0; i < changes; i += perTx {
		err := l.WithTx(ctx, func(tx *ledger.Tx) error {
			for j := i; j < i+perTx; j++ {
				now := time.Now()
				id := fmt.Sprintf("chg_%020d", j)
				c := &ledger.Change{ID: id, Action: "a", Status: ledger.Pending, ScopeHash: "s", Payload: json.RawMessage(`{}`),
					ConfirmHash: ledger.Digest("c" + id), CreatedAt: now, UpdatedAt: now, ExpiresAt: now.Add(time.Minute)}
				if err := tx.InsertChange(c); err != nil {
					return err
				}
				c.Status, c.ConfirmHash = ledger.Expired, ""
				if err := tx.UpdateChange(c, ledger.Pending); err != nil {
					return err
				}
			}
			return nil
		})
		if err != nil {
			b.Fatal(err)
		}
	}
	_, key, err := ed25519.GenerateKey(nil)
	if err != nil {
		b.Fatal(err)
	}
	b.ResetTimer()
	for b.Loop() {
		st, err := checkpoint.Take(ctx, l, key)
		if err != nil || st.Seq != 2*changes {
			b.Fatalf("Take = %+v, %v", st, err)
		}
	}
}
