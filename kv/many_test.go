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
		if diff, _ := json.Marshal(p.Diff); string(diff) != `[{"field":"currency","kind":"changed","before":"USD","after":"EUR"},{"field":"store_name","kind":"added","before":null,"after":"Tea and Co"}]` {
			t.Errorf("diff %s", diff)
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

// status is the change's status, failure and whether nothing was written.
func (e *env) status(id string) (string, string, bool) {
	e.t.Helper()
	st, err := e.g.Status(ctx, id)
	if err != nil {
		e.t.Fatal(err)
	}
	return st.Status, st.Failure, st.NothingWritten
}

// An edit of one key between the preview and the apply refuses the whole
// change: no key is written, the edit is kept.
func TestSetMany_EditBeforeApplyWritesNothing(t *testing.T) {
	eachStore(t, func(t *testing.T, store kv.Store, path string) {
		e := newManyEnv(t, store)
		e.put("currency", `"USD"`)
		e.put("tax_rate", `0.2`)
		p := e.preview("set_settings", settingsIn{Values: map[string]any{"currency": "EUR", "tax_rate": 0.25}})
		e.put("tax_rate", `0.3`)
		if _, err := e.g.Apply(ctx, p.ChangeID, p.ConfirmationToken); !errors.Is(err, changeset.ErrStateChanged) {
			t.Fatalf("apply: %v, want ErrStateChanged", err)
		}
		if got := e.values("currency", "tax_rate"); !sameMaps(got, map[string]string{"currency": `"USD"`, "tax_rate": "0.3"}) {
			t.Fatalf("after the refused apply: %v", got)
		}
		if st, failure, none := e.status(p.ChangeID); st != "apply_failed" || failure != "state_changed" || !none {
			t.Errorf("status %s %s nothing written %v", st, failure, none)
		}
	})
}

// An edit of one key after the apply refuses the undo of the whole
// change: every key keeps what the apply or the edit left.
func TestSetMany_EditAfterApplyRefusesUndo(t *testing.T) {
	eachStore(t, func(t *testing.T, store kv.Store, path string) {
		e := newManyEnv(t, store)
		e.put("currency", `"USD"`)
		a := e.apply(e.preview("set_settings", settingsIn{Values: map[string]any{"currency": "EUR", "tax_rate": 0.25}}))
		e.put("currency", `"GBP"`)
		if err := e.undo(a); !errors.Is(err, changeset.ErrStateChanged) {
			t.Fatalf("undo: %v, want ErrStateChanged", err)
		}
		if got := e.values("currency", "tax_rate"); !sameMaps(got, map[string]string{"currency": `"GBP"`, "tax_rate": "0.25"}) {
			t.Fatalf("after the refused undo: %v", got)
		}
		if st, failure, none := e.status(a.ChangeID); st != "undo_failed" || failure != "state_changed" || !none {
			t.Errorf("status %s %s nothing written %v", st, failure, none)
		}
	})
}

// A writer who changes a key after the Guard's check, while the keys are
// being swapped, makes the change fail with nothing written: on a Store
// swapped key by key the keys already swapped are swapped back; on a
// Batcher the batch refuses whole. The same holds for an undo.
func TestSetMany_RaceDuringTheWriteLeavesNothingWritten(t *testing.T) {
	for _, c := range []struct {
		name  string
		store func(h *hooked) kv.Store
		at    int // the swap call before which the other writer edits
	}{
		{"KeyByKey", func(h *hooked) kv.Store { return h }, 2},
		{"Batcher", func(h *hooked) kv.Store { return hookedBatch{h} }, 1},
	} {
		t.Run(c.name, func(t *testing.T) {
			m := &kv.Map{}
			h := &hooked{Store: m}
			e := newManyEnv(t, c.store(h))
			e.put("currency", `"USD"`)
			e.put("tax_rate", `0.2`)
			h.mu.Lock()
			h.n = 0
			h.mu.Unlock()
			edit := func(key, value string) func(n int, _ string) {
				return func(n int, _ string) {
					if n == c.at {
						cur, _ := m.Get(ctx, key)
						m.Swap(ctx, key, cur, raw(value))
					}
				}
			}
			h.before = edit("tax_rate", `0.3`)
			p := e.preview("set_settings", settingsIn{Values: map[string]any{"currency": "EUR", "tax_rate": 0.25}})
			if _, err := e.g.Apply(ctx, p.ChangeID, p.ConfirmationToken); !errors.Is(err, changeset.ErrStateChanged) {
				t.Fatalf("apply: %v, want ErrStateChanged", err)
			}
			if got := e.values("currency", "tax_rate"); !sameMaps(got, map[string]string{"currency": `"USD"`, "tax_rate": "0.3"}) {
				t.Fatalf("after the failed apply: %v", got)
			}
			if st, failure, none := e.status(p.ChangeID); st != "apply_failed" || failure != "state_changed" || !none {
				t.Errorf("status %s %s nothing written %v", st, failure, none)
			}

			h.before = nil
			a := e.apply(e.preview("set_settings", settingsIn{Values: map[string]any{"currency": "EUR", "tax_rate": 0.25}}))
			h.mu.Lock()
			h.n = 0
			h.mu.Unlock()
			h.before = edit("tax_rate", `0.4`)
			if err := e.undo(a); !errors.Is(err, changeset.ErrStateChanged) {
				t.Fatalf("undo: %v, want ErrStateChanged", err)
			}
			if got := e.values("currency", "tax_rate"); !sameMaps(got, map[string]string{"currency": `"EUR"`, "tax_rate": "0.4"}) {
				t.Fatalf("after the failed undo: %v", got)
			}
		})
	}
}

// When a key cannot be swapped back either (someone changed it in the
// same instant), the change fails without "nothing written" and the error
// names the key for an operator.
func TestSetMany_SwapBackThatFailsIsAPartialWrite(t *testing.T) {
	m := &kv.Map{}
	h := &hooked{Store: m}
	e := newManyEnv(t, h)
	e.put("currency", `"USD"`)
	e.put("tax_rate", `0.2`)
	h.mu.Lock()
	h.n = 0
	h.mu.Unlock()
	h.before = func(n int, _ string) {
		if n == 2 { // currency is written; someone edits it and tax_rate
			m.Swap(ctx, "currency", raw(`"EUR"`), raw(`"GBP"`))
			m.Swap(ctx, "tax_rate", raw(`0.2`), raw(`0.3`))
		}
	}
	p := e.preview("set_settings", settingsIn{Values: map[string]any{"currency": "EUR", "tax_rate": 0.25}})
	_, err := e.g.Apply(ctx, p.ChangeID, p.ConfirmationToken)
	if err == nil || errors.Is(err, changeset.ErrStateChanged) || errors.Is(err, kv.ErrChanged) {
		t.Fatalf("apply: %v, want a failure that is not a state change", err)
	}
	if !strings.Contains(err.Error(), "PartialWriteError") {
		t.Errorf("the agent's text %q does not name the kind of failure", err)
	}
	rec, _ := e.g.Record(ctx, p.ChangeID)
	if rec.Status != "apply_failed" || rec.NothingWritten || !strings.Contains(rec.Error, `keys "currency" could not be set back`) {
		t.Errorf("record: status %s, nothing written %v, error %q", rec.Status, rec.NothingWritten, rec.Error)
	}
	if got := e.values("currency", "tax_rate"); !sameMaps(got, map[string]string{"currency": `"GBP"`, "tax_rate": "0.3"}) {
		t.Fatalf("stored %v", got)
	}
}

// Ignored members are in no diff, and an edit of them blocks neither the
// apply nor the undo. The apply keeps the position someone moved; the
// undo restores the counted members and keeps the current ignored ones.
func TestKindIgnore_EditsOfIgnoredMembersBlockNothing(t *testing.T) {
	eachStore(t, func(t *testing.T, store kv.Store, path string) {
		e := newManyEnv(t, store)
		e.put("a", `{"name":"A","price":100,"updated_at":"t0","position":1}`)
		e.put("b", `{"name":"B","price":200,"updated_at":"t0","position":2}`)
		p := e.preview("set_prices", pricesIn{Prices: map[string]int{"a": 110, "b": 220}})
		if diff, _ := json.Marshal(p.Diff); len(p.Diff) != 2 || !strings.HasPrefix(string(diff), `[{"field":"a","kind":"changed","before":{"name":"A","price":100},"after":{"name":"A","price":110}},`) {
			t.Fatalf("diff %s", diff)
		}
		e.put("a", `{"name":"A","price":100,"updated_at":"t0","position":5}`)
		a := e.apply(p)
		if got := e.values("a", "b"); !sameMaps(got, map[string]string{
			"a": `{"name":"A","position":5,"price":110,"updated_at":"t0"}`,
			"b": `{"name":"B","position":2,"price":220,"updated_at":"t0"}`}) {
			t.Fatalf("after apply: %v", got)
		}
		e.put("b", `{"name":"B","price":220,"updated_at":"t9","position":2}`)
		if err := e.undo(a); err != nil {
			t.Fatal(err)
		}
		if got := e.values("a", "b"); !sameMaps(got, map[string]string{
			"a": `{"name":"A","position":5,"price":100,"updated_at":"t0"}`,
			"b": `{"name":"B","position":2,"price":200,"updated_at":"t9"}`}) {
			t.Fatalf("after undo: %v", got)
		}
		e.refused("set_prices", pricesIn{Prices: map[string]int{"a": 100}}, "the item already holds this value")
	})
}

// An Update whose function stamps an ignored member writes the stamp but
// does not show it in the diff, and a stamp alone changes nothing.
func TestUpdate_StampOfAnIgnoredMember(t *testing.T) {
	e := newManyEnv(t, &kv.Map{})
	e.put("a", `{"name":"A","price":100,"updated_at":"t0","position":1}`)
	p := e.preview("update_item", priceIn{Key: "a", Price: 120, Stamp: "t1"})
	if len(p.Diff) != 1 || p.Diff[0].Field != "price" {
		t.Fatalf("diff %+v, want only the price", p.Diff)
	}
	e.put("a", `{"name":"A","price":100,"updated_at":"t0","position":3}`)
	a := e.apply(p)
	if got := e.value("a"); got != `{"name":"A","position":3,"price":120,"updated_at":"t1"}` {
		t.Fatalf("after apply: %s", got)
	}
	e.refused("update_item", priceIn{Key: "a", Price: 120, Stamp: "t2"}, "nothing to change")
	if err := e.undo(a); err != nil {
		t.Fatal(err)
	}
	if got := e.value("a"); got != `{"name":"A","position":3,"price":100,"updated_at":"t1"}` {
		t.Fatalf("after undo: %s", got)
	}
}

// A writer who changes only an ignored member between the adapter's read
// and its swap makes the swap fail; the adapter reads again and succeeds,
// keeping that writer's member.
func TestKindIgnore_SwapLostToAnIgnoredEditIsRetried(t *testing.T) {
	m := &kv.Map{}
	h := &hooked{Store: m}
	e := newManyEnv(t, hookedBatch{h})
	e.put("a", `{"name":"A","price":100,"position":1}`)
	e.put("b", `{"name":"B","price":200,"position":2}`)
	h.mu.Lock()
	h.n = 0
	h.mu.Unlock()
	h.before = func(n int, _ string) {
		if n == 1 {
			m.Swap(ctx, "a", raw(`{"name":"A","price":100,"position":1}`), raw(`{"name":"A","price":100,"position":7}`))
		}
	}
	e.apply(e.preview("update_item", priceIn{Key: "a", Price: 150}))
	if got := e.value("a"); got != `{"name":"A","position":7,"price":150}` {
		t.Fatalf("single key: %s", got)
	}
	h.mu.Lock()
	h.n = 0
	h.mu.Unlock()
	h.before = func(n int, _ string) {
		if n == 1 {
			m.Swap(ctx, "b", raw(`{"name":"B","price":200,"position":2}`), raw(`{"name":"B","price":200,"position":8}`))
		}
	}
	e.apply(e.preview("set_prices", pricesIn{Prices: map[string]int{"a": 160, "b": 260}}))
	if got := e.values("a", "b"); !sameMaps(got, map[string]string{"a": `{"name":"A","position":7,"price":160}`, "b": `{"name":"B","position":8,"price":260}`}) {
		t.Fatalf("several keys: %v", got)
	}
}

// Update and SetMany observe a key as the same bytes: the state the one
// left is the state the other starts from, as a run's undo compares them.
func TestSetMany_ObservesAKeyAsUpdateDoes(t *testing.T) {
	e := newManyEnv(t, &kv.Map{})
	e.put("a", `{"price":100, "name":"A","updated_at":"t0"}`)
	e.put("b", `{"name":"B","price":200}`)
	single := e.apply(e.preview("update_item", priceIn{Key: "a", Price: 120, Stamp: "t1"}))
	several := e.apply(e.preview("set_prices", pricesIn{Prices: map[string]int{"a": 130, "b": 230}}))
	one, _ := e.g.Record(ctx, single.ChangeID)
	many, _ := e.g.Record(ctx, several.ChangeID)
	var before, after map[string]json.RawMessage
	if err := json.Unmarshal(many.Before, &before); err != nil {
		t.Fatal(err)
	}
	if string(before["item:a"]) != string(one.After) || string(one.After) != `{"name":"A","price":120}` {
		t.Fatalf("Update left %s; SetMany found %s", one.After, before["item:a"])
	}
	json.Unmarshal(many.After, &after)
	u := e.apply(e.preview("update_item", priceIn{Key: "b", Price: 240}))
	rec, _ := e.g.Record(ctx, u.ChangeID)
	if string(rec.Before) != string(after["item:b"]) {
		t.Fatalf("SetMany left %s; Update found %s", after["item:b"], rec.Before)
	}
}

// A run's undo undoes a change of several keys whole, through the same
// checks and writes as undo_change.
func TestSetMany_RunUndoRestoresEveryKey(t *testing.T) {
	eachStore(t, func(t *testing.T, store kv.Store, path string) {
		e := newManyEnv(t, store)
		e.put("a", `{"name":"A","price":100,"updated_at":"t0"}`)
		e.put("b", `{"name":"B","price":200}`)
		start := e.values("a", "b", "c")
		run, err := e.g.StartRun(ctx, "prices")
		if err != nil {
			t.Fatal(err)
		}
		e.apply(e.preview("set_prices", map[string]any{"prices": map[string]int{"a": 130, "b": 230, "c": 5}, "run_id": run.RunID}))
		e.put("a", `{"name":"A","price":130,"updated_at":"t5"}`) // an ignored member: not a person's work
		rep, err := e.g.UndoRun(ctx, run.RunID, false, "")
		if err != nil {
			t.Fatal(err)
		}
		if len(rep.Undone) != 1 || len(rep.Skipped) != 0 || len(rep.Failed) != 0 {
			t.Fatalf("report %+v", rep)
		}
		start["a"] = `{"name":"A","price":100,"updated_at":"t5"}` // the undo keeps the current ignored members
		if got := e.values("a", "b", "c"); !sameMaps(got, start) {
			t.Fatalf("after the run's undo: %v, want %v", got, start)
		}
	})
}
