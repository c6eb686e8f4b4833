package main

import (
	"fmt"
	"math/big"
	"slices"
	"strings"
	"testing"

	"github.com/mcp-changeset/changeset-go/examples/internal/exampletest"
)

// The tea prices after +10%, rounded to whole cents: 1999 × 1.1 = 2198.9.
var teaPlus10 = map[string]int64{"TEA-001": 1100, "TEA-002": 1375, "TEA-003": 2199}

// One product's life: created, listed, updated, deleted, and each write
// undone; the undo of the delete brings back the same row, its id
// included.
func TestProducts_CreateUpdateDeleteAndUndo(t *testing.T) {
	s := start(t)
	s.HasTools("preview_create_product", "preview_update_product", "preview_delete_product", "preview_adjust_prices",
		"preview_set_store_setting", "list_products", "get_store_settings", "apply_change", "undo_change", "undo_run")
	var list struct {
		Products []product `json:"products"`
	}
	exampletest.Decode(t, s.Must("list_products", nil), &list)
	if list.Products == nil || len(list.Products) != 0 {
		t.Fatalf("a new shop lists %+v, want an empty list", list.Products)
	}

	p := s.Preview("create_product", map[string]any{"sku": "TEA-003", "name": "Green tea", "category": "tea", "price_cents": 450, "stock": 7})
	if !strings.Contains(p.Summary, "Green tea") || !strings.Contains(p.Summary, "TEA-003") {
		t.Errorf("create summary %q names neither the product's name nor its sku", p.Summary)
	}
	s.Apply(p)
	exampletest.Decode(t, s.Must("list_products", nil), &list)
	if len(list.Products) != 1 {
		t.Fatalf("after the create: %+v", list.Products)
	}
	got := list.Products[0]
	if got.SKU != "TEA-003" || got.Name != "Green tea" || got.Category != "tea" || got.PriceCents != 450 || got.Stock != 7 || got.UpdatedAt == "" {
		t.Fatalf("created %+v", got)
	}
	created := s.rows()["TEA-003"]

	up := s.Apply(s.Preview("update_product", map[string]any{"sku": "TEA-003", "stock": 5, "name": "Sencha"}))
	if r := s.rows()["TEA-003"]; r.Stock != 5 || r.Name != "Sencha" || r.PriceCents != 450 {
		t.Fatalf("after the update %+v", r)
	}
	s.Undo(up)
	sameRows(t, "after the undo of the update", unstamped(s.rows()), unstamped(map[string]row{"TEA-003": created}))

	before := s.rows()
	del := s.Apply(s.Preview("delete_product", map[string]any{"sku": "TEA-003"}))
	if len(s.rows()) != 0 {
		t.Fatalf("after the delete: %v", s.rows())
	}
	s.Undo(del)
	sameRows(t, "after the undo of the delete (the same id, every column)", unstamped(s.rows()), unstamped(before))
}

// 1. A price rise for a category is one change: the preview lists every
// row it changes and no other, the apply changes every price, and
// undo_change puts every row back exactly (all but updated_at, which every
// write stamps).
func TestAdjustPrices_OneChangeForEveryRowAndUndoRestoresExactly(t *testing.T) {
	s := start(t)
	seeded := s.seed()

	p := s.Preview("adjust_prices", map[string]any{"category": "tea", "percent": 10})
	diff := jsonText(t, p.Diff)
	for sku, price := range teaPlus10 {
		if !strings.Contains(diff, sku) || !strings.Contains(diff, fmt.Sprint(price)) {
			t.Errorf("the preview's diff does not show %s going to %d: %s", sku, price, diff)
		}
	}
	if strings.Contains(diff, "COF-001") {
		t.Errorf("the preview's diff names a coffee: %s", diff)
	}
	sameRows(t, "after the preview (nothing written)", s.rows(), seeded)

	a := s.Apply(p)
	after := s.rows()
	sameRows(t, "after the apply", unstamped(after), unstamped(withPrices(seeded, teaPlus10)))
	for sku := range teaPlus10 {
		if after[sku].UpdatedAt == seedStamp {
			t.Errorf("the apply did not stamp updated_at of %s", sku)
		}
	}
	if after["COF-001"] != seeded["COF-001"] {
		t.Errorf("the apply touched the coffee: %+v", after["COF-001"])
	}

	s.Undo(a)
	sameRows(t, "after the undo", unstamped(s.rows()), unstamped(seeded))
	if got := s.rows()["COF-001"]; got != seeded["COF-001"] {
		t.Errorf("the undo touched the coffee: %+v", got)
	}
	if st := s.Status(a.ChangeID); st != "undone" {
		t.Errorf("status %q after the undo, want undone", st)
	}
}

