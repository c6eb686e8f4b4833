package kv_test

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"testing"

	"github.com/mcp-changeset/changeset-go/kv"
)

var ctx = context.Background()

func raw(s string) json.RawMessage { return json.RawMessage(s) }

func readFile(t *testing.T, path string) string {
	t.Helper()
	b, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	return string(b)
}

func TestJSONFileMissingIsEmptyAndSwapCreatesIt(t *testing.T) {
	path := filepath.Join(t.TempDir(), "flags.json")
	f := kv.NewJSONFile(path)
	if v, err := f.Get(ctx, "beta"); v != nil || err != nil {
		t.Fatalf("Get on a missing file: %s, %v", v, err)
	}
	if all, err := f.All(ctx); len(all) != 0 || err != nil {
		t.Fatalf("All on a missing file: %v, %v", all, err)
	}
	if err := f.Swap(ctx, "beta", nil, raw(`{"enabled":true,"rollout":10}`)); err != nil {
		t.Fatal(err)
	}
	want := "{\n  \"beta\": {\n    \"enabled\": true,\n    \"rollout\": 10\n  }\n}\n"
	if got := readFile(t, path); got != want {
		t.Fatalf("file:\n%s\nwant:\n%s", got, want)
	}
	if err := f.Swap(ctx, "beta", raw(`{"rollout": 10, "enabled": true}`), nil); err != nil {
		t.Fatalf("delete with prev in another order and spacing: %v", err)
	}
	if got := readFile(t, path); got != "{}\n" {
		t.Fatalf("file after deleting the last key: %q", got)
	}
}

// A Swap rewrites only its own key: the others keep their bytes and their
// order, however a person spelled them, and the file its permissions.
func TestJSONFileKeepsOtherKeysExactly(t *testing.T) {
	path := filepath.Join(t.TempDir(), "flags.json")
	alpha := `{ "enabled":true,"rollout" : 1.0, "note": "h\u00e9" }`
	gamma := "[1,\n      2]"
	os.WriteFile(path, []byte("{\"alpha\": "+alpha+",\n\"beta\": {\"enabled\": false},\n  \"gamma\":"+gamma+"}"), 0o640)
	f := kv.NewJSONFile(path)
	if err := f.Swap(ctx, "beta", raw(`{"enabled":false}`), raw(`{"enabled":true}`)); err != nil {
		t.Fatal(err)
	}
	if err := f.Swap(ctx, "delta", nil, raw(`7`)); err != nil { // before the first key after it
		t.Fatal(err)
	}
	if err := f.Swap(ctx, "zeta", nil, raw(`null`)); err != nil { // last
		t.Fatal(err)
	}
	got := readFile(t, path)
	want := "{\n  \"alpha\": " + alpha + ",\n  \"beta\": {\n    \"enabled\": true\n  },\n  \"delta\": 7,\n  \"gamma\": " + gamma + ",\n  \"zeta\": null\n}\n"
	if got != want {
		t.Fatalf("file:\n%s\nwant:\n%s", got, want)
	}
	if fi, _ := os.Stat(path); fi.Mode().Perm() != 0o640 {
		t.Errorf("permissions %v, want 0640 kept", fi.Mode().Perm())
	}
	if v, _ := f.Get(ctx, "alpha"); string(v) != alpha {
		t.Errorf("Get returns %s, want the file's own bytes %s", v, alpha)
	}
}

func TestJSONFileSwapRefusesAnotherValue(t *testing.T) {
	path := filepath.Join(t.TempDir(), "flags.json")
	os.WriteFile(path, []byte(`{"beta": {"enabled": false}}`), 0o644)
	f := kv.NewJSONFile(path)
	for _, c := range []struct {
		name       string
		key        string
		prev, next json.RawMessage
	}{
		{"create of an existing key", "beta", nil, raw(`{}`)},
		{"update from another value", "beta", raw(`{"enabled":true}`), raw(`{}`)},
		{"delete of a missing key", "gamma", raw(`{}`), nil},
		{"null is not absent", "gamma", raw(`null`), raw(`1`)},
	} {
		err := f.Swap(ctx, c.key, c.prev, c.next)
		if !errors.Is(err, kv.ErrChanged) {
			t.Errorf("%s: %v, want ErrChanged", c.name, err)
		}
	}
	if got := readFile(t, path); got != `{"beta": {"enabled": false}}` {
		t.Fatalf("the file was rewritten: %s", got)
	}
}

func TestJSONFileMalformedIsReportedAndNeverWritten(t *testing.T) {
	for _, c := range []struct {
		name, text, reason string
		line               int
	}{
		{"an array", `[1, 2]`, "does not start with {", 1},
		{"a syntax error", "{\n  \"a\": 1,\n  \"b\": tru\n}", `the value of "b" is not readable`, 3},
		{"a duplicate key", "{\"a\": 1,\n\"a\": 2}", `the key "a" appears twice`, 2},
		{"trailing text", `{"a": 1} x`, "more after the object", 1},
		{"not closed", `{"a": 1`, "not closed", 1},
		{"an unpaired surrogate", `{"a": "\ud800"}`, `the value of "a" is not strict JSON`, 1},
	} {
		t.Run(c.name, func(t *testing.T) {
			path := filepath.Join(t.TempDir(), "flags.json")
			os.WriteFile(path, []byte(c.text), 0o644)
			f := kv.NewJSONFile(path)
			_, err := f.Get(ctx, "a")
			var me *kv.MalformedFileError
			if !errors.As(err, &me) || !strings.Contains(me.Reason, c.reason) || me.Line != c.line || me.Path != path {
				t.Fatalf("Get: %v (%+v), want a MalformedFileError at line %d with %q", err, me, c.line, c.reason)
			}
			if !strings.Contains(err.Error(), "fix it by hand") {
				t.Errorf("message %q says nothing of what to do", err)
			}
			if err := f.Swap(ctx, "z", nil, raw(`1`)); !errors.As(err, &me) {
				t.Fatalf("Swap: %v, want a MalformedFileError", err)
			}
			if got := readFile(t, path); got != c.text {
				t.Fatalf("the malformed file was rewritten: %q", got)
			}
		})
	}
	path := filepath.Join(t.TempDir(), "empty.json")
	os.WriteFile(path, []byte(" \n"), 0o644)
	if v, err := kv.NewJSONFile(path).Get(ctx, "a"); v != nil || err != nil {
		t.Errorf("an empty file: %s, %v; want an empty store", v, err)
	}
}

