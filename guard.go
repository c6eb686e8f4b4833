package changeset

import (
	"context"
	"log/slog"
	"sync"
	"time"

	"github.com/mcp-changeset/changeset-go/checkpoint"
	"github.com/mcp-changeset/changeset-go/internal/pipeline"
	"github.com/mcp-changeset/changeset-go/internal/seal"
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
	sealer     *seal.Sealer // seals the request state of UserApproval; nil otherwise
	// voice writes every sentence the agent reads, for these options.
	voice *voice.Voice

	// pipe is the change pipeline: the operations, their previews
	// stored, the claims, applies and undos, and their outcomes recorded.
	pipe  *pipeline.Engine
	conns connections // IDs of sessions that have none (session runs)

	mu    sync.RWMutex
	tools map[string]bool // the names of the tools the Guard registered

	// notifyStop ends the webhook sender of Options.Notify and waits for
	// it; nil when there is none.
	notifyStop func()
	// checkpointsStop ends the schedule of Options.Checkpoints and waits
	// for it; nil when there is none.
	checkpointsStop func()
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
	g := &Guard{server: server, opts: opts, log: opts.Logger, tools: map[string]bool{}}
	mode := voice.Token
	switch opts.Approval {
	case UserApproval:
		mode = voice.User
	case PersonApproval:
		mode = voice.Person
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
		if g.sealer, err = seal.Load(context.Background(), g.ledger, opts.ApprovalKey); err != nil {
			g.Close()
			return nil, err
		}
	}
	g.pipe = pipeline.New(pipeline.Config{
		Ledger: g.ledger, Voice: g.voice, Now: g.now, Log: g.log, Sealer: g.sealer, Host: pipeHost{g},
		TTL: opts.TTL, UndoTTL: opts.UndoTTL, MaxClockSkew: opts.MaxClockSkew,
		MaxPayloadBytes: opts.MaxPayloadBytes, MaxResultBytes: opts.MaxResultBytes, MaxPendingPerScope: opts.MaxPendingPerScope,
		SessionRunIdle: opts.SessionRunIdle, ApprovalLink: g.approvalLink,
	})
	if opts.Notify != nil {
		if err := g.startNotify(*opts.Notify); err != nil {
			g.Close()
			return nil, err
		}
	}
	if opts.Checkpoints != nil {
		if err := g.startCheckpoints(*opts.Checkpoints); err != nil {
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

// Close stops the webhook sender (Options.Notify) and the checkpoint
// schedule (Options.Checkpoints), if any, and closes the ledger if the
// Guard opened it.
func (g *Guard) Close() error {
	g.stopNotify()
	if g.checkpointsStop != nil {
		g.checkpointsStop()
		g.checkpointsStop = nil
	}
	if g.ownsLedger {
		return g.ledger.Close()
	}
	return nil
}

// startCheckpoints runs s on the Guard's ledger until Close, logging to
// the Guard's logger and signing at the Guard's clock unless s names its
// own.
func (g *Guard) startCheckpoints(s checkpoint.Schedule) error {
	if err := s.Check(); err != nil {
		return err
	}
	if s.Logger == nil {
		s.Logger = g.log
	}
	if s.Now == nil {
		s.Now = g.opts.Clock
	}
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan struct{})
	go func() {
		defer close(done)
		_ = s.Run(ctx, g.ledger) // returns when ctx ends; s was checked above
	}()
	g.checkpointsStop = func() { cancel(); <-done }
	return nil
}

// Ledger returns the Guard's ledger, for operators' tasks such as
// ExpireStale, Reconcile and Prune. Those read the ledger's clock: the
// Guard's Options.Clock when the Guard opened the ledger, and whatever
// clock [ledger.OpenOptions] gave it when it came in Options.Ledger.
func (g *Guard) Ledger() *ledger.Ledger { return g.ledger }

// now reads the Guard's clock. Every time the Guard records (a row's
// CreatedAt, UpdatedAt, ExpiresAt, AppliedAt, …, and so the history
// entries of its transitions) and every expiry it checks comes from here,
// never from the ledger's clock.
func (g *Guard) now() time.Time { return g.opts.Clock() }

// toolName puts the Prefix in front of name.
func (g *Guard) toolName(name string) string { return g.opts.Prefix + name }

// lookup finds a registered operation by name.
func (g *Guard) lookup(action string) (*pipeline.Op, bool) { return g.pipe.Op(action) }
