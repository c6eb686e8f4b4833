package changeset_test

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"unicode/utf8"

	changeset "github.com/mcp-changeset/changeset-go"
	"github.com/mcp-changeset/changeset-go/internal/canonjson"
	"github.com/mcp-changeset/changeset-go/ledger"
	"github.com/modelcontextprotocol/go-sdk/mcp"
)

// Fuzz targets of the Guard's input handling. CI runs each for a bounded
// time:
//
//	go test -run '^$' -fuzz '^FuzzPreviewInput$' -fuzztime 15s .
//	go test -run '^$' -fuzz '^FuzzApplyIDAndToken$' -fuzztime 15s .
//
// Without -fuzz they run their seeds as ordinary tests.

// fuzzLedgerPath puts a fuzz target's ledger on tmpfs when there is one:
// every preview that passes validation commits, and fuzzing wants many per
// second.
func fuzzLedgerPath(f *testing.F) string {
	dir := f.TempDir()
	if fi, err := os.Stat("/dev/shm"); err == nil && fi.IsDir() {
		if d, err := os.MkdirTemp("/dev/shm", "changeset-fuzz-"); err == nil {
			f.Cleanup(func() { os.RemoveAll(d) })
			dir = d
		}
	}
	return filepath.Join(dir, "ledger.db")
}

// fuzzIn is an input type with the shapes a real operation's input has.
type fuzzIn struct {
	Name  string            `json:"name"`
	Count int               `json:"count"`
	Ratio float64           `json:"ratio"`
	Tags  []string          `json:"tags"`
	Meta  map[string]string `json:"meta"`
	On    *bool             `json:"on"`
	Inner struct {
		Note string `json:"note"`
	} `json:"inner"`
}

// FuzzPreviewInput feeds arbitrary bytes, as the arguments of a preview,
// through Guard.Preview. A preview either refuses with a *ChangeError or
// stores a pending change whose payload is the canonical JSON of the
// input decoded into the operation's type; input with invalid UTF-8 is
// always refused, never repaired.
func FuzzPreviewInput(f *testing.F) {
	g, err := changeset.New(nil, changeset.Options{LedgerPath: fuzzLedgerPath(f), WriteMode: changeset.WriteGuarded})
	if err != nil {
		f.Fatal(err)
	}
	f.Cleanup(func() { g.Close() })
	changeset.Register(g, &mcp.Tool{Name: "fuzz"}, changeset.Operation[fuzzIn, fuzzIn, struct{}]{
		Preview: func(ctx context.Context, in fuzzIn) (*changeset.Proposal[fuzzIn], error) {
			return &changeset.Proposal[fuzzIn]{Payload: in, Summary: in.Name, Resource: in.Inner.Note}, nil
		},
		Apply: func(ctx context.Context, p fuzzIn) (struct{}, error) { return struct{}{}, nil },
	})
	for _, seed := range []string{
		`{}`, `{"name":"a","count":1,"ratio":0.5,"tags":["x","y"],"meta":{"k":"v"},"on":true,"inner":{"note":"n"}}`,
		`{"name":"\u00e9\ud83d\ude00"}`, `{"name":"\ud800"}`, "{\"name\":\"\xff\"}", `{"name":"a","name":"b"}`,
		`{"count":1e400}`, `{"count":1.5}`, `{"ratio":-0}`, `{"unknown":1}`, `{"run_id":"run_00000000000000000000"}`,
		`{"run_id":5}`, `[]`, `null`, `"x"`, `{"tags":null,"meta":{"":"\u0000"}}`, ` {"name" : "a" } `, `{"name":"a"}x`,
	} {
		f.Add([]byte(seed))
	}
	ctx := context.Background()
	f.Fuzz(func(t *testing.T, data []byte) {
		p, err := g.Preview(ctx, "fuzz", json.RawMessage(data))
		if err != nil {
			var ce *changeset.ChangeError
			if !errors.As(err, &ce) {
				t.Fatalf("preview of %q: %T %v, want a *ChangeError", data, err, err)
			}
			return
		}
		if !utf8.Valid(data) {
			t.Fatalf("preview accepted invalid UTF-8: %q", data)
		}
		c, err := g.Ledger().Change(ctx, p.ChangeID)
		if err != nil {
			t.Fatal(err)
		}
		if c.Status != ledger.Pending || string(c.PayloadHash) != canonjson.Hash(c.Payload) {
			t.Fatalf("stored %s with payload hash %s for %q", c.Status, c.PayloadHash, c.Payload)
		}
		canon, err := canonjson.Canonicalize(c.Payload)
		if err != nil || !bytes.Equal(canon, c.Payload) || !utf8.Valid(c.Payload) {
			t.Fatalf("stored payload %q is not canonical (%v)", c.Payload, err)
		}
		var stored fuzzIn
		dec := json.NewDecoder(bytes.NewReader(c.Payload))
		dec.DisallowUnknownFields()
		if err := dec.Decode(&stored); err != nil {
			t.Fatalf("stored payload %q does not decode: %v", c.Payload, err)
		}
		if bytes.ContainsRune(c.Payload, utf8.RuneError) && !bytes.ContainsRune(data, utf8.RuneError) && !bytes.Contains(data, []byte(`\ufffd`)) && !bytes.Contains(data, []byte(`\uFFFD`)) {
			t.Fatalf("the payload %q holds U+FFFD that the input %q did not: a silent replacement", c.Payload, data)
		}
	})
}

