package sqltable_test

import (
	"context"
	"fmt"
	"log"
	"os"
	"path/filepath"

	changeset "github.com/mcp-changeset/changeset-go"
	"github.com/mcp-changeset/changeset-go/sqltable"
	"github.com/modelcontextprotocol/go-sdk/mcp"
)

type adjustIn struct {
	Category string `json:"category"`
	Percent  int64  `json:"percent"`
}

// A price rise for one category: one change whose resources are the rows
// it updates, applied to every row or none, and undone the same way.
func ExampleUpdateMatching() {
	ctx := context.Background()
	dir, _ := os.MkdirTemp("", "sqltable-example")
	defer os.RemoveAll(dir)
	guard, err := changeset.New(nil, changeset.Options{LedgerPath: filepath.Join(dir, "ledger.db"), WriteMode: changeset.WriteGuarded})
	if err != nil {
		log.Fatal(err)
	}
	defer guard.Close()

	db := guard.Ledger().DB() // the ledger's database: exactly-once applies
	if _, err := db.Exec(`CREATE TABLE products (sku TEXT PRIMARY KEY, name TEXT NOT NULL, category TEXT NOT NULL,
		price_cents INTEGER NOT NULL, updated_at TEXT NOT NULL);
	INSERT INTO products VALUES ('TEA-001', 'Green tea', 'tea', 450, ''), ('TEA-002', 'Black tea', 'tea', 390, ''),
		('COF-001', 'Espresso', 'coffee', 1200, '')`); err != nil {
		log.Fatal(err)
	}
	products, err := sqltable.Open(ctx, db, sqltable.Config{Table: "products", Kind: "product", Key: "sku",
		Label: "name", Stamp: "updated_at"})
	if err != nil {
		log.Fatal(err)
	}
	sqltable.UpdateMatching(guard, &mcp.Tool{Name: "adjust_prices"}, products,
		func(ctx context.Context, in adjustIn) (sqltable.Row, func(sqltable.Row) (sqltable.Row, error), error) {
			return sqltable.Row{"category": in.Category}, func(r sqltable.Row) (sqltable.Row, error) {
				return sqltable.Row{"price_cents": r["price_cents"].(int64) * (100 + in.Percent) / 100}, nil
			}, nil
		})

	p, err := guard.Preview(ctx, "adjust_prices", adjustIn{Category: "tea", Percent: 10})
	if err != nil {
		log.Fatal(err)
	}
	fmt.Println(p.Summary)
	for _, d := range p.Diff {
		fmt.Printf("  %s: %s → %s\n", d.Field, d.Before, d.After)
	}
	applied, err := guard.Apply(ctx, p.ChangeID, p.ConfirmationToken)
	if err != nil {
		log.Fatal(err)
	}
	tea, _ := products.Get(ctx, "TEA-001")
	fmt.Println("after the apply:", tea["price_cents"], tea["updated_at"] != "")
	if _, err := guard.Undo(ctx, p.ChangeID, applied.UndoToken); err != nil {
		log.Fatal(err)
	}
	tea, _ = products.Get(ctx, "TEA-001")
	fmt.Println("after the undo:", tea["price_cents"])
	// Output:
	// Update 2 products where category = "tea"
	//   TEA-001 price_cents: 450 → 495
	//   TEA-002 price_cents: 390 → 429
	// after the apply: 495 true
	// after the undo: 450
}
