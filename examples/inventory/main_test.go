package main

import (
	"database/sql"
	"encoding/json"
	"fmt"
	"maps"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"github.com/mcp-changeset/changeset-go/examples/internal/exampletest"
)

func TestMain(m *testing.M) { exampletest.Main(m) }

// shop is the inventory server over stdio, its products' database opened
// as a person (or another program) would open it, and its settings file.
type shop struct {
	*exampletest.Client
	t        *testing.T
	db       *sql.DB
	settings string
}

func start(t *testing.T) *shop {
	t.Helper()
	dir := t.TempDir()
	dbPath, settings := filepath.Join(dir, "shop.db"), filepath.Join(dir, "shop-settings.json")
	c := exampletest.Start(t, "inventory", []string{"--db", dbPath, "--settings", settings}, exampletest.Guarded)
	db, err := sql.Open("sqlite", "file:"+dbPath+"?_pragma=busy_timeout(5000)")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { db.Close() })
	return &shop{Client: c, t: t, db: db, settings: settings}
}

// row is one product as the table holds it, id included.
type row struct {
	ID         int64
	SKU        string
	Name       string
	Category   string
	PriceCents int64
	Stock      int64
	UpdatedAt  string
}

// seedStamp is the updated_at of the rows seed inserts.
const seedStamp = "2025-01-01T00:00:00.000Z"

// seed inserts three tea products and one coffee, as the shop's own
// application would have, straight in the database.
func (s *shop) seed() map[string]row {
	s.t.Helper()
	for _, r := range []row{
		{SKU: "TEA-001", Name: "Green tea", Category: "tea", PriceCents: 1000, Stock: 40},
		{SKU: "TEA-002", Name: "Black tea", Category: "tea", PriceCents: 1250, Stock: 12},
		{SKU: "TEA-003", Name: "Oolong", Category: "tea", PriceCents: 1999, Stock: 3},
		{SKU: "COF-001", Name: "Espresso beans", Category: "coffee", PriceCents: 1500, Stock: 20},
	} {
		s.exec(`INSERT INTO products (sku, name, category, price_cents, stock, updated_at) VALUES (?, ?, ?, ?, ?, ?)`,
			r.SKU, r.Name, r.Category, r.PriceCents, r.Stock, seedStamp)
	}
	return s.rows()
}

// exec is a write straight in the database: a person's edit, or the
// application's own.
func (s *shop) exec(query string, args ...any) {
	s.t.Helper()
	if _, err := s.db.Exec(query, args...); err != nil {
		s.t.Fatal(err)
	}
}

// rows reads the table with SQL of its own, by sku.
func (s *shop) rows() map[string]row {
	s.t.Helper()
	rs, err := s.db.Query(`SELECT id, sku, name, category, price_cents, stock, updated_at FROM products`)
	if err != nil {
		s.t.Fatal(err)
	}
	defer rs.Close()
	out := map[string]row{}
	for rs.Next() {
		var r row
		if err := rs.Scan(&r.ID, &r.SKU, &r.Name, &r.Category, &r.PriceCents, &r.Stock, &r.UpdatedAt); err != nil {
			s.t.Fatal(err)
		}
		out[r.SKU] = r
	}
	if err := rs.Err(); err != nil {
		s.t.Fatal(err)
	}
	return out
}

// price returns the price of sku in the table.
func (s *shop) price(sku string) int64 {
	s.t.Helper()
	r, ok := s.rows()[sku]
	if !ok {
		s.t.Fatalf("there is no product %s", sku)
	}
	return r.PriceCents
}

// unstamped is the table without updated_at: everything a person's edit
// or an undo is about.
func unstamped(rows map[string]row) map[string]row {
	out := make(map[string]row, len(rows))
	for k, r := range rows {
		r.UpdatedAt = ""
		out[k] = r
	}
	return out
}

// sameRows fails the test unless got and want hold the same rows.
func sameRows(t *testing.T, what string, got, want map[string]row) {
	t.Helper()
	if !maps.Equal(got, want) {
		t.Fatalf("%s:\n%s\nwant\n%s", what, dump(got), dump(want))
	}
}

func dump(rows map[string]row) string {
	var b strings.Builder
	for _, k := range slices.Sorted(maps.Keys(rows)) {
		fmt.Fprintf(&b, "  %+v\n", rows[k])
	}
	return b.String()
}

// withPrices is rows with the prices given by sku.
func withPrices(rows map[string]row, prices map[string]int64) map[string]row {
	out := maps.Clone(rows)
	for sku, p := range prices {
		r := out[sku]
		r.PriceCents = p
		out[sku] = r
	}
	return out
}

// runReport is undo_run's result, decoded here so that a skipped entry's
// several resources ("resources") are kept.
type runReport struct {
	RunID             string                `json:"run_id"`
	DryRun            bool                  `json:"dry_run"`
	Status            string                `json:"status"`
	WillUndo          []exampletest.RunStep `json:"will_undo"`
	Undone            []exampletest.RunStep `json:"undone"`
	Skipped           []skipped             `json:"skipped"`
	ConfirmationToken string                `json:"confirmation_token"`
}

type skipped struct {
	ChangeID  string              `json:"change_id"`
	Resource  string              `json:"resource"`
	Resources []string            `json:"resources"`
	Reason    string              `json:"reason"`
	Drift     []exampletest.Drift `json:"drift"`
}

func (r runReport) skip(id string) (skipped, bool) {
	for _, s := range r.Skipped {
		if s.ChangeID == id {
			return s, true
		}
	}
	return skipped{}, false
}

// dryRun calls undo_run with its default, a dry run.
func (s *shop) dryRun(run string) runReport {
	s.t.Helper()
	var r runReport
	exampletest.Decode(s.t, s.Must("undo_run", map[string]any{"run_id": run}), &r)
	if !r.DryRun || r.RunID != run {
		s.t.Fatalf("undo_run dry run: unexpected result %+v", r)
	}
	return r
}

// undoRun calls undo_run with dry_run=false and the dry run's token.
func (s *shop) undoRun(run, token string) runReport {
	s.t.Helper()
	var r runReport
	exampletest.Decode(s.t, s.Must("undo_run", map[string]any{"run_id": run, "dry_run": false, "confirmation_token": token}), &r)
	if r.DryRun || r.RunID != run {
		s.t.Fatalf("undo_run: unexpected result %+v", r)
	}
	return r
}

// adjust previews and applies adjust_prices, in run when run is set.
func (s *shop) adjust(category string, percent float64, run string) (exampletest.Preview, exampletest.Applied) {
	s.t.Helper()
	args := map[string]any{"category": category, "percent": percent}
	if run != "" {
		args["run_id"] = run
	}
	p := s.Preview("adjust_prices", args)
	return p, s.Apply(p)
}

// setPrice previews and applies update_product of the price of sku, in run
// when run is set.
func (s *shop) setPrice(sku string, price int64, run string) exampletest.Applied {
	s.t.Helper()
	args := map[string]any{"sku": sku, "price_cents": price}
	if run != "" {
		args["run_id"] = run
	}
	return s.Apply(s.Preview("update_product", args))
}

func fileExists(t *testing.T, path string) bool {
	t.Helper()
	_, err := os.Stat(path)
	if err != nil && !os.IsNotExist(err) {
		t.Fatal(err)
	}
	return err == nil
}

func jsonText(t *testing.T, v any) string {
	t.Helper()
	b, err := json.Marshal(v)
	if err != nil {
		t.Fatal(err)
	}
	return string(b)
}
