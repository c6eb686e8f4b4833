package main

import (
	"os"
	"strings"
	"testing"

	"github.com/mcp-changeset/changeset-go/examples/internal/exampletest"
)

// storeSettings reads get_store_settings.
func (s *shop) storeSettings() storeSettings {
	s.t.Helper()
	var out settingsOut
	exampletest.Decode(s.t, s.Must("get_store_settings", nil), &out)
	return out.Settings
}

// 6. A new settings file reads as the defaults; set_store_setting writes
// one key, get_store_settings reads it, and the undo brings the default
// back, removing the key the change added.
func TestStoreSettings_DefaultsSetAndUndo(t *testing.T) {
	s := start(t)
	defaults := storeSettings{Currency: "USD", TaxRate: 0, StoreName: "My store"}
	if got := s.storeSettings(); got != defaults {
		t.Fatalf("a new shop's settings %+v, want the defaults %+v", got, defaults)
	}
	if fileExists(t, s.settings) {
		t.Fatal("reading the settings created the file")
	}

	p := s.Preview("set_store_setting", map[string]any{"key": "currency", "value": "EUR"})
	if len(p.Diff) != 1 || p.Diff[0].Field != "currency" || p.Diff[0].Before != "USD" || p.Diff[0].After != "EUR" {
		t.Fatalf("preview diff %s, want currency USD → EUR", jsonText(t, p.Diff))
	}
	if fileExists(t, s.settings) {
		t.Fatal("the preview wrote the settings file")
	}
	cur := s.Apply(p)
	want := defaults
	want.Currency = "EUR"
	if got := s.storeSettings(); got != want {
		t.Fatalf("after setting the currency %+v, want %+v", got, want)
	}

	rate := s.Apply(s.Preview("set_store_setting", map[string]any{"key": "tax_rate", "value": 0.2}))
	want.TaxRate = 0.2
	if got := s.storeSettings(); got != want {
		t.Fatalf("after setting the tax rate %+v, want %+v", got, want)
	}
	data, err := os.ReadFile(s.settings)
	if err != nil {
		t.Fatal(err)
	}
	if !strings.Contains(string(data), `"EUR"`) || !strings.Contains(string(data), `0.2`) || strings.Contains(string(data), "store_name") {
		t.Fatalf("the settings file holds %s, want the two keys set and no other", data)
	}

	s.Undo(cur)
	want.Currency = "USD"
	if got := s.storeSettings(); got != want {
		t.Fatalf("after the undo of the currency %+v, want %+v", got, want)
	}
	if data, _ := os.ReadFile(s.settings); strings.Contains(string(data), "currency") {
		t.Fatalf("the undo left the currency in the file: %s", data)
	}

	// A person's edit of the tax rate in the file: its undo is refused.
	if err := os.WriteFile(s.settings, []byte(`{"tax_rate": 0.25}`), 0o644); err != nil {
		t.Fatal(err)
	}
	s.UndoRefused(rate, "was not undone")
	if got := s.storeSettings(); got.TaxRate != 0.25 {
		t.Fatalf("after the refused undo the tax rate is %v, want the person's 0.25", got.TaxRate)
	}
}
