package main

import (
	"context"
	"encoding/json"
	"log/slog"
	"os"
	"path/filepath"
	"testing"

	changeset "github.com/mcp-changeset/changeset-go"
	"github.com/mcp-changeset/changeset-go/changesettest"
	"github.com/mcp-changeset/changeset-go/kv"
)

// TestCheckOperation_Inventory checks the products' create_product,
// update_product, delete_product and adjust_prices and the store's
// set_store_setting in process, registered by the example's own register
// functions on a products database and a settings file in a temporary
// directory.
func TestCheckOperation_Inventory(t *testing.T) {
	ctx := context.Background()
	dir := t.TempDir()
	settingsPath := filepath.Join(dir, "shop.settings.json")
	if err := os.WriteFile(settingsPath, []byte(`{"currency": "GBP"}`+"\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	db, err := openDB(ctx, filepath.Join(dir, "shop.db"))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { db.Close() })
	products, err := openProducts(ctx, db)
	if err != nil {
		t.Fatal(err)
	}
	s := &shop{t: t, db: db, settings: settingsPath} // no server process: only its database helpers
	seeded := s.seed()

	g := changesettest.NewGuard(t, changeset.Options{})
	registerProducts(g.Server, g.Guard, db, products)
	registerSettings(g.Server, g.Guard, kv.NewJSONFile(settingsPath), slog.New(slog.DiscardHandler))

	changesettest.CheckOperation(t, g, "create_product",
		createIn{SKU: "TEA-004", Name: "Sencha", Category: "tea", PriceCents: 850, Stock: 30},
		createIn{SKU: "MUG-001", Name: "Mug «café» ☕", Category: "kitchen", PriceCents: 0, Stock: 0},
	)
	price, stock, name, category := int64(1099), int64(0), "Gunpowder green tea", "green-tea"
	changesettest.CheckOperation(t, g, "update_product",
		updateIn{SKU: "TEA-001", PriceCents: &price},
		updateIn{SKU: "TEA-002", Stock: &stock},
		updateIn{SKU: "TEA-001", Name: &name, Category: &category},
	)
	changesettest.CheckOperation(t, g, "delete_product",
		deleteIn{SKU: "TEA-003"},
		deleteIn{SKU: "COF-001"},
	)
	changesettest.CheckOperation(t, g, "adjust_prices",
		adjustIn{Category: "tea", Percent: 10},
		adjustIn{Category: "coffee", Percent: -25},
		adjustIn{Category: "tea", Percent: 2.5},
	)
	changesettest.CheckOperation(t, g, "set_store_setting",
		setSettingIn{Key: "currency", Value: json.RawMessage(`"EUR"`)}, // a key the file holds
		setSettingIn{Key: "tax_rate", Value: json.RawMessage(`0.2`)},   // a key it does not
		setSettingIn{Key: "store_name", Value: json.RawMessage(`"Tea & Co. ☕"`)},
	)

	// The checks undo what they apply: every product as it was (the
	// updated_at stamps aside, which every write sets), and the settings
	// as the file held them.
	sameRows(t, "after the checks", unstamped(s.rows()), unstamped(seeded))
	var out settingsOut
	if err := g.Call("get_store_settings", nil, &out); err != nil {
		t.Fatal(err)
	}
	if want := (storeSettings{Currency: "GBP", TaxRate: 0, StoreName: "My store"}); out.Settings != want {
		t.Errorf("after the checks get_store_settings gives %+v, want %+v", out.Settings, want)
	}
	all, err := kv.NewJSONFile(settingsPath).All(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if len(all) != 1 || string(all["currency"]) != `"GBP"` {
		t.Errorf("after the checks the settings file holds %v, want currency GBP only (the undo of a key it lacked removes it)", jsonText(t, all))
	}
}
