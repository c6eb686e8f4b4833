// Command inventory is a shop's back office as an MCP server: products in
// the application's own SQLite database and store settings in a JSON file,
// every write guarded (preview, apply once with the preview's token, undo).
//
//	MCP_CHANGESET_WRITE_MODE=guarded go run ./examples/inventory --db /tmp/shop.db
//
// Products are rows of the table products, written through the SQL-table
// adapter (package sqltable): create_product, update_product and
// delete_product change one row each; adjust_prices changes the price of
// every product of a category as ONE change with one resource per row
// ("product:TEA-001", "product:TEA-002", …), each row compare-and-set, and
// its undo puts every row back exactly or none of them. The column
// updated_at is stamped on every write the server makes and does not count
// as a person's edit: an application that touches only updated_at blocks
// no undo, while a person who changes a price does, and a run's undo then
// keeps that person's price and says which product moved.
//
// Store settings (currency, tax_rate, store_name) live in a JSON file,
// --settings, by default beside the database (shop.db → shop.settings.json);
// a key the file does not hold has its default value. set_store_setting
// changes one key, compare-and-set on the file (see settings.go).
//
// The tools are in products.go and settings.go. See --help for the flags
// every example shares (--ledger, --http, --auth-token-file, …).
package main

import (
	"context"
	"database/sql"
	"errors"
	"flag"
	"fmt"
	"log/slog"
	"path/filepath"
	"strings"

	changeset "github.com/mcp-changeset/changeset-go"
	"github.com/mcp-changeset/changeset-go/kv"
	_ "github.com/mcp-changeset/changeset-go/ledger/postgres" // --ledger postgres://…
	"github.com/mcp-changeset/changeset-go/ledger/sqlite"
	"github.com/mcp-changeset/changeset-go/serve"
	"github.com/modelcontextprotocol/go-sdk/mcp"
	_ "modernc.org/sqlite" // the products' database
)

func main() {
	var dbPath, settingsPath string
	serve.Main(serve.Program{
		Name:     "inventory",
		Synopsis: "--db PATH [--settings FILE] [flags]",
		About: `A shop's products in their own SQLite database and its settings in a JSON
file, with guarded writes. Tools: preview_create_product,
preview_update_product, preview_delete_product, preview_adjust_prices,
preview_set_store_setting, list_products, get_store_settings, and the shared
apply_change, undo_change, get_change_status and run tools.`,
		Flags: func(fs *flag.FlagSet) {
			fs.StringVar(&dbPath, "db", "", "the SQLite `file` of the products (required; created if missing)")
			fs.StringVar(&settingsPath, "settings", "", "the JSON `file` of the store settings (default: beside --db, NAME.settings.json; created by the first write)")
		},
		Check: func(f serve.Flags) error {
			if dbPath == "" {
				return errors.New("--db is required: the products' own database, another file than the ledger")
			}
			if settingsPath == "" {
				settingsPath = strings.TrimSuffix(dbPath, filepath.Ext(dbPath)) + ".settings.json"
			}
			db, _ := filepath.Abs(dbPath)
			settings, _ := filepath.Abs(settingsPath)
			ledger, _ := filepath.Abs(f.Ledger)
			switch {
			case db == ledger:
				return errors.New("--db must be another file than the ledger")
			case settings == db || settings == ledger:
				return errors.New("--settings must be another file than --db and the ledger")
			}
			return nil
		},
		Setup: func(server *mcp.Server, guard *changeset.Guard, log *slog.Logger) error {
			db, err := openDB(context.Background(), dbPath)
			if err != nil {
				return err
			}
			products, err := openProducts(context.Background(), db)
			if err != nil {
				return err
			}
			registerProducts(server, guard, db, products)
			registerSettings(server, guard, kv.NewJSONFile(settingsPath), log)
			return nil
		},
	})
}

// schema is the products table. id is SQLite's row id, an ordinary column
// to the adapter; a product is named by its sku.
const schema = `CREATE TABLE IF NOT EXISTS products (
    id          INTEGER PRIMARY KEY,
    sku         TEXT UNIQUE NOT NULL,
    name        TEXT NOT NULL,
    category    TEXT NOT NULL,
    price_cents INTEGER NOT NULL,
    stock       INTEGER NOT NULL,
    updated_at  TEXT NOT NULL
)`

// openDB opens the products' database with the settings the ledger uses
// for SQLite (every transaction BEGIN IMMEDIATE, a busy timeout, WAL,
// synchronous FULL, foreign keys), checks that WAL took, and creates the table if it is
// missing.
func openDB(ctx context.Context, path string) (*sql.DB, error) {
	dsn, err := sqlite.DSN(path) // the ledger's settings, for the app's own file
	if err != nil {
		return nil, err
	}
	db, err := sql.Open("sqlite", dsn)
	if err != nil {
		return nil, err
	}
	var mode string
	if err := db.QueryRowContext(ctx, "PRAGMA journal_mode").Scan(&mode); err != nil {
		db.Close()
		return nil, fmt.Errorf("open %s: %w", path, err)
	}
	if mode != "wal" {
		db.Close()
		return nil, fmt.Errorf("open %s: journal_mode is %q, not wal", path, mode)
	}
	if _, err := db.ExecContext(ctx, schema); err != nil {
		db.Close()
		return nil, fmt.Errorf("create the products table in %s: %w", path, err)
	}
	return db, nil
}
