package kv_test

import (
	"context"
	"encoding/json"
	"errors"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"testing"

	changeset "github.com/mcp-changeset/changeset-go"
	"github.com/mcp-changeset/changeset-go/kv"
	"github.com/modelcontextprotocol/go-sdk/mcp"
)

type settingsIn struct {
	Values map[string]any `json:"values"`
}

// item is a value with members that do not count: a stamp the application
// writes and a position people move.
type item struct {
	Name      string `json:"name"`
	Price     int    `json:"price"`
	UpdatedAt string `json:"updated_at,omitempty"`
	Position  int    `json:"position,omitempty"`
}

type pricesIn struct {
	Prices map[string]int `json:"prices"`
}

type priceIn struct {
	Key   string `json:"key"`
	Price int    `json:"price"`
	Stamp string `json:"stamp"`
}

// newManyEnv is a Guard on store with set_settings (SetMany of plain
// values), and set_prices (SetMany) and update_item (Update, stamping
// updated_at) on items whose updated_at and position are ignored.
func newManyEnv(t *testing.T, store kv.Store) *env {
	t.Helper()
	g, err := changeset.New(mcp.NewServer(&mcp.Implementation{Name: "kv", Version: "1"}, nil),
		changeset.Options{LedgerPath: filepath.Join(t.TempDir(), "ledger.db"), WriteMode: changeset.WriteGuarded})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { g.Close() })
	settings := kv.Kind[any]{Name: "setting", Store: store}
	kv.SetMany(g, &mcp.Tool{Name: "set_settings"}, settings, func(ctx context.Context, in settingsIn) (map[string]any, error) {
		return in.Values, nil
	})
	items := kv.Kind[item]{Name: "item", Store: store, Ignore: []string{"updated_at", "position"}}
	kv.SetMany(g, &mcp.Tool{Name: "set_prices"}, items, func(ctx context.Context, in pricesIn) (map[string]item, error) {
		out := map[string]item{}
		for key, p := range in.Prices {
			out[key] = item{Name: strings.ToUpper(key), Price: p}
		}
		return out, nil
	})
	kv.Update(g, &mcp.Tool{Name: "update_item"}, items, func(in priceIn) string { return in.Key },
		func(ctx context.Context, in priceIn, cur item) (item, error) {
			cur.Price, cur.UpdatedAt = in.Price, in.Stamp
			return cur, nil
		})
	return &env{t: t, g: g, store: store}
}

// keyByKey hides a store's SwapAll: the adapter then swaps one key at a
// time and swaps back on a failure.
type keyByKey struct{ kv.Store }

// hooked calls before ahead of every Swap (n counts them from 1), and of
// every SwapAll when the store it wraps has one.
type hooked struct {
	kv.Store
	mu     sync.Mutex
	n      int
	before func(n int, key string)
}

func (h *hooked) Swap(ctx context.Context, key string, prev, next json.RawMessage) error {
	h.hook(key)
	return h.Store.Swap(ctx, key, prev, next)
}

func (h *hooked) hook(key string) {
	h.mu.Lock()
	h.n++
	n, before := h.n, h.before
	h.mu.Unlock()
	if before != nil {
		before(n, key)
	}
}

type hookedBatch struct{ *hooked }

func (h hookedBatch) SwapAll(ctx context.Context, swaps []kv.Swap) error {
	h.hook(swaps[0].Key)
	return h.Store.(kv.Batcher).SwapAll(ctx, swaps)
}

// eachStore runs fn on a JSONFile (path is its file), a Map and a Map
// swapped key by key (path is "").
func eachStore(t *testing.T, fn func(t *testing.T, store kv.Store, path string)) {
	t.Run("JSONFile", func(t *testing.T) {
		path := filepath.Join(t.TempDir(), "settings.json")
		fn(t, kv.NewJSONFile(path), path)
	})
	t.Run("Map", func(t *testing.T) { fn(t, &kv.Map{}, "") })
	t.Run("KeyByKey", func(t *testing.T) { fn(t, keyByKey{&kv.Map{}}, "") })
}

// values is every key of the store with its canonical value.
func (e *env) values(keys ...string) map[string]string {
	e.t.Helper()
	out := map[string]string{}
	for _, k := range keys {
		out[k] = e.value(k)
	}
	return out
}

func sameMaps(a, b map[string]string) bool {
	if len(a) != len(b) {
		return false
	}
	for k, v := range a {
		if b[k] != v {
			return false
		}
	}
	return true
}

func TestSetMany_AppliesAndUndoesEveryKeyExactly(t *testing.T) {
	eachStore(t, func(t *testing.T, store kv.Store, path string) {
		e := newManyEnv(t, store)
		e.put("currency", `"USD"`)
		e.put("tax_rate", `0.2`)
		start := e.values("currency", "tax_rate", "store_name")
		var file string
		if path != "" {
			file = readFile(t, path)
		}

		p := e.preview("set_settings", settingsIn{Values: map[string]any{"currency": "EUR", "tax_rate": 0.2, "store_name": "Tea and Co"}})
		if p.Summary != "Set setting currency, store_name" {
			t.Errorf("summary %q", p.Summary)
		}
		if len(p.Diff) != 2 || p.Diff[0].Field != "currency" || p.Diff[0].Kind != "changed" || string(p.Diff[0].Before) != `"USD"` || string(p.Diff[0].After) != `"EUR"` ||
			p.Diff[1].Field != "store_name" || p.Diff[1].Kind != "added" || string(p.Diff[1].After) != `"Tea and Co"` {
			t.Errorf("diff %+v", p.Diff)
		}
		rec, err := e.g.Record(ctx, p.ChangeID)
		if err != nil || !slices.Equal(rec.Resources, []string{"setting:currency", "setting:store_name"}) {
			t.Fatalf("resources %v (%v)", rec.Resources, err)
		}
		a := e.apply(p)
		if got := e.values("currency", "tax_rate", "store_name"); !sameMaps(got, map[string]string{"currency": `"EUR"`, "tax_rate": "0.2", "store_name": `"Tea and Co"`}) {
			t.Fatalf("after apply: %v", got)
		}
		if string(a.Result) != `{"keys":[{"key":"currency","value":"EUR"},{"key":"store_name","value":"Tea and Co"}]}` {
			t.Errorf("result %s", a.Result)
		}
		if err := e.undo(a); err != nil {
			t.Fatal(err)
		}
		if got := e.values("currency", "tax_rate", "store_name"); !sameMaps(got, start) {
			t.Fatalf("after undo: %v, want %v", got, start)
		}
		if file != "" {
			if got := readFile(t, path); got != file {
				t.Fatalf("the file after the undo:\n%s\nwant:\n%s", got, file)
			}
		}
		e.refused("set_settings", settingsIn{Values: map[string]any{"currency": "USD", "tax_rate": 0.20}}, "every setting already holds its value; nothing to change")
		e.refused("set_settings", settingsIn{Values: map[string]any{}}, "no setting to set")
		e.refused("set_settings", settingsIn{Values: map[string]any{"": 1}}, "non-empty key")
	})
}

var _ = errors.Is
