package changeset

import (
	"context"
	"log/slog"
	"os"
	"strings"
	"sync"
	"time"

	"github.com/mcp-changeset/changeset-go/internal/voice"
	"github.com/mcp-changeset/changeset-go/ledger"
	_ "github.com/mcp-changeset/changeset-go/ledger/sqlite" // the default backend for file paths
	"github.com/modelcontextprotocol/go-sdk/mcp"
)

// Guard guards the state-changing operations of one MCP server. It owns the
// ledger and registers the tools: one preview_<op> per operation, and the
// shared apply_change, undo_change and get_change_status.
//
// A Guard is safe for concurrent use, and any number of processes may share
// its ledger.
type Guard struct {
	server     *mcp.Server
	ledger     *ledger.Ledger
	ownsLedger bool
	opts       Options
	log        *slog.Logger
	sealer     *sealer // seals the request state of UserApproval; nil otherwise
	// voice writes every sentence the agent reads, for these options.
	voice *voice.Voice

	conns  connections // IDs of sessions that have none (session runs)
	recent recentRuns  // when this process last previewed in a session run

	mu    sync.RWMutex
	ops   map[string]*op  // by operation name, without prefix
	tools map[string]bool // the names of the tools the Guard registered
}

// New opens the ledger named by opts and returns a Guard for server. It
// registers the shared tools on server (unless opts.NoSharedTools) and
// appends the Guard's instructions for the agent to the server's own
// instructions. server may be nil for trusted code that only calls the
// Guard's methods.
//
// New returns an error, never panics, for invalid options or a ledger that
// cannot be opened.
func New(server *mcp.Server, opts Options) (*Guard, error) {
	opts, err := opts.resolve()
	if err != nil {
		return nil, err
	}
	g := &Guard{server: server, opts: opts, log: opts.Logger, ops: map[string]*op{}, tools: map[string]bool{}}
	mode := voice.Token
	if opts.Approval == UserApproval {
		mode = voice.User
	}
	env := opts.WriteModeEnv
	if opts.WriteMode != "" { // the options fix the mode: no variable turns writes on
		env = ""
	}
	g.voice = voice.New(opts.Prefix, env, mode)
	if v := g.unknownWriteMode(); v != "" {
		g.log.Warn("the write-mode variable holds no write mode; writes stay off until it reads "+WriteGuarded,
			"variable", opts.WriteModeEnv, "value", v)
	}
	// A ledger the Guard was given is used, never changed: every time the
	// Guard records comes from its own clock, in the rows it writes. A
	// ledger the Guard opens reads the Guard's clock too, for the
	// operators' tasks called through Ledger (ExpireStale, Prune, …).
	if opts.Ledger != nil {
		g.ledger = opts.Ledger
	} else {
		l, err := ledger.Open(context.Background(), opts.LedgerPath, ledger.OpenOptions{
			Create:         true,
			BusyTimeout:    opts.BusyTimeout,
			AllowNetworkFS: opts.AllowNetworkFS,
			Durability:     opts.Durability,
			Clock:          opts.Clock,
		})
		if err != nil {
			return nil, err
		}
		g.ledger, g.ownsLedger = l, true
	}
	if opts.Approval == UserApproval {
		if g.sealer, err = loadApprovalKey(context.Background(), g.ledger, opts.ApprovalKey); err != nil {
			g.Close()
			return nil, err
		}
	}
	if server != nil {
		server.AddReceivingMiddleware(g.middleware)
		if !opts.NoSharedTools {
			g.addSharedTools()
			g.addRunTools()
		}
	}
	return g, nil
}

// Close closes the ledger if the Guard opened it.
func (g *Guard) Close() error {
	if g.ownsLedger {
		return g.ledger.Close()
	}
	return nil
}

// Ledger returns the Guard's ledger, for operators' tasks such as
// ExpireStale, Reconcile and Prune. Those read the ledger's clock: the
// Guard's Options.Clock when the Guard opened the ledger, and whatever
// clock [ledger.OpenOptions] gave it when it came in Options.Ledger.
func (g *Guard) Ledger() *ledger.Ledger { return g.ledger }

// WritesEnabled reports whether apply and undo may run now: WriteMode is
// WriteGuarded, or WriteMode is empty and the environment variable reads
// "guarded". The variable is read at each call, so an operator can turn
// writes off without restarting a server (pending previews stay valid).
func (g *Guard) WritesEnabled() bool {
	if g.opts.WriteMode != "" {
		return g.opts.WriteMode == WriteGuarded
	}
	return os.Getenv(g.opts.WriteModeEnv) == WriteGuarded
}

// unknownWriteMode is the value of the write-mode variable when the
// options leave the mode to it and it holds neither WriteGuarded nor
// WriteDisabled (nor nothing); "" otherwise.
func (g *Guard) unknownWriteMode() string {
	if g.opts.WriteMode != "" {
		return ""
	}
	switch v := os.Getenv(g.opts.WriteModeEnv); v {
	case "", WriteGuarded, WriteDisabled:
		return ""
	default:
		return v
	}
}

// writesOff is the refusal of a write while writes are off: of change id
// (not verb, "applied" or "undone"), or of writes in general when id is "".
func (g *Guard) writesOff(id, verb string) *WritesDisabledError {
	e := &WritesDisabledError{ChangeID: id, verb: verb, Value: g.unknownWriteMode()}
	if g.opts.WriteMode == "" {
		e.EnvVar = g.opts.WriteModeEnv
	}
	return e
}

// now reads the Guard's clock. Every time the Guard records (a row's
// CreatedAt, UpdatedAt, ExpiresAt, AppliedAt, …, and so the history
// entries of its transitions) and every expiry it checks comes from here,
// never from the ledger's clock.
func (g *Guard) now() time.Time { return g.opts.Clock() }

// toolName puts the Prefix in front of name.
func (g *Guard) toolName(name string) string { return g.opts.Prefix + name }

// lookup finds a registered operation by name.
func (g *Guard) lookup(action string) (*op, bool) {
	g.mu.RLock()
	defer g.mu.RUnlock()
	o, ok := g.ops[action]
	return o, ok
}

// scopeOf returns the hashed scope of a call. req is nil for calls from
// trusted code.
func (g *Guard) scopeOf(ctx context.Context, req *mcp.CallToolRequest) (ledger.Digest, error) {
	if g.opts.ScopeFunc == nil {
		return scopeHash(g.opts.Scope), nil
	}
	s, err := g.opts.ScopeFunc(ctx, req)
	if err != nil {
		return "", &ChangeError{Kind: ErrRefused, Msg: voice.ScopeUnknown(), Err: err}
	}
	return scopeHash(s), nil
}

// agentActor is how the ledger names the agent as the one who took a step,
// when no principal is known; agentBy names the agent of a request.
const agentActor = "agent"

// agentBy names the agent behind req for the ledger: "agent:<principal>"
// (see Options.Principal), or "agent" when there is none. A Principal
// function that fails refuses the call (ErrRefused), so that no step is
// recorded under the wrong name.
func (g *Guard) agentBy(ctx context.Context, req *mcp.CallToolRequest) (string, error) {
	if req == nil && g.opts.Principal == nil {
		return agentActor, nil
	}
	p, err := g.principalOf(ctx, req)
	switch {
	case err != nil:
		return "", err
	case p == "":
		return agentActor, nil
	}
	return agentActor + ":" + strings.ToValidUTF8(cut(p, 200), ""), nil
}

// Person names a person acting through trusted code (a dashboard, a
// support tool), as recorded in the ledger: "person:<name>".
func Person(name string) string { return "person:" + name }
