// The products' tools: create_product, update_product, delete_product and
// adjust_prices, guarded through the SQL-table adapter, and the read tool
// list_products.

package main

import (
	"context"
	"database/sql"
	"math/big"
	"regexp"
	"strconv"
	"strings"
	"time"
	"unicode"

	changeset "github.com/mcp-changeset/changeset-go"
	"github.com/mcp-changeset/changeset-go/sqltable"
	"github.com/modelcontextprotocol/go-sdk/mcp"
)

// Bounds of what the server accepts.
const (
	maxPrice = 100_000_000_000 // cents: a thousand million in the currency
	maxStock = 1_000_000_000
	// minPercent and maxPercent bound a price adjustment: -90% (a tenth of
	// the price is left) to +500% (six times the price).
	minPercent, maxPercent = -90, 500
	// maxBulkRows bounds the products one adjust_prices may change: the
	// change stores every row before and after, within the ledger's 64 KiB.
	maxBulkRows = 50
)

var (
	validSKU      = regexp.MustCompile(`^[A-Z0-9][A-Z0-9-]{1,31}$`)
	validCategory = regexp.MustCompile(`^[a-z0-9][a-z0-9-]{0,39}$`)
)

// openProducts opens the products table for the adapter: a product is
// named by its sku ("product:TEA-001") and, in summaries, by its name;
// updated_at is stamped on every write, and a stamped column is left out of
// diffs and state checks: it is no one's work.
func openProducts(ctx context.Context, db *sql.DB) (*sqltable.Table, error) {
	return sqltable.Open(ctx, db, sqltable.Config{
		Table:      "products",
		Kind:       "product",
		Key:        "sku",
		Label:      "name",
		Stamp:      "updated_at",
		StampValue: func() any { return time.Now().UTC().Format("2006-01-02T15:04:05.000Z") },
		MaxRows:    maxBulkRows,
	})
}

// The tools' inputs and list_products' output.
type (
	createIn struct {
		SKU        string `json:"sku" jsonschema:"the product's stock-keeping unit: 2 to 32 upper-case letters, digits and hyphens, e.g. TEA-003"`
		Name       string `json:"name" jsonschema:"the product's name, e.g. Green tea"`
		Category   string `json:"category" jsonschema:"the product's category: lower-case letters, digits and hyphens, e.g. tea"`
		PriceCents int64  `json:"price_cents" jsonschema:"the price in cents (whole units of the store's currency times 100), 0 or more"`
		Stock      int64  `json:"stock" jsonschema:"how many are in stock, 0 or more"`
	}
	updateIn struct {
		SKU        string  `json:"sku" jsonschema:"the product to change"`
		Name       *string `json:"name,omitempty" jsonschema:"the new name; leave out to keep it"`
		Category   *string `json:"category,omitempty" jsonschema:"the new category; leave out to keep it"`
		PriceCents *int64  `json:"price_cents,omitempty" jsonschema:"the new price in cents; leave out to keep it"`
		Stock      *int64  `json:"stock,omitempty" jsonschema:"the new stock; leave out to keep it"`
	}
	deleteIn struct {
		SKU string `json:"sku" jsonschema:"the product to delete"`
	}
	adjustIn struct {
		Category string  `json:"category" jsonschema:"the category whose every product gets the new price"`
		Percent  float64 `json:"percent" jsonschema:"the change in percent, -90 to 500: 10 raises every price by a tenth, -25 lowers it by a quarter; new prices are rounded to whole cents"`
	}
	product struct {
		SKU        string `json:"sku" jsonschema:"the product's stock-keeping unit, which names it"`
		Name       string `json:"name" jsonschema:"the product's name"`
		Category   string `json:"category" jsonschema:"the product's category"`
		PriceCents int64  `json:"price_cents" jsonschema:"the price in cents"`
		Stock      int64  `json:"stock" jsonschema:"how many are in stock"`
		UpdatedAt  string `json:"updated_at" jsonschema:"when the product was last written, RFC 3339 in UTC"`
	}
	listOut struct {
		Products []product `json:"products" jsonschema:"every product, by sku"`
	}
)