// A symbolic link at the path stays a link: the file it points to is the
// one replaced.
func TestJSONFileWritesThroughASymlink(t *testing.T) {
	dir := t.TempDir()
	target := filepath.Join(dir, "real.json")
	os.WriteFile(target, []byte(`{}`), 0o644)
	link := filepath.Join(dir, "flags.json")
	if err := os.Symlink(target, link); err != nil {
		t.Skip(err)
	}
	if err := kv.NewJSONFile(link).Swap(ctx, "a", nil, raw(`1`)); err != nil {
		t.Fatal(err)
	}
	if fi, _ := os.Lstat(link); fi.Mode()&os.ModeSymlink == 0 {
		t.Fatal("the link was replaced by a file")
	}
	if got := readFile(t, target); got != "{\n  \"a\": 1\n}\n" {
		t.Fatalf("target: %q", got)
	}
}

// Writers with their own JSONFile values (as separate processes would
// have) never lose an update: each reads, then swaps, and retries on
// ErrChanged; the lock file makes the comparison and the write one step.
func TestJSONFileConcurrentWritersLoseNothing(t *testing.T) {
	path := filepath.Join(t.TempDir(), "counter.json")
	const writers, each = 8, 25
	var wg sync.WaitGroup
	for w := range writers {
		wg.Go(func() {
			f := kv.NewJSONFile(path)
			for i := 0; i < each; {
				cur, err := f.Get(ctx, "n")
				if err != nil {
					t.Error(err)
					return
				}
				n := 0
				if cur != nil {
					n, _ = strconv.Atoi(string(cur))
				}
				err = f.Swap(ctx, "n", cur, raw(strconv.Itoa(n+1)))
				if errors.Is(err, kv.ErrChanged) {
					continue
				}
				if err != nil {
					t.Error(w, err)
					return
				}
				i++
			}
		})
	}
	wg.Wait()
	if v, _ := kv.NewJSONFile(path).Get(ctx, "n"); string(v) != fmt.Sprint(writers*each) {
		t.Fatalf("counter %s, want %d", v, writers*each)
	}
}

// SwapAll writes every key in one rewrite of the file, or none: one key
// that differs from its Prev, or a key named twice, leaves the file as it
// was. Map keeps the same promise.
func TestJSONFile_SwapAllIsAllOrNothing(t *testing.T) {
	path := filepath.Join(t.TempDir(), "settings.json")
	text := "{\"currency\": \"USD\", \"tax_rate\": 0.2}"
	os.WriteFile(path, []byte(text), 0o644)
	stores := map[string]kv.Batcher{"JSONFile": kv.NewJSONFile(path), "Map": &kv.Map{}}
	m := stores["Map"]
	m.Swap(ctx, "currency", nil, raw(`"USD"`))
	m.Swap(ctx, "tax_rate", nil, raw(`0.2`))
	for name, s := range stores {
		for _, c := range []struct {
			what  string
			swaps []kv.Swap
		}{
			{"one key differs", []kv.Swap{{Key: "currency", Prev: raw(`"USD"`), Next: raw(`"EUR"`)}, {Key: "tax_rate", Prev: raw(`0.3`), Next: raw(`0.25`)}}},
			{"a key twice", []kv.Swap{{Key: "currency", Prev: raw(`"USD"`), Next: raw(`"EUR"`)}, {Key: "currency", Prev: raw(`"USD"`), Next: raw(`"GBP"`)}}},
		} {
			if err := s.SwapAll(ctx, c.swaps); err == nil {
				t.Errorf("%s, %s: no error", name, c.what)
			} else if c.what == "one key differs" && !errors.Is(err, kv.ErrChanged) {
				t.Errorf("%s, %s: %v, want ErrChanged", name, c.what, err)
			}
			if v, _ := s.Get(ctx, "currency"); string(v) != `"USD"` {
				t.Errorf("%s, %s: currency %s was written", name, c.what, v)
			}
		}
		if name == "JSONFile" && readFile(t, path) != text {
			t.Errorf("the file was rewritten by a refused SwapAll: %s", readFile(t, path))
		}
		err := s.SwapAll(ctx, []kv.Swap{
			{Key: "currency", Prev: raw(`"USD"`), Next: raw(`"EUR"`)},
			{Key: "tax_rate", Prev: raw(`0.20`), Next: nil},
			{Key: "store_name", Prev: nil, Next: raw(`"Tea"`)},
		})
		if err != nil {
			t.Fatalf("%s: %v", name, err)
		}
		all, _ := s.(interface {
			All(context.Context) (map[string]json.RawMessage, error)
		}).All(ctx)
		if len(all) != 2 || string(all["currency"]) != `"EUR"` || string(all["store_name"]) != `"Tea"` {
			t.Errorf("%s: %v", name, all)
		}
	}
	if got := readFile(t, path); got != "{\n  \"currency\": \"EUR\",\n  \"store_name\": \"Tea\"\n}\n" {
		t.Errorf("file:\n%s", got)
	}
}