// FuzzApplyIDAndToken calls Guard.Apply and Guard.Undo with arbitrary change
// IDs and tokens. The placeholders $ID and $TOKEN (a pending change and its
// confirmation token) and $UID and $UNDO (an applied change and its undo
// token) are replaced wherever they occur, so that the fuzzer explores
// near-misses of the right values. Nothing panics; a write happens exactly
// when the exact right pair is given; every refusal is a *ChangeError that
// spends nothing and does not repeat the token.
func FuzzApplyIDAndToken(f *testing.F) {
	g, err := changeset.New(nil, changeset.Options{LedgerPath: fuzzLedgerPath(f), WriteMode: changeset.WriteGuarded})
	if err != nil {
		f.Fatal(err)
	}
	f.Cleanup(func() { g.Close() })
	store := &kv{m: map[string]string{}}
	registerTestOps(g, store)
	ctx := context.Background()
	var pendingID, confirm, appliedID, undo string
	// fresh makes a new pending change, or with apply a new applied one.
	keys := 0
	fresh := func(t testing.TB, apply bool) {
		keys++ // a key of its own, so that one change's apply is no state change for another
		p, err := g.Preview(ctx, "set", setIn{Key: fmt.Sprint("k", keys), Value: "v"})
		if err != nil {
			t.Fatal(err)
		}
		if !apply {
			pendingID, confirm = p.ChangeID, p.ConfirmationToken
			return
		}
		a, err := g.Apply(ctx, p.ChangeID, p.ConfirmationToken)
		if err != nil {
			t.Fatal(err)
		}
		appliedID, undo = p.ChangeID, a.UndoToken
	}
	fresh(f, false)
	fresh(f, true)
	for _, s := range [][2]string{
		{"$ID", "$TOKEN"}, {"$ID", "$TOKEN "}, {"$ID", "$TOKENx"}, {" $ID", "$TOKEN"}, {"$ID", "$UNDO"}, {"$UID", "$TOKEN"},
		{"$ID", "confirm_AAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAA"}, {"chg_00000000000000000000", "$TOKEN"}, {"", ""},
		{"CHG_00000000000000000000", "confirm_"}, {"$ID", "confirm_AAAAAAAAAAAAAAAAAAAAAAAAAAAAAAA="}, {"$ID", "undo_$TOKEN"},
	} {
		f.Add(s[0], s[1], false)
		f.Add(strings.ReplaceAll(s[0], "$ID", "$UID"), strings.ReplaceAll(strings.ReplaceAll(s[1], "$TOKEN", "$UNDO"), "confirm_", "undo_"), true)
	}
	f.Fuzz(func(t *testing.T, id, token string, isUndo bool) {
		r := strings.NewReplacer("$UID", appliedID, "$UNDO", undo, "$ID", pendingID, "$TOKEN", confirm)
		id, token = r.Replace(id), r.Replace(token)
		target, right := pendingID, confirm
		if isUndo {
			target, right = appliedID, undo
		}
		before, err := g.Ledger().Change(ctx, target)
		if err != nil {
			t.Fatal(err)
		}
		applies, undos := store.applies.Load(), store.undos.Load()
		if isUndo {
			_, err = g.Undo(ctx, id, token)
		} else {
			_, err = g.Apply(ctx, id, token)
		}
		wrote := store.applies.Load() != applies || store.undos.Load() != undos
		exact := id == target && token == right
		switch {
		case exact && err != nil:
			t.Fatalf("the right token was refused: %v", err)
		case exact:
			fresh(t, isUndo) // that change is spent; make another
			return
		case wrote:
			t.Fatalf("a write ran for id %q, token %q (undo %t)", id, token, isUndo)
		}
		var ce *changeset.ChangeError
		if !errors.As(err, &ce) {
			t.Fatalf("refusal %T %v, want a *ChangeError", err, err)
		}
		// A minted token never appears in a refusal (unless the caller put
		// it in the ID, which the refusal may quote).
		for _, secret := range []string{confirm, undo} {
			if strings.Contains(err.Error(), secret) && !strings.Contains(id, secret) {
				t.Fatalf("the refusal repeats a token: %v", err)
			}
		}
		after, err := g.Ledger().Change(ctx, target)
		if err != nil {
			t.Fatal(err)
		}
		if after.Status != before.Status || after.ConfirmHash != before.ConfirmHash || after.UndoHash != before.UndoHash {
			t.Fatalf("a refused call changed %s: %s → %s", target, before.Status, after.Status)
		}
	})
}
