package changeset

import (
	"context"
	"errors"
	"log/slog"

	"github.com/mcp-changeset/changeset-go/internal/pipeline"
	"github.com/mcp-changeset/changeset-go/internal/token"
	"github.com/mcp-changeset/changeset-go/internal/voice"
	"github.com/mcp-changeset/changeset-go/ledger"
)

// An Observer watches the steps a Guard takes, for traces and metrics;
// package otelchangeset gives one for OpenTelemetry. Set it as
// Options.Observer. When it is nil the Guard makes no calls for it and
// allocates nothing.
//
// The Guard calls an Observer on the goroutine of each request, from many
// requests at once: its methods must be safe for concurrent use, and should
// return quickly. What the Guard passes names things (actions, change and
// run IDs, statuses, kinds of failure); it never holds payloads, diffs,
// results, tokens or digests.
type Observer interface {
	// Start is called as a step begins. It returns the context the step
	// runs under, which the operation's Preview, Observe, Apply and Undo
	// receive (a tracer puts its span there), and a function that the
	// Guard calls once, when the step ends, with its outcome. The function
	// may be nil.
	Start(ctx context.Context, e Event) (context.Context, func(Outcome))
	// Transition is called after the ledger committed a change's move
	// from one status to another. ctx is the context of the step that
	// made the move.
	Transition(ctx context.Context, t Transition)
}

// A Step names what a Guard is doing.
type Step string

// The steps an Observer sees.
const (
	// StepPreview: a preview of an operation, to a stored pending change.
	StepPreview Step = "preview"
	// StepApply: the claim and apply of a pending change.
	StepApply Step = "apply"
	// StepUndo: the claim and undo of an applied change, on its own or as
	// one step of a run's undo.
	StepUndo Step = "undo"
	// StepUndoRun: the undo of a run, or its dry run (Event.DryRun).
	StepUndoRun Step = "undo_run"
)

// An Event describes a step as it begins. Fields the step does not know
// yet are empty: an apply knows its change's ID, not yet its action; a
// preview knows its action, not yet its change.
type Event struct {
	Step     Step
	Action   string // the operation's name
	ChangeID string
	RunID    string
	DryRun   bool // an undo run that only reports what it would do
}

// An Outcome says how a step ended.
type Outcome struct {
	// Action, ChangeID and RunID are what the step knew at its end.
	Action, ChangeID, RunID string
	// Status is the status of the change, or of the run for StepUndoRun,
	// after the step; empty when the step was refused before it read the
	// ledger.
	Status string
	// Failure is empty when the step succeeded. Otherwise it is the kind of
	// failure of a failed change ("state_changed", "error",
	// "result_too_large"; see ledger.Failure), or the kind of refusal,
	// one per kind of error (see ErrNotFound and the others): "not_found",
	// "invalid_token", "expired", "wrong_status", "run_closed", "busy",
	// "state_changed" (a resource), "plan_changed" (a run's plan),
	// "writes_disabled", "quota", "no_change", "dependency", "refused" (by
	// the operation or the library, or not approved); or "ledger" or
	// "error".
	Failure string
	// Err is the error the step returned, nil on success. Its text is
	// meant for operators: it can hold paths and values of the payload.
	Err error
}

// A Transition is a change's move from one status to another, as the
// ledger recorded it. From is empty for a new preview.
type Transition struct {
	Action, ChangeID, RunID string
	From, To                ledger.Status
	// By names who took the step: "agent", "agent:<principal>" or
	// "person:<name>".
	By string
	// Failure is the kind of failure when To is ApplyFailed or UndoFailed.
	Failure ledger.Failure
}

// start tells the Observer, if any, that a step begins. end is nil when
// there is no Observer: callers check it before building an Outcome.
func (g *Guard) start(ctx context.Context, e Event) (_ context.Context, end func(Outcome)) {
	if g.opts.Observer == nil {
		return ctx, nil
	}
	return g.opts.Observer.Start(ctx, e)
}

// failureKind names the kind of refusal or failure err is, for an
// Outcome: the name refusalKinds gives its kind, "result_too_large",
// "ledger" for a failure of the ledger, or "error".
func failureKind(err error) string {
	if err == nil {
		return ""
	}
	for _, k := range refusalKinds {
		if errors.Is(err, k.err) {
			return k.name
		}
	}
	var le *LedgerError
	switch {
	case errors.Is(err, pipeline.ErrResultTooLarge):
		return string(ledger.FailureResultTooLarge)
	case errors.As(err, &le):
		return "ledger"
	}
	return string(ledger.FailureError)
}

// logTransition records a change's committed move from one status to
// another: one log record, and a call of the Observer.
func (g *Guard) logTransition(ctx context.Context, c *ledger.Change, from ledger.Status, by string) {
	if g.log.Enabled(ctx, slog.LevelInfo) {
		attrs := []slog.Attr{
			slog.String("change_id", c.ID), slog.String("action", c.Action),
			slog.String("from", string(from)), slog.String("to", string(c.Status)),
			slog.String("by", by),
		}
		if c.RunID != "" {
			attrs = append(attrs, slog.String("run_id", c.RunID))
		}
		if p := principalIn(ctx, by); p != "" {
			attrs = append(attrs, slog.String("principal", p))
		}
		level := slog.LevelInfo
		if c.Failure != "" {
			// The full error is the operator's, kept in the ledger too.
			attrs = append(attrs, slog.String("failure", string(c.Failure)),
				slog.String("error_type", c.ErrorType), slog.String("error", c.Error))
			level = slog.LevelWarn
		}
		g.log.LogAttrs(ctx, level, "change transition", attrs...)
	}
	if g.opts.Observer != nil {
		g.opts.Observer.Transition(ctx, Transition{Action: c.Action, ChangeID: c.ID, RunID: c.RunID,
			From: from, To: c.Status, By: by, Failure: c.Failure})
	}
}

// changeOutcome is the Outcome of an apply or undo of change id: c is the
// row as the step last saw it (nil when the claim was refused before it),
// err what the step returned.
func changeOutcome(id string, c *ledger.Change, err error) Outcome {
	out := Outcome{ChangeID: id, Err: err, Failure: failureKind(err)}
	if c != nil {
		out.Action, out.RunID, out.Status = c.Action, c.RunID, string(c.Status)
	}
	if s := ledger.Status(out.Status); err != nil && (s == ledger.ApplyFailed || s == ledger.UndoFailed) {
		out.Failure = string(failureOf(err))
	}
	return out
}

// logFailure logs err in full at Error level under a short random
// reference, and returns what the agent is told instead: the error's type
// name and the reference, e.g. "fs.PathError (reference ref_1a2b3c4d; the
// server's log has the details)". An operator finds the record by the
// reference the user quotes.
func (g *Guard) logFailure(ctx context.Context, msg string, err error, attrs ...slog.Attr) string {
	ref := token.NewID(refPrefix)[:len(refPrefix)+8]
	attrs = append(attrs, slog.String("reference", ref), slog.String("error_type", typeName(err)), slog.String("err", err.Error()))
	g.log.LogAttrs(ctx, slog.LevelError, msg, attrs...)
	if text := agentText(err); text != typeName(err) { // a failure named by its kind
		return voice.Reference(text, "", ref)
	}
	return voice.Reference("", typeName(err), ref)
}

// refPrefix starts the reference of a logged failure.
const refPrefix = "ref_"
