// Package changesettest helps you test your own changeset operations, as
// package rivertest does for river's jobs.
//
// [NewGuard] gives a test a [changeset.Guard] on a temporary ledger (a
// SQLite file in t.TempDir()), with a fake [Clock], writes enabled, and an
// in-memory MCP client connected to the Guard's server, all closed when
// the test ends. Register your operations on it as your server does, then
// call them through the real tools with [Guard.Preview], [Guard.Apply],
// [Guard.Undo] and [Guard.Call], or let [CheckOperation] drive preview →
// apply → undo for a list of inputs and fail the test when the undo does
// not restore what Observe saw, when an apply goes through after the state
// changed, or when a preview writes. [CheckRun] does the same for a task of
// several calls undone as one run. Under changeset.UserApproval, set the
// Guard's ElicitationHandler ([Approve], [Decline] or your own) to answer
// for the user:
//
//	func TestSetSetting(t *testing.T) {
//		g := changesettest.NewGuard(t, changeset.Options{})
//		register(g.Server, g.Guard, newStore()) // your server's own register function
//		changesettest.CheckOperation(t, g, "set_setting",
//			setting{Key: "theme", Value: "dark"},
//			setting{Key: "language", Value: "fr"},
//		)
//	}
package changesettest

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	changeset "github.com/mcp-changeset/changeset-go"
	"github.com/modelcontextprotocol/go-sdk/mcp"
)

// callTimeout bounds every tool call the kit makes.
const callTimeout = 30 * time.Second

// start is the time a Guard's Clock reads when NewGuard returns.
var start = time.Date(2030, time.January, 2, 9, 0, 0, 0, time.UTC)

// Guard is a [changeset.Guard] set up for a test: a temporary ledger, a
// fake clock, writes enabled, and an in-memory MCP client. Make one with
// [NewGuard].
type Guard struct {
	// Guard is the Guard to register operations on, with
	// [changeset.Register] or your server's own register function.
	Guard *changeset.Guard
	// Server is the MCP server the Guard adds its tools to; add your read
	// tools to it too.
	Server *mcp.Server
	// Clock is the Guard's clock. Advance it to expire tokens or close undo
	// windows. It is nil when the Options given to NewGuard set a Clock.
	Clock *Clock
	// ElicitationHandler, when set before the first call, answers the
	// questions the server asks the user through the client, as under
	// changeset.UserApproval, where apply_change, undo_change and undo_run
	// ask the user to approve: its result is the user's answer. [Approve]
	// and [Decline] are ready-made answers. Left nil, the client declares no
	// elicitation, as most desktop clients do not.
	ElicitationHandler func(ctx context.Context, req *mcp.ElicitRequest) (*mcp.ElicitResult, error)

	t      testing.TB
	prefix string

	once    sync.Once
	session *mcp.ClientSession
	err     error
}

// NewGuard returns a Guard for the test t. opts are the Guard's options,
// the zero value being fine; NewGuard fills in what a test needs when it
// is left empty: LedgerPath (a SQLite file in t.TempDir()), Clock (a fake
// clock reading a fixed time) and WriteMode ([changeset.WriteGuarded]). The
// Guard, its ledger and the client are closed when the test ends.
//
// The client connects at the first call, so that it sees every tool
// registered before.
func NewGuard(t testing.TB, opts changeset.Options) *Guard {
	t.Helper()
	g := &Guard{t: t, prefix: opts.Prefix}
	if opts.Ledger == nil && opts.LedgerPath == "" {
		opts.LedgerPath = filepath.Join(t.TempDir(), "ledger.db")
	}
	if opts.Clock == nil {
		g.Clock = NewClock(start)
		opts.Clock = g.Clock.Now
	}
	if opts.WriteMode == "" {
		opts.WriteMode = changeset.WriteGuarded
	}
	g.Server = mcp.NewServer(&mcp.Implementation{Name: "changesettest", Version: "1"}, nil)
	guard, err := changeset.New(g.Server, opts)
	if err != nil {
		t.Fatalf("changesettest: changeset.New: %v", err)
	}
	g.Guard = guard
	t.Cleanup(func() {
		if g.session != nil {
			g.session.Close()
		}
		if err := guard.Close(); err != nil {
			t.Errorf("changesettest: closing the Guard: %v", err)
		}
	})
	return g
}

// Session returns the client session connected to the Guard's server over
// in-memory transports, connecting it at the first call.
func (g *Guard) Session() *mcp.ClientSession {
	g.t.Helper()
	s, err := g.connect()
	if err != nil {
		g.t.Fatalf("changesettest: %v", err)
	}
	return s
}

func (g *Guard) connect() (*mcp.ClientSession, error) {
	g.once.Do(func() {
		ctx, cancel := context.WithTimeout(context.Background(), callTimeout)
		defer cancel()
		st, ct := mcp.NewInMemoryTransports()
		ss, err := g.Server.Connect(ctx, st, nil)
		if err != nil {
			g.err = fmt.Errorf("connecting the server: %w", err)
			return
		}
		client := mcp.NewClient(&mcp.Implementation{Name: "changesettest", Version: "1"},
			&mcp.ClientOptions{ElicitationHandler: g.ElicitationHandler})
		if g.session, g.err = client.Connect(ctx, ct, nil); g.err != nil {
			g.err = fmt.Errorf("connecting the client: %w", g.err)
			ss.Close()
		}
	})
	return g.session, g.err
}

