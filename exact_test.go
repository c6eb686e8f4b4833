package changeset_test

import (
	"context"
	"database/sql"
	"encoding/json"
	"errors"
	"math"
	"math/big"
	"path/filepath"
	"strings"
	"sync"
	"testing"

	changeset "github.com/mcp-changeset/changeset-go"
	"github.com/mcp-changeset/changeset-go/ledger"
	"github.com/modelcontextprotocol/go-sdk/mcp"
)

// Integers no double holds: a Preview that puts them in a payload must see
// Apply receive exactly them. A float64 reading of the stored payload would
// make them 1152921504606847000 and 18446744073709552000.
const (
	exactID    int64  = 1152921504606846977 // 2^60 + 1
	exactCount uint64 = math.MaxUint64      // 18446744073709551615
	exactBig          = "-123456789012345678901234567891"
)

// exactPayload is a payload of integers of every width encoding/json knows.
type exactPayload struct {
	ID    int64    `json:"id"`
	Count uint64   `json:"count"`
	Min   int64    `json:"min"`
	Big   *big.Int `json:"big"`
}

// exactPayloadJSON is the canonical JSON of the payload above.
const exactPayloadJSON = `{"big":-123456789012345678901234567891,"count":18446744073709551615,"id":1152921504606846977,"min":-9223372036854775808}`

// lookupIn names a record; the lookup operation's Preview finds its
// integers, as a real Preview reads IDs and counters from the system.
type lookupIn struct {
	Name string `json:"name"`
}

// exactFixture is a Guard over a fresh SQLite ledger with two operations:
// exact takes an exactPayload as its input, lookup builds one in Preview.
// Both record what their Apply receives; exact observes current, an
// integer, so that the state check can be tested with integers too.
type exactFixture struct {
	path    string
	guard   *changeset.Guard
	session *mcp.ClientSession

	mu      sync.Mutex
	applied []exactPayload
	current int64
}

func newExactFixture(t *testing.T) *exactFixture {
	t.Helper()
	f := &exactFixture{path: filepath.Join(t.TempDir(), "ledger.db"), current: exactID}
	server := mcp.NewServer(&mcp.Implementation{Name: "test", Version: "1"}, nil)
	g, err := changeset.New(server, changeset.Options{LedgerPath: f.path, WriteMode: changeset.WriteGuarded})
	if err != nil {
		t.Fatalf("New: %v", err)
	}
	t.Cleanup(func() { g.Close() })
	f.guard = g
	apply := func(ctx context.Context, p exactPayload) (struct{}, error) {
		f.mu.Lock()
		defer f.mu.Unlock()
		f.applied = append(f.applied, p)
		return struct{}{}, nil
	}
	changeset.Register(g, &mcp.Tool{Name: "exact"}, changeset.Operation[exactPayload, exactPayload, struct{}]{
		AllowEmptyDiff: true, // its diff is not what the test is about
		Preview: func(ctx context.Context, in exactPayload) (*changeset.Proposal[exactPayload], error) {
			return &changeset.Proposal[exactPayload]{Payload: in, Summary: "exact", Resource: "record"}, nil
		},
		Apply: apply,
		Observe: func(ctx context.Context, p exactPayload) (any, error) {
			f.mu.Lock()
			defer f.mu.Unlock()
			return map[string]any{"current": f.current}, nil
		},
	})
	changeset.Register(g, &mcp.Tool{Name: "lookup"}, changeset.Operation[lookupIn, exactPayload, struct{}]{
		Preview: func(ctx context.Context, in lookupIn) (*changeset.Proposal[exactPayload], error) {
			p := exactPayload{ID: exactID, Count: exactCount, Min: math.MinInt64, Big: mustBig(exactBig)}
			return &changeset.Proposal[exactPayload]{Payload: p, Summary: "lookup " + in.Name,
				Diff: changeset.DiffFields(map[string]any{"id": nil}, map[string]any{"id": p.ID})}, nil
		},
		Apply: apply,
	})
	f.session = connect(t, server)
	return f
}

func mustBig(s string) *big.Int {
	b, ok := new(big.Int).SetString(s, 10)
	if !ok {
		panic(s)
	}
	return b
}

// checkApplied checks that exactly one Apply ran and received the exact
// integers.
func (f *exactFixture) checkApplied(t *testing.T) {
	t.Helper()
	f.mu.Lock()
	defer f.mu.Unlock()
	if len(f.applied) != 1 {
		t.Fatalf("Apply ran %d times, want once", len(f.applied))
	}
	p := f.applied[0]
	if p.ID != exactID || p.Count != exactCount || p.Min != math.MinInt64 || p.Big == nil || p.Big.String() != exactBig {
		t.Fatalf("Apply received id=%d count=%d min=%d big=%v\nwant id=%d count=%d min=%d big=%s",
			p.ID, p.Count, p.Min, p.Big, exactID, exactCount, int64(math.MinInt64), exactBig)
	}
}

