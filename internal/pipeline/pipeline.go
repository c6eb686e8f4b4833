// Package pipeline is the change pipeline of a Guard: it stores a
// preview as a pending change ([Engine.Check], [Engine.Store]), claims a
// change for its apply or undo ([Claim]), checks the state, runs the
// operation ([Engine.Apply], [Engine.Undo]) and records the outcome or
// the failure, retried through a busy ledger. It also checks a claim
// without making it, for the user's approval ([Engine.Precheck]), moves a
// run's row through its undo ([Engine.ClaimRun] and the rest of run.go),
// and serves the run-undo engine (package runundo) the operations and
// the one path of a change's undo ([Engine.Runs]).
//
// The pipeline knows the Guard only through [Host]: the root package's
// public errors, which this package cannot name, are made and read by
// [Errors]; how a step is logged and reported to an Observer is the
// Guard's too. Operations come in as an [Op], a plain struct of functions
// on canonical JSON that the root package's Register builds from a typed
// Operation.
package pipeline

import (
	"context"
	"encoding/json"
	"log/slog"
	"sync"
	"time"

	"github.com/mcp-changeset/changeset-go/internal/seal"
	"github.com/mcp-changeset/changeset-go/internal/voice"
	"github.com/mcp-changeset/changeset-go/ledger"
)

// Config is what an Engine is made of: the Guard's ledger, words, clock,
// logger and limits, and the Host it reports to.
type Config struct {
	Ledger *ledger.Ledger
	Voice  *voice.Voice // words every refusal
	// Now is the Guard's clock: every time the pipeline records and every
	// expiry it checks.
	Now func() time.Time
	Log *slog.Logger
	// Sealer derives the tokens of the user's approval; nil under token
	// approval (see ByUser).
	Sealer *seal.Sealer
	Host   Host

	// TTL is how long a preview's confirmation token lives; UndoTTL how
	// long an undo token lives after the apply, none when negative.
	TTL, UndoTTL time.Duration
	// MaxClockSkew: a clock this far before a row's creation refuses its
	// claim.
	MaxClockSkew time.Duration
	// MaxPayloadBytes caps a proposal's payload, diff and summary
	// together, MaxResultBytes an apply's result; MaxPendingPerScope the
	// live previews of one scope.
	MaxPayloadBytes, MaxResultBytes, MaxPendingPerScope int
	// SessionRunIdle is how long a session run waits for another preview.
	SessionRunIdle time.Duration
	// ApprovalLink returns the page where people decide the approval id,
	// "" when there is none; nil for none at all.
	ApprovalLink func(id string) string
}

// Engine runs the change pipeline of one Guard. It is safe for concurrent
// use.
type Engine struct {
	Config

	mu     sync.RWMutex
	ops    map[string]*Op // by operation name, without prefix
	recent recentRuns     // when this process last previewed in a session run
}

// New returns an Engine with no operations.
func New(c Config) *Engine {
	return &Engine{Config: c, ops: map[string]*Op{}}
}

// Register adds o under o.Name. It reports false, adding nothing, when
// the name is taken.
func (e *Engine) Register(o *Op) bool {
	e.mu.Lock()
	defer e.mu.Unlock()
	if _, dup := e.ops[o.Name]; dup {
		return false
	}
	e.ops[o.Name] = o
	return true
}

// Op finds a registered operation by name.
func (e *Engine) Op(name string) (*Op, bool) {
	e.mu.RLock()
	defer e.mu.RUnlock()
	o, ok := e.ops[name]
	return o, ok
}

// Host is what the pipeline needs of the Guard.
type Host interface {
	Errors
	// Start tells the Guard's Observer that the apply or undo (k) of
	// change id begins. It returns the context the step runs under and
	// the function to call once, with the step's outcome and error, when
	// it ends; that function is nil when nothing observes.
	Start(ctx context.Context, k ClaimKind, id string) (context.Context, func(Outcome, error))
	// Transition reports that the ledger committed c's move from from to
	// c.Status, taken by by.
	Transition(ctx context.Context, c *ledger.Change, from ledger.Status, by string)
	// WritesOff returns the refusal of a write of change id (not verb:
	// "applied" or "undone") while writes are off, and nil while they are
	// on.
	WritesOff(id, verb string) error
	// PreviewFailed is what a preview of action returns when reading the
	// state failed with err: err itself when it is meant for the agent,
	// else a refusal that names it without its details (which are
	// logged).
	PreviewFailed(ctx context.Context, action string, err error) error
	// Unreadable logs a run undo's failed read (err) of c's current
	// state and returns the reason the report gives for leaving c as it
	// is (see runundo.Host).
	Unreadable(ctx context.Context, c *ledger.Change, beforeUndo bool, err error) string
}

// Errors makes and reads the errors the pipeline returns. They are the
// root package's public types (ChangeError, StateChangedError, …), whose
// names the ledger stores and trusted code matches, so the pipeline asks
// for them instead of making its own.
type Errors interface {
	// ChangeError is an error about change id ("" for none) whose message
	// msg the agent reads: a refusal of kind k, or, for [NoKind], a
	// failure. cause, when not nil, is its cause, which the agent does
	// not read.
	ChangeError(k Kind, id, msg string, cause error) error
	// StateChanged is the refusal of change id whose resource no longer
	// looks the way the check of phase ("apply" or "undo") expected;
	// found is what the check found.
	StateChanged(id, phase string, found json.RawMessage) error
	// Failed says how the failure of change id in phase, caused by
	// cause, is recorded, and what its caller is told.
	Failed(id, phase string, cause error) Failure
	// Is reports whether err is a refusal of kind k.
	Is(err error, k Kind) bool
	// Text is what the agent may read of err.
	Text(err error) string
}

// A Failure is how a failed apply or undo is recorded, as the Guard
// reads its cause (see [Errors.Failed]).
type Failure struct {
	// Kind is the kind of failure the ledger keeps.
	Kind ledger.Failure
	// Type is the error type the ledger keeps.
	Type string
	// Found is the state the Guard's own check found, or nil.
	Found json.RawMessage
	// Err is what the caller is told.
	Err error
}

// A Kind is a kind of refusal. The root package gives each one its
// sentinel error (ErrNotFound, …), which is what trusted code matches.
type Kind int

// The kinds of refusal.
const (
	// NoKind: not a refusal but a failure; the error's cause says why.
	NoKind Kind = iota
	NotFound
	InvalidToken
	Expired
	WrongStatus
	RunClosed
	Busy
	StateChanged
	PlanChanged
	WritesDisabled
	Quota
	Refused
	NoChange
	Dependency
	// AwaitingApproval: people have not approved yet (person approval).
	AwaitingApproval
	// Declined: a person declined.
	Declined
	// Kinds is the number of kinds, NoKind included.
	Kinds
)

// refuse is the refusal of kind k of change id, in msg.
func (e *Engine) refuse(k Kind, id, msg string) error {
	return e.Host.ChangeError(k, id, msg, nil)
}

// marked is a refusal made inside a claim's transaction, marked apart
// from the ledger's errors: a refusal lets the transaction commit what
// the check wrote, an error of the ledger rolls it back (see asRefusal).
type marked struct{ err error }

func (r *marked) Error() string { return r.err.Error() }

// refused marks err as a refusal.
func refused(err error) error { return &marked{err} }

// asRefusal splits what a check inside a claim transaction returned: a
// refusal, which lets the transaction commit what the check wrote, or the
// ledger's error, which rolls it back.
func asRefusal(err error) (refusal, failure error) {
	if r, ok := err.(*marked); ok {
		return r.err, nil
	}
	return nil, err
}