// ToolError is a tool's answer with isError set: a refusal the agent
// would read. Use errors.As to tell it from other errors.
type ToolError struct {
	Tool string
	// Text is the error's text, as the agent reads it.
	Text string
}

func (e *ToolError) Error() string { return e.Tool + ": " + e.Text }

// Call calls the tool named tool (with the Guard's Prefix in front if it
// has one and the name lacks it) with args, any value that encodes to a
// JSON object, and decodes its structured result into out unless out is
// nil. A tool error is returned as a [*ToolError]; a protocol error fails
// the test.
func (g *Guard) Call(tool string, args, out any) error {
	g.t.Helper()
	err := g.call(tool, args, out)
	var te *ToolError
	if err != nil && !errors.As(err, &te) {
		g.t.Fatalf("changesettest: %v", err)
	}
	return err
}

func (g *Guard) call(tool string, args, out any) error {
	s, err := g.connect()
	if err != nil {
		return err
	}
	if !strings.HasPrefix(tool, g.prefix) {
		tool = g.prefix + tool
	}
	ctx, cancel := context.WithTimeout(context.Background(), callTimeout)
	defer cancel()
	if args == nil {
		args = map[string]any{}
	}
	res, err := s.CallTool(ctx, &mcp.CallToolParams{Name: tool, Arguments: args})
	if err != nil {
		return fmt.Errorf("calling %s: %w", tool, err)
	}
	if res.IsError {
		var texts []string
		for _, c := range res.Content {
			if tc, ok := c.(*mcp.TextContent); ok {
				texts = append(texts, tc.Text)
			}
		}
		return &ToolError{Tool: tool, Text: strings.Join(texts, "\n")}
	}
	if out == nil {
		return nil
	}
	b, err := json.Marshal(res.StructuredContent)
	if err != nil {
		return fmt.Errorf("the result of %s: %w", tool, err)
	}
	if err := json.Unmarshal(b, out); err != nil {
		return fmt.Errorf("decoding the result of %s: %w", tool, err)
	}
	return nil
}

// Preview calls preview_<op> with args.
func (g *Guard) Preview(op string, args any) (*changeset.PreviewResult, error) {
	g.t.Helper()
	var p changeset.PreviewResult
	if err := g.Call("preview_"+op, args, &p); err != nil {
		return nil, err
	}
	return &p, nil
}

// Apply calls apply_change with the change and confirmation token of p.
func (g *Guard) Apply(p *changeset.PreviewResult) (*changeset.ApplyResult, error) {
	g.t.Helper()
	var a changeset.ApplyResult
	if err := g.Call("apply_change", applyArgs(p), &a); err != nil {
		return nil, err
	}
	return &a, nil
}

// Undo calls undo_change with the change and undo token of a.
func (g *Guard) Undo(a *changeset.ApplyResult) (*changeset.UndoResult, error) {
	g.t.Helper()
	var u changeset.UndoResult
	if err := g.Call("undo_change", undoArgs(a), &u); err != nil {
		return nil, err
	}
	return &u, nil
}

// Approve answers every question the server asks the user with a yes, as
// a [Guard]'s ElicitationHandler.
func Approve(context.Context, *mcp.ElicitRequest) (*mcp.ElicitResult, error) {
	return &mcp.ElicitResult{Action: "accept", Content: map[string]any{"approve": true}}, nil
}

// Decline answers every question the server asks the user with a no, as
// a [Guard]'s ElicitationHandler.
func Decline(context.Context, *mcp.ElicitRequest) (*mcp.ElicitResult, error) {
	return &mcp.ElicitResult{Action: "decline"}, nil
}

// applyArgs are apply_change's arguments for p; without a token (under
// user approval, where the agent holds none) they name the change only.
func applyArgs(p *changeset.PreviewResult) map[string]any {
	args := map[string]any{"change_id": p.ChangeID}
	if p.ConfirmationToken != "" {
		args["confirmation_token"] = p.ConfirmationToken
	}
	return args
}

func undoArgs(a *changeset.ApplyResult) map[string]any {
	args := map[string]any{"change_id": a.ChangeID}
	if a.UndoToken != "" {
		args["undo_token"] = a.UndoToken
	}
	return args
}

// Clock is a fake clock, safe for concurrent use. A Guard made by
// [NewGuard] reads it; move time with Advance or Set.
type Clock struct {
	mu sync.Mutex
	t  time.Time
}

// NewClock returns a clock that reads t.
func NewClock(t time.Time) *Clock { return &Clock{t: t} }

// Now reads the clock.
func (c *Clock) Now() time.Time {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.t
}

// Advance moves the clock by d (backwards when d is negative).
func (c *Clock) Advance(d time.Duration) {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.t = c.t.Add(d)
}

// Set sets the clock to t.
func (c *Clock) Set(t time.Time) {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.t = t
}
