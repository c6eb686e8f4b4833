package changeset_test

import (
	"context"
	"encoding/json"
	"path/filepath"
	"strings"
	"sync"
	"testing"

	changeset "github.com/mcp-changeset/changeset-go"
	"github.com/mcp-changeset/changeset-go/ledger"
	"github.com/modelcontextprotocol/go-sdk/mcp"
)

// The tests here check that the state binding compares values, not the
// way Observe happened to write them: the same state returned as a map, as
// a struct with its fields in another order, or as JSON text that escapes
// '<', '>' and '&' (as encoding/json.Marshal does) or orders its keys
// differently is the same state. A false "changed" would block every apply
// and undo of an operation whose Observe is written that way.

const canonTitle = "a < b && c > d"

// canonState is the observed state as a struct whose fields are declared
// out of key order.
type canonState struct {
	Title string `json:"title"`
	Owner string `json:"owner"`
	ID    int64  `json:"id"`
}

// canonForms returns the same state in the ways an Observe may return it.
func canonForms(t *testing.T) map[string]any {
	t.Helper()
	escaped, err := json.Marshal(map[string]any{"title": canonTitle, "owner": "ann", "id": int64(1152921504606846977)})
	if err != nil {
		t.Fatal(err)
	}
	if !strings.Contains(string(escaped), `\u003c`) {
		t.Fatalf("json.Marshal did not escape '<' (%s); the test needs a form that does", escaped)
	}
	return map[string]any{
		"map":                  map[string]any{"id": int64(1152921504606846977), "owner": "ann", "title": canonTitle},
		"struct":               canonState{Title: canonTitle, Owner: "ann", ID: 1152921504606846977},
		"json.Marshal escaped": json.RawMessage(escaped),
		"raw reordered": json.RawMessage("{ \"title\" : \"a \\u003c b \\u0026& c \\u003E d\",\n" +
			" \"owner\":\"\\u0061nn\", \"id\" : 1152921504606846977 }"),
		"number as json.Number": map[string]any{"title": canonTitle, "id": json.Number("1152921504606846977"), "owner": "ann"},
	}
}

// canonFixture is a Guard with one operation whose Observe returns, call
// after call, the next value of forms (the last one again when they run
// out).
type canonFixture struct {
	guard   *changeset.Guard
	session *mcp.ClientSession

	mu      sync.Mutex
	forms   []any
	calls   int
	applies int
	undos   int
}

func newCanonFixture(t *testing.T, forms ...any) *canonFixture {
	t.Helper()
	f := &canonFixture{forms: forms}
	server := mcp.NewServer(&mcp.Implementation{Name: "test", Version: "1"}, nil)
	g, err := changeset.New(server, changeset.Options{LedgerPath: filepath.Join(t.TempDir(), "ledger.db"), WriteMode: changeset.WriteGuarded})
	if err != nil {
		t.Fatalf("New: %v", err)
	}
	t.Cleanup(func() { g.Close() })
	f.guard = g
	changeset.Register(g, &mcp.Tool{Name: "retitle"}, changeset.Operation[setIn, setIn, setOut]{
		AllowEmptyDiff: true, // its diff is not what the test is about
		Preview: func(ctx context.Context, in setIn) (*changeset.Proposal[setIn], error) {
			return &changeset.Proposal[setIn]{Payload: in, Summary: "retitle", Resource: "ticket:" + in.Key}, nil
		},
		Apply: func(ctx context.Context, p setIn) (setOut, error) {
			f.mu.Lock()
			defer f.mu.Unlock()
			f.applies++
			return setOut{}, nil
		},
		Undo: func(ctx context.Context, p setIn, r setOut) error {
			f.mu.Lock()
			defer f.mu.Unlock()
			f.undos++
			return nil
		},
		Observe: func(ctx context.Context, p setIn) (any, error) {
			f.mu.Lock()
			defer f.mu.Unlock()
			v := f.forms[min(f.calls, len(f.forms)-1)]
			f.calls++
			return v, nil
		},
	})
	f.session = connect(t, server)
	return f
}

func (f *canonFixture) counts() (applies, undos int) {
	f.mu.Lock()
	defer f.mu.Unlock()
	return f.applies, f.undos
}

// TestObserveCanon_SameStateOtherFormIsUnchanged previews with the state
// in one form and applies and undoes with it in another: Observe is called
// at preview, before the apply, after it and before the undo, and each
// pair of forms must compare equal.
func TestObserveCanon_SameStateOtherFormIsUnchanged(t *testing.T) {
	forms := canonForms(t)
	for _, pair := range [][2]string{
		{"map", "struct"},
		{"struct", "map"},
		{"struct", "json.Marshal escaped"},
		{"json.Marshal escaped", "map"},
		{"map", "raw reordered"},
		{"raw reordered", "struct"},
		{"struct", "number as json.Number"},
	} {
		t.Run(pair[0]+" then "+pair[1], func(t *testing.T) {
			a, b := forms[pair[0]], forms[pair[1]]
			// preview: a; before apply: b; after apply: a; before undo: b.
			f := newCanonFixture(t, a, b, a, b)
			out := mustCall(t, f.session, "preview_retitle", map[string]any{"key": "1", "value": "x"})
			id := out["change_id"].(string)
			applied, errText := call(t, f.session, "apply_change", map[string]any{"change_id": id, "confirmation_token": out["confirmation_token"]})
			if errText != "" {
				t.Fatalf("apply refused although the state is the same: %s", errText)
			}
			c, err := f.guard.Record(context.Background(), id)
			if err != nil {
				t.Fatal(err)
			}
			const want = `{"id":1152921504606846977,"owner":"ann","title":"a < b && c > d"}`
			if string(c.Before) != want || string(c.After) != want {
				t.Fatalf("stored snapshots\nbefore %s\n after %s\nwant %s", c.Before, c.After, want)
			}
			if _, errText := call(t, f.session, "undo_change", map[string]any{"change_id": id, "undo_token": applied["undo_token"]}); errText != "" {
				t.Fatalf("undo refused although the state is the same: %s", errText)
			}
			if applies, undos := f.counts(); applies != 1 || undos != 1 {
				t.Fatalf("%d applies and %d undos, want one of each", applies, undos)
			}
		})
	}
}

// TestObserveCanon_OtherStateIsChanged is the control: a state that really
// differs, if only in one escaped character or in one unit of a large
// integer, is refused as changed and nothing is written.
func TestObserveCanon_OtherStateIsChanged(t *testing.T) {
	forms := canonForms(t)
	for name, other := range map[string]any{
		"title":   json.RawMessage(`{"id":1152921504606846977,"owner":"ann","title":"a \u003c b && c \u003c d"}`),
		"id":      canonState{Title: canonTitle, Owner: "ann", ID: 1152921504606846976},
		"missing": map[string]any{"title": canonTitle, "owner": "ann"},
	} {
		t.Run(name, func(t *testing.T) {
			f := newCanonFixture(t, forms["map"], other)
			out := mustCall(t, f.session, "preview_retitle", map[string]any{"key": "1", "value": "x"})
			id := out["change_id"].(string)
			mustFail(t, f.session, "apply_change", map[string]any{"change_id": id, "confirmation_token": out["confirmation_token"]},
				"the resource changed after the preview")
			if applies, _ := f.counts(); applies != 0 {
				t.Fatalf("Apply ran %d times, want never", applies)
			}
			c, err := f.guard.Record(context.Background(), id)
			if err != nil {
				t.Fatal(err)
			}
			if c.Status != ledger.ApplyFailed {
				t.Fatalf("status %s, want apply_failed", c.Status)
			}
		})
	}
}
