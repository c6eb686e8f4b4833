package main

import (
	"testing"
)

// 7. Input the shop must not hold is refused at preview with a message
// that says what is wrong, and nothing is written.
func TestRefusals_InvalidInputWritesNothing(t *testing.T) {
	s := start(t)
	seeded := s.seed()
	for _, c := range []struct {
		op   string
		args map[string]any
		want string
	}{
		{"create_product", map[string]any{"sku": "tea 4", "name": "Rooibos", "category": "tea", "price_cents": 900, "stock": 1}, `"tea 4" is not a SKU`},
		{"create_product", map[string]any{"sku": "TEA-004", "name": " ", "category": "tea", "price_cents": 900, "stock": 1}, "name must be 1 to 200 characters"},
		{"create_product", map[string]any{"sku": "TEA-004", "name": "Rooibos", "category": "Herbal Tea", "price_cents": 900, "stock": 1}, `"Herbal Tea" is not a category`},
		{"create_product", map[string]any{"sku": "TEA-004", "name": "Rooibos", "category": "tea", "price_cents": -1, "stock": 1}, "price_cents must be between 0 and"},
		{"create_product", map[string]any{"sku": "TEA-004", "name": "Rooibos", "category": "tea", "price_cents": 900, "stock": -3}, "stock must be between 0 and"},
		{"create_product", map[string]any{"sku": "TEA-001", "name": "Rooibos", "category": "tea", "price_cents": 900, "stock": 1}, "already exists"},
		{"create_product", map[string]any{"sku": "TEA-004", "name": "Rooibos", "category": "tea", "price_cents": 900}, "stock"},
		{"update_product", map[string]any{"sku": "TEA-404", "price_cents": 900}, "there is no product"},
		{"update_product", map[string]any{"sku": "TEA-001", "price_cents": -5}, "price_cents must be between 0 and"},
		{"update_product", map[string]any{"sku": "TEA-001", "stock": -1}, "stock must be between 0 and"},
		{"update_product", map[string]any{"sku": "TEA-001"}, "changes nothing"},
		{"update_product", map[string]any{"sku": "TEA-001", "price_cents": 1000}, "changes nothing"},
		{"update_product", map[string]any{"sku": "TEA-001", "sku2": "x"}, "sku2"},
		{"delete_product", map[string]any{"sku": "'; DROP TABLE products; --"}, "is not a SKU"},
		{"delete_product", map[string]any{"sku": "TEA-404"}, "there is no product"},
		{"adjust_prices", map[string]any{"category": "herbal", "percent": 10}, `no product is in the category "herbal"`},
		{"adjust_prices", map[string]any{"category": "tea", "percent": 501}, "percent must be between -90 and 500, not 501"},
		{"adjust_prices", map[string]any{"category": "tea", "percent": -90.5}, "percent must be between -90 and 500, not -90.5"},
		{"adjust_prices", map[string]any{"category": "tea", "percent": 0}, "a percent of 0 changes no price"},
		{"adjust_prices", map[string]any{"category": "Tea!", "percent": 5}, `"Tea!" is not a category`},
		{"set_store_setting", map[string]any{"key": "colour", "value": "blue"}, `there is no store setting "colour"; the settings are currency, store_name, tax_rate`},
		{"set_store_setting", map[string]any{"key": "currency", "value": "euro"}, `currency takes a three-letter ISO 4217 code`},
		{"set_store_setting", map[string]any{"key": "currency", "value": 978}, `currency takes`},
		{"set_store_setting", map[string]any{"key": "tax_rate", "value": 1.5}, "tax_rate takes a number from 0 to 1"},
		{"set_store_setting", map[string]any{"key": "tax_rate", "value": "0.2"}, "tax_rate takes a number from 0 to 1"},
		{"set_store_setting", map[string]any{"key": "store_name", "value": ""}, "store_name takes a name of 1 to 100 characters"},
		{"set_store_setting", map[string]any{"key": "store_name", "value": nil}, "store_name takes"},
		{"set_store_setting", map[string]any{"key": "currency", "value": "USD"}, "already holds this value; nothing would change"},
	} {
		s.Refused("preview_"+c.op, c.args, c.want)
	}
	sameRows(t, "after the refusals", s.rows(), seeded)
	if fileExists(t, s.settings) {
		t.Fatal("a refused setting created the settings file")
	}
}
