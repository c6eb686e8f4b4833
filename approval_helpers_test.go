package changeset_test

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"strings"
	"sync"
	"testing"
	"time"

	changeset "github.com/mcp-changeset/changeset-go"
	"github.com/mcp-changeset/changeset-go/internal/testkit"
	"github.com/modelcontextprotocol/go-sdk/mcp"
)

// Protocol versions the approval tests pin their clients to.
const (
	protoMRTR   = "2026-07-28" // the client fulfils input requests and retries
	protoLegacy = "2025-06-18" // the SDK's server bridge sends elicitation/create
)

// approvalFixture is a Guard with user approval and the test operations,
// whose server any number of clients can connect to.
type approvalFixture struct {
	t      *testing.T
	guard  *changeset.Guard
	server *mcp.Server
	store  *kv
	clock  *testkit.Clock
}

// newApprovalFixtureOn builds an approval fixture on a new ledger of kit's
// backend, passed in Options.Ledger and closed when t ends.
func newApprovalFixtureOn(t *testing.T, kit backendKit, edit ...func(*changeset.Options)) *approvalFixture {
	t.Helper()
	return buildApprovalFixture(t, changeset.Options{Ledger: kit.Ledger(t)}, edit)
}

// buildApprovalFixture completes base, whose ledger is set, into an
// approval fixture; a replica passes another fixture's ledger reopened.
func buildApprovalFixture(t *testing.T, base changeset.Options, edit []func(*changeset.Options)) *approvalFixture {
	t.Helper()
	f := &approvalFixture{
		t:     t,
		store: &kv{m: map[string]string{"theme": "light", "language": "en"}},
		clock: testkit.NewClock(time.Date(2026, 11, 30, 9, 0, 0, 0, time.UTC)),
	}
	opts := base
	opts.WriteMode, opts.Clock, opts.Approval = changeset.WriteGuarded, f.clock.Now, changeset.UserApproval
	for _, e := range edit {
		e(&opts)
	}
	f.server = mcp.NewServer(&mcp.Implementation{Name: "test", Version: "1"}, nil)
	g, err := changeset.New(f.server, opts)
	if err != nil {
		t.Fatalf("New: %v", err)
	}
	t.Cleanup(func() { g.Close() })
	f.guard = g
	registerTestOps(g, f.store)
	registerMulti(g)
	return f
}

type multiIn struct {
	Fields map[string]string `json:"fields"`
}

// registerMulti registers "multi": it proposes to create every field of
// its input, so that a test controls the whole diff; its apply writes
// nothing.
func registerMulti(g *changeset.Guard) {
	changeset.Register(g, &mcp.Tool{Name: "multi"}, changeset.Operation[multiIn, multiIn, map[string]any]{
		Preview: func(ctx context.Context, in multiIn) (*changeset.Proposal[multiIn], error) {
			after := map[string]any{}
			for k, v := range in.Fields {
				after[k] = v
			}
			return &changeset.Proposal[multiIn]{Payload: in, Diff: changeset.DiffFields(nil, after),
				Summary: fmt.Sprintf("Set %d fields", len(in.Fields))}, nil
		},
		Apply: func(ctx context.Context, p multiIn) (map[string]any, error) { return map[string]any{}, nil },
	})
}

// user stands in for the person behind a client: it records every
// question and answers with the next of its scripted answers (the last
// one repeats).
type user struct {
	mu        sync.Mutex
	answers   []*mcp.ElicitResult
	fail      error
	questions []*mcp.ElicitParams
}

// says scripts a user who answers with results, in order.
func says(results ...*mcp.ElicitResult) *user { return &user{answers: results} }

var (
	yes     = &mcp.ElicitResult{Action: "accept", Content: map[string]any{"approve": true}}
	no      = &mcp.ElicitResult{Action: "accept", Content: map[string]any{"approve": false}}
	decline = &mcp.ElicitResult{Action: "decline"}
	cancel  = &mcp.ElicitResult{Action: "cancel"}
)

func (u *user) handle(_ context.Context, req *mcp.ElicitRequest) (*mcp.ElicitResult, error) {
	u.mu.Lock()
	defer u.mu.Unlock()
	u.questions = append(u.questions, req.Params)
	if u.fail != nil {
		return nil, u.fail
	}
	a := u.answers[0]
	if len(u.answers) > 1 {
		u.answers = u.answers[1:]
	}
	return a, nil
}

// asked returns how many questions the user saw, and the last one.
func (u *user) asked() (int, *mcp.ElicitParams) {
	u.mu.Lock()
	defer u.mu.Unlock()
	if len(u.questions) == 0 {
		return 0, nil
	}
	return len(u.questions), u.questions[len(u.questions)-1]
}