// storedPayload reads the payload column of change id from the ledger
// file itself.
func (f *exactFixture) storedPayload(t *testing.T, id string) string {
	t.Helper()
	db, err := sql.Open("sqlite", "file:"+f.path+"?mode=ro")
	if err != nil {
		t.Fatal(err)
	}
	defer db.Close()
	var payload string
	if err := db.QueryRow(`SELECT payload FROM changes WHERE id = ?`, id).Scan(&payload); err != nil {
		t.Fatalf("reading the stored payload: %v", err)
	}
	return payload
}

// TestExact_GoAPIPayloadReachesApply previews through the Guard's Go API
// with integers beyond 2^53 in the input, which the Preview puts in the
// payload, and applies.
func TestExact_GoAPIPayloadReachesApply(t *testing.T) {
	f := newExactFixture(t)
	ctx := context.Background()
	res, err := f.guard.Preview(ctx, "exact", exactPayload{ID: exactID, Count: exactCount, Min: math.MinInt64, Big: mustBig(exactBig)})
	if err != nil {
		t.Fatalf("Preview: %v", err)
	}
	if got := f.storedPayload(t, res.ChangeID); got != exactPayloadJSON {
		t.Fatalf("stored payload\n got %s\nwant %s", got, exactPayloadJSON)
	}
	if _, err := f.guard.Apply(ctx, res.ChangeID, res.ConfirmationToken); err != nil {
		t.Fatalf("Apply: %v", err)
	}
	f.checkApplied(t)
	if got := f.storedPayload(t, res.ChangeID); got != exactPayloadJSON {
		t.Fatalf("payload after apply\n got %s\nwant %s", got, exactPayloadJSON)
	}
}

// TestExact_MCPPayloadReachesApply previews and applies through the MCP
// tools; the Preview builds the payload of large integers itself.
func TestExact_MCPPayloadReachesApply(t *testing.T) {
	f := newExactFixture(t)
	out := mustCall(t, f.session, "preview_lookup", map[string]any{"name": "a"})
	id := out["change_id"].(string)
	if got := f.storedPayload(t, id); got != exactPayloadJSON {
		t.Fatalf("stored payload\n got %s\nwant %s", got, exactPayloadJSON)
	}
	c, err := f.guard.Record(context.Background(), id)
	if err != nil {
		t.Fatal(err)
	}
	if !strings.Contains(string(c.Diff), `"after":1152921504606846977`) {
		t.Errorf("stored diff %s does not hold the exact id", c.Diff)
	}
	mustCall(t, f.session, "apply_change", map[string]any{"change_id": id, "confirmation_token": out["confirmation_token"]})
	f.checkApplied(t)
	if st := f.status(t, id); st != ledger.Applied {
		t.Fatalf("status %s, want applied", st)
	}
}

// TestExact_MCPArgumentsReachApply sends the large integers as the
// arguments of the preview tool.
func TestExact_MCPArgumentsReachApply(t *testing.T) {
	f := newExactFixture(t)
	out := mustCall(t, f.session, "preview_exact", map[string]any{
		"id": exactID, "count": exactCount, "min": int64(math.MinInt64), "big": mustBig(exactBig)})
	id := out["change_id"].(string)
	if got := f.storedPayload(t, id); got != exactPayloadJSON {
		t.Fatalf("stored payload\n got %s\nwant %s", got, exactPayloadJSON)
	}
	mustCall(t, f.session, "apply_change", map[string]any{"change_id": id, "confirmation_token": out["confirmation_token"]})
	f.checkApplied(t)
}

// TestExact_ObservedIntegerChangeIsSeen checks the state binding with an
// integer beyond 2^53: a change of one in the observed state must read as
// changed, though a double holds both values as the same number.
func TestExact_ObservedIntegerChangeIsSeen(t *testing.T) {
	f := newExactFixture(t)
	ctx := context.Background()
	res, err := f.guard.Preview(ctx, "exact", exactPayload{ID: 1})
	if err != nil {
		t.Fatalf("Preview: %v", err)
	}
	f.mu.Lock()
	f.current = exactID - 1 // 1152921504606846976: the same double
	f.mu.Unlock()
	_, err = f.guard.Apply(ctx, res.ChangeID, res.ConfirmationToken)
	var sc *changeset.StateChangedError
	if !errors.As(err, &sc) {
		t.Fatalf("Apply after the observed integer changed by one: %v, want a *StateChangedError", err)
	}
	f.mu.Lock()
	n := len(f.applied)
	f.mu.Unlock()
	if n != 0 {
		t.Fatalf("Apply ran %d times, want never", n)
	}
	if st := f.status(t, res.ChangeID); st != ledger.ApplyFailed {
		t.Fatalf("status %s, want apply_failed", st)
	}
}