// 2. A person's new price for one tea after the rise: the rise's undo is
// refused and writes nothing (no row goes back while another stays), and a
// run's undo keeps the rise, naming the one product that moved.
func TestAdjustPrices_PersonsEditKeepsTheWholeChange(t *testing.T) {
	s := start(t)
	seeded := s.seed()
	run := s.StartRun("tea prices")
	_, a := s.adjust("tea", 10, run)
	s.exec(`UPDATE products SET price_cents = 1234 WHERE sku = 'TEA-002'`) // a person's edit
	want := s.rows()
	sameRows(t, "before the undo", unstamped(want), unstamped(withPrices(seeded, map[string]int64{"TEA-001": 1100, "TEA-002": 1234, "TEA-003": 2199})))

	dry := s.dryRun(run)
	if len(dry.WillUndo) != 0 {
		t.Errorf("the dry run plans %v, want nothing", exampletest.IDs(dry.WillUndo))
	}
	sk, ok := dry.skip(a.ChangeID)
	if !ok {
		t.Fatalf("the dry run does not skip the rise %s: %+v", a.ChangeID, dry)
	}
	if len(sk.Drift) != 1 || sk.Drift[0].Resource != "product:TEA-002" || sk.Drift[0].Field != "price_cents" ||
		string(sk.Drift[0].Expected) != "1375" || string(sk.Drift[0].Found) != "1234" {
		t.Errorf("the skipped rise's drift = %s, want only product:TEA-002's price_cents, 1375 → 1234 (entry %s)", jsonText(t, sk.Drift), jsonText(t, sk))
	}
	for _, d := range sk.Drift {
		if d.Resource != "product:TEA-002" {
			t.Errorf("the skipped rise's drift names a product no one moved: %s", jsonText(t, sk.Drift))
		}
	}
	sameRows(t, "after the dry run", s.rows(), want)

	s.UndoRefused(a, "was not undone")
	sameRows(t, "after the refused undo (nothing partial)", s.rows(), want)

	dry = s.dryRun(run)
	if _, ok := dry.skip(a.ChangeID); !ok || len(dry.WillUndo) != 0 {
		t.Fatalf("after the refused undo the dry run plans %v and skips %+v", exampletest.IDs(dry.WillUndo), dry.Skipped)
	}
	rep := s.undoRun(run, dry.ConfirmationToken)
	if len(rep.Undone) != 0 {
		t.Fatalf("the run's undo undid %v", exampletest.IDs(rep.Undone))
	}
	sameRows(t, "after the run's undo", s.rows(), want)
}

// 3. The application stamping updated_at on a row is no one's edit: the
// rise still undoes.
func TestAdjustPrices_UpdatedAtAloneDoesNotBlockTheUndo(t *testing.T) {
	s := start(t)
	seeded := s.seed()
	_, a := s.adjust("tea", 10, "")
	s.exec(`UPDATE products SET updated_at = '2030-06-01T12:00:00.000Z' WHERE sku = 'TEA-002'`)
	s.Undo(a)
	sameRows(t, "after the undo", unstamped(s.rows()), unstamped(seeded))
}