// clientOptions configure connectClient.
type clientOptions struct {
	protocol string // ProtocolVersion to pin; "" for the SDK's latest
	user     *user  // nil: the client has no elicitation handler
	manual   bool   // disable the client's automatic multi round-trip retry
}

// connect connects a client of the given kind to the fixture's server.
func (f *approvalFixture) connect(o clientOptions) *mcp.ClientSession {
	f.t.Helper()
	ctx := context.Background()
	st, ct := mcp.NewInMemoryTransports()
	ss, err := f.server.Connect(ctx, st, nil)
	if err != nil {
		f.t.Fatalf("server connect: %v", err)
	}
	copts := &mcp.ClientOptions{}
	if o.user != nil {
		copts.ElicitationHandler = o.user.handle
	}
	if o.manual {
		copts.MultiRoundTrip = &mcp.MultiRoundTripOptions{Disabled: true}
	}
	client := mcp.NewClient(&mcp.Implementation{Name: "approval-test-client", Version: "1"}, copts)
	cs, err := client.Connect(ctx, ct, &mcp.ClientSessionOptions{ProtocolVersion: o.protocol})
	if err != nil {
		f.t.Fatalf("client connect: %v", err)
	}
	if o.protocol != "" && cs.InitializeResult().ProtocolVersion != o.protocol {
		f.t.Fatalf("negotiated protocol %s, want %s", cs.InitializeResult().ProtocolVersion, o.protocol)
	}
	f.t.Cleanup(func() { cs.Close(); ss.Wait() })
	return cs
}

// preview previews set(key, value) and returns the change ID; with user
// approval the preview must carry no token.
func (f *approvalFixture) preview(cs *mcp.ClientSession, key, value string, extra ...map[string]any) string {
	f.t.Helper()
	args := map[string]any{"key": key, "value": value}
	for _, e := range extra {
		for k, v := range e {
			args[k] = v
		}
	}
	out := mustCall(f.t, cs, "preview_set", args)
	if _, ok := out["confirmation_token"]; ok {
		f.t.Fatalf("a preview with user approval returned a token: %v", out)
	}
	return out["change_id"].(string)
}

// status reads a change's status from the ledger.
func (f *approvalFixture) status(id string) string {
	f.t.Helper()
	c, err := f.guard.Record(context.Background(), id)
	if err != nil {
		f.t.Fatalf("Record(%s): %v", id, err)
	}
	return string(c.Status)
}

// question calls a tool on a client without automatic retry and returns
// the sealed request state of the question it asks.
func question(t *testing.T, cs *mcp.ClientSession, name string, args map[string]any) (string, *mcp.ElicitParams) {
	t.Helper()
	res, err := cs.CallTool(context.Background(), &mcp.CallToolParams{Name: name, Arguments: args})
	if err != nil {
		t.Fatalf("%s: protocol error: %v", name, err)
	}
	if !res.NeedsInput() || res.RequestState == "" {
		t.Fatalf("%s: got %+v, want an input request with a request state", name, res)
	}
	q, ok := res.InputRequests["approve"].(*mcp.ElicitParams)
	if !ok {
		t.Fatalf("%s: input requests %v have no elicitation named approve", name, res.InputRequests)
	}
	return res.RequestState, q
}

// answer sends a call that carries an answer and a request state, as a
// client's retry does (or as a client forging one would), and returns the
// structured result or the tool error's text.
func answer(t *testing.T, cs *mcp.ClientSession, name string, args map[string]any, state string, a *mcp.ElicitResult) (map[string]any, string) {
	t.Helper()
	params := &mcp.CallToolParams{Name: name, Arguments: args, RequestState: state}
	if a != nil {
		params.InputResponses = mcp.InputResponseMap{"approve": a}
	}
	return callParams(t, cs, params)
}

// callParams is call with full params.
func callParams(t *testing.T, cs *mcp.ClientSession, params *mcp.CallToolParams) (map[string]any, string) {
	t.Helper()
	res, err := cs.CallTool(context.Background(), params)
	if err != nil {
		t.Fatalf("%s: protocol error: %v", params.Name, err)
	}
	if res.NeedsInput() {
		t.Fatalf("%s: asked again (%v), want a final result", params.Name, res.InputRequests)
	}
	if res.IsError {
		var text []string
		for _, c := range res.Content {
			if tc, ok := c.(*mcp.TextContent); ok {
				text = append(text, tc.Text)
			}
		}
		return nil, strings.Join(text, "\n")
	}
	return decodeMap(t, res.StructuredContent), ""
}

func decodeMap(t *testing.T, v any) map[string]any {
	t.Helper()
	var out map[string]any
	raw, _ := json.Marshal(v)
	if err := json.Unmarshal(raw, &out); err != nil {
		t.Fatalf("structured content: %v", err)
	}
	return out
}

var errUserAgentFailed = errors.New("the elicitation dialog crashed")