// TestExact_InexactNumberRefusedAtPreview checks that a payload holding an
// integer written in a form a double would round is refused at preview,
// with nothing stored, rather than stored as another integer.
func TestExact_InexactNumberRefusedAtPreview(t *testing.T) {
	f := newExactFixture(t)
	_, err := f.guard.Preview(context.Background(), "exact", map[string]any{"id": json.Number("1.152921504606846977e18")})
	if err == nil || !strings.Contains(err.Error(), "has no exact double") {
		t.Fatalf("Preview: %v, want a refusal naming the inexact integer", err)
	}
	changes, err := f.guard.Ledger().Changes(context.Background(), ledger.ChangeFilter{})
	if err != nil {
		t.Fatal(err)
	}
	if len(changes) != 0 {
		t.Fatalf("%d changes stored, want none", len(changes))
	}
}

func (f *exactFixture) status(t *testing.T, id string) ledger.Status {
	t.Helper()
	c, err := f.guard.Record(context.Background(), id)
	if err != nil {
		t.Fatalf("Record(%s): %v", id, err)
	}
	return c.Status
}

// TestExact_ResultDiffIsExact checks that a result's diff holds an
// integer beyond 2^53 exactly: built by the Guard (Preview, Status), as
// encoding/json writes it, decoded back into a DiffEntry, and as the MCP
// tools send it (go-sdk v1.8.0 alone would send its re-encoding of the
// value it decoded into an any to check the output schema, in which the
// integer has become a float64).
func TestExact_ResultDiffIsExact(t *testing.T) {
	f := newExactFixture(t)
	ctx := context.Background()
	const want = `{"field":"id","kind":"changed","before":null,"after":1152921504606846977}`
	check := func(where string, diff []changeset.DiffEntry) {
		t.Helper()
		if len(diff) != 1 {
			t.Fatalf("%s: diff %+v, want one entry", where, diff)
		}
		if after, ok := diff[0].After.(json.RawMessage); !ok || string(after) != "1152921504606846977" {
			t.Errorf("%s: after %#v, want the exact json.RawMessage 1152921504606846977", where, diff[0].After)
		}
		if got, _ := json.Marshal(diff[0]); string(got) != want {
			t.Errorf("%s: entry %s, want %s", where, got, want)
		}
	}
	res, err := f.guard.Preview(ctx, "lookup", lookupIn{Name: "a"})
	if err != nil {
		t.Fatal(err)
	}
	check("Guard.Preview", res.Diff)
	st, err := f.guard.Status(ctx, res.ChangeID)
	if err != nil {
		t.Fatal(err)
	}
	check("Guard.Status", st.Diff)

	for name, result := range map[string]any{"the preview": res, "the status": st} {
		text, err := json.Marshal(result)
		if err != nil {
			t.Fatal(err)
		}
		if !strings.Contains(string(text), `"diff":[`+want+`]`) {
			t.Errorf("%s encodes as %s, want the diff [%s]", name, text, want)
		}
		var decoded struct {
			Diff []changeset.DiffEntry `json:"diff"`
		}
		if err := json.Unmarshal(text, &decoded); err != nil {
			t.Fatal(err)
		}
		check(name+", decoded", decoded.Diff)
	}

	// Over MCP: the text the client receives (a client decoding it into
	// float64s is the client's choice).
	wire := func(tool string, args map[string]any) string {
		t.Helper()
		r, err := f.session.CallTool(ctx, &mcp.CallToolParams{Name: tool, Arguments: args})
		if err != nil || r.IsError || len(r.Content) != 1 {
			t.Fatalf("%s: %v %+v", tool, err, r)
		}
		return r.Content[0].(*mcp.TextContent).Text
	}
	for tool, args := range map[string]map[string]any{
		"preview_lookup":    {"name": "a"},
		"get_change_status": {"change_id": res.ChangeID},
	} {
		if text := wire(tool, args); !strings.Contains(text, want) {
			t.Errorf("%s sent %s, want the diff entry %s", tool, text, want)
		}
	}
}