// registerProducts adds the four guarded operations and list_products.
func registerProducts(server *mcp.Server, guard *changeset.Guard, db *sql.DB, products *sqltable.Table) {
	sqltable.Create(guard, &mcp.Tool{Name: "create_product", Description: "Add a product."}, products,
		func(_ context.Context, in createIn) (sqltable.Row, error) {
			err := checkProduct(&in.SKU, &in.Name, &in.Category, &in.PriceCents, &in.Stock)
			return sqltable.Row{"sku": in.SKU, "name": in.Name, "category": in.Category,
				"price_cents": in.PriceCents, "stock": in.Stock}, err
		})
	sqltable.Update(guard, &mcp.Tool{Name: "update_product", Description: "Change a product's name, category, price or stock; fields left out keep their value."}, products,
		func(_ context.Context, in updateIn) (any, sqltable.Row, error) {
			set := sqltable.Row{}
			if in.Name != nil {
				set["name"] = *in.Name
			}
			if in.Category != nil {
				set["category"] = *in.Category
			}
			if in.PriceCents != nil {
				set["price_cents"] = *in.PriceCents
			}
			if in.Stock != nil {
				set["stock"] = *in.Stock
			}
			return in.SKU, set, checkProduct(&in.SKU, in.Name, in.Category, in.PriceCents, in.Stock)
		})
	sqltable.Delete(guard, &mcp.Tool{Name: "delete_product", Description: "Delete a product."}, products,
		func(_ context.Context, in deleteIn) (any, error) {
			return in.SKU, checkProduct(&in.SKU, nil, nil, nil, nil)
		})
	sqltable.UpdateMatching(guard, &mcp.Tool{Name: "adjust_prices", Description: "Raise or lower the price of every product of a category by a percentage, as one change that is undone as one."}, products,
		func(ctx context.Context, in adjustIn) (sqltable.Row, func(sqltable.Row) (sqltable.Row, error), error) {
			factor, err := checkAdjust(ctx, db, in)
			if err != nil {
				return nil, nil, err
			}
			return sqltable.Row{"category": in.Category}, func(row sqltable.Row) (sqltable.Row, error) {
				price, ok := row["price_cents"].(int64)
				if !ok {
					return nil, changeset.Refuse("product %q has a price this server cannot read (%v); fix it by hand", row["sku"], row["price_cents"])
				}
				next := adjusted(price, factor)
				if next > maxPrice {
					return nil, changeset.Refuse("the new price of product %q would be %d cents, above the limit of %d", row["sku"], next, int64(maxPrice))
				}
				return sqltable.Row{"price_cents": next}, nil
			}, nil
		})

	mcp.AddTool(server, &mcp.Tool{Name: "list_products", Description: "List every product, by sku.", Annotations: &mcp.ToolAnnotations{ReadOnlyHint: true}},
		func(ctx context.Context, _ *mcp.CallToolRequest, _ struct{}) (*mcp.CallToolResult, listOut, error) {
			out, err := listProducts(ctx, db)
			return nil, listOut{Products: out}, err
		})
}

// listProducts reads every product, by sku.
func listProducts(ctx context.Context, db *sql.DB) ([]product, error) {
	rows, err := db.QueryContext(ctx, `SELECT sku, name, category, price_cents, stock, updated_at FROM products ORDER BY sku`)
	if err != nil {
		return nil, err
	}
	defer rows.Close()
	out := []product{}
	for rows.Next() {
		var p product
		if err := rows.Scan(&p.SKU, &p.Name, &p.Category, &p.PriceCents, &p.Stock, &p.UpdatedAt); err != nil {
			return nil, err
		}
		out = append(out, p)
	}
	return out, rows.Err()
}

// checkProduct refuses a field the table must not hold; nil stands for a
// field left out.
func checkProduct(sku, name, category *string, price, stock *int64) error {
	if sku != nil && !validSKU.MatchString(*sku) {
		return changeset.Refuse("%s is not a SKU: use 2 to 32 upper-case letters, digits and hyphens, starting with a letter or digit, e.g. TEA-003", strconv.Quote(*sku))
	}
	if name != nil {
		if n := len([]rune(*name)); strings.TrimSpace(*name) == "" || n > 200 || strings.IndexFunc(*name, unicode.IsControl) >= 0 {
			return changeset.Refuse("a product's name must be 1 to 200 characters, not blank, without control characters")
		}
	}
	if category != nil && !validCategory.MatchString(*category) {
		return changeset.Refuse("%s is not a category: use 1 to 40 lower-case letters, digits and hyphens, e.g. tea", strconv.Quote(*category))
	}
	if price != nil && (*price < 0 || *price > maxPrice) {
		return changeset.Refuse("price_cents must be between 0 and %d, not %d", int64(maxPrice), *price)
	}
	if stock != nil && (*stock < 0 || *stock > maxStock) {
		return changeset.Refuse("stock must be between 0 and %d, not %d", int64(maxStock), *stock)
	}
	return nil
}

// checkAdjust refuses a price adjustment the server does not make (a
// category that is not valid or holds no product, a percentage out of
// bounds or zero) and returns the factor every price is multiplied by,
// exactly: 1 + percent/100, the percentage read as the decimal the agent
// wrote.
func checkAdjust(ctx context.Context, db *sql.DB, in adjustIn) (*big.Rat, error) {
	if err := checkProduct(nil, nil, &in.Category, nil, nil); err != nil {
		return nil, err
	}
	switch {
	case in.Percent == 0:
		return nil, changeset.Refuse("a percent of 0 changes no price")
	case in.Percent < minPercent || in.Percent > maxPercent:
		return nil, changeset.Refuse("percent must be between %d and %d, not %s", minPercent, maxPercent, strconv.FormatFloat(in.Percent, 'f', -1, 64))
	}
	var n int
	if err := db.QueryRowContext(ctx, `SELECT count(*) FROM products WHERE category = ?`, in.Category).Scan(&n); err != nil {
		return nil, err
	}
	if n == 0 {
		return nil, changeset.Refuse("no product is in the category %s; list_products shows the categories", strconv.Quote(in.Category))
	}
	// The shortest decimal that reads back as the float: 2.5 is 5/2
	// exactly, and 0.1 is 1/10, not the binary fraction nearest it.
	p, ok := new(big.Rat).SetString(strconv.FormatFloat(in.Percent, 'f', -1, 64))
	if !ok {
		return nil, changeset.Refuse("percent %v is not a number", in.Percent)
	}
	return p.Add(p.Quo(p, big.NewRat(100, 1)), big.NewRat(1, 1)), nil
}

// adjusted is price times factor, rounded to a whole cent, halves up
// (prices and factors are never negative).
func adjusted(price int64, factor *big.Rat) int64 {
	r := new(big.Rat).Mul(new(big.Rat).SetInt64(price), factor)
	r.Add(r, big.NewRat(1, 2))
	q := new(big.Int).Quo(r.Num(), r.Denom()) // floor: r is not negative
	return q.Int64()
}