// 4. The intermediate value: a run sets a price 1000 → 1500 (c1), then
// 1500 → 2000 (c2); a person sets it back to 1500. The person's 1500
// stays: c2 is kept, so c1, older and on the same product, is kept too,
// even though the price equals what c1 left. The dry run plans neither,
// and the real undo writes nothing.
func TestRunUndo_KeepsThePriceAPersonSetBack(t *testing.T) {
	s := start(t)
	s.seed()
	run := s.StartRun("two price changes")
	c1 := s.setPrice("TEA-001", 1500, run)
	c2 := s.setPrice("TEA-001", 2000, run)
	s.exec(`UPDATE products SET price_cents = 1500 WHERE sku = 'TEA-001'`) // a person's edit
	want := s.rows()

	dry := s.dryRun(run)
	if len(dry.WillUndo) != 0 {
		t.Errorf("the dry run plans to undo %v, want neither change", exampletest.IDs(dry.WillUndo))
	}
	for name, id := range map[string]string{"c1": c1.ChangeID, "c2": c2.ChangeID} {
		if _, ok := dry.skip(id); !ok {
			t.Errorf("the dry run does not skip %s (%s): skipped %s", name, id, jsonText(t, dry.Skipped))
		}
	}
	if dry.ConfirmationToken != "" {
		rep := s.undoRun(run, dry.ConfirmationToken)
		if len(rep.Undone) != 0 {
			t.Errorf("the run's undo undid %v", exampletest.IDs(rep.Undone))
		}
	}
	if got := s.price("TEA-001"); got != 1500 {
		t.Fatalf("after the run's undo the price is %d, want the person's 1500", got)
	}
	sameRows(t, "after the run's undo", s.rows(), want)
}

// 5. A run with the rise and then a new price for one tea, undone as a
// run: the update first, then the rise, and every price is back.
func TestRunUndo_BulkChangeAndSingleUpdateNewestFirst(t *testing.T) {
	s := start(t)
	seeded := s.seed()
	run := s.StartRun("tea prices")
	_, rise := s.adjust("tea", 10, run)
	one := s.setPrice("TEA-002", 5000, run)
	sameRows(t, "before the undo", unstamped(s.rows()),
		unstamped(withPrices(seeded, map[string]int64{"TEA-001": 1100, "TEA-002": 5000, "TEA-003": 2199})))

	dry := s.dryRun(run)
	if got, want := exampletest.IDs(dry.WillUndo), []string{one.ChangeID, rise.ChangeID}; !slices.Equal(got, want) {
		t.Fatalf("the dry run plans %v (skipped %s), want the update then the rise %v", got, jsonText(t, dry.Skipped), want)
	}
	rep := s.undoRun(run, dry.ConfirmationToken)
	if got, want := exampletest.IDs(rep.Undone), []string{one.ChangeID, rise.ChangeID}; !slices.Equal(got, want) {
		t.Fatalf("the run's undo undid %v (skipped %s), want %v", got, jsonText(t, rep.Skipped), want)
	}
	sameRows(t, "after the run's undo", unstamped(s.rows()), unstamped(seeded))
}

// A new price is the old one times 1 + percent/100, rounded to the
// nearest cent, halves up, computed exactly from the decimal the agent
// wrote.
func TestAdjusted_RoundsToWholeCents(t *testing.T) {
	for _, c := range []struct {
		price   int64
		percent string
		want    int64
	}{
		{1999, "10", 2199},  // 2198.9
		{1005, "-50", 503},  // 502.5: halves up
		{1000, "0.1", 1001}, // exactly 1001, not a binary fraction below it
		{1, "10", 1},        // 1.1
		{333, "-90", 33},    // 33.3
		{100, "500", 600},
		{0, "25", 0},
	} {
		p, _ := new(big.Rat).SetString(c.percent)
		factor := p.Add(p.Quo(p, big.NewRat(100, 1)), big.NewRat(1, 1))
		if got := adjusted(c.price, factor); got != c.want {
			t.Errorf("%d, %s%%: %d, want %d", c.price, c.percent, got, c.want)
		}
	}
}
