package changeset

import (
	"context"
	"encoding/json"
	"errors"
	"log/slog"
	"strings"

	"github.com/mcp-changeset/changeset-go/internal/pipeline"
	"github.com/mcp-changeset/changeset-go/internal/voice"
	"github.com/mcp-changeset/changeset-go/ledger"
)

// pipeHost is the Guard as its change pipeline (package pipeline) sees
// it: the public errors the pipeline returns, which it makes and reads
// through this type, and how the Guard logs and observes the pipeline's
// steps (pipeline.Host).
type pipeHost struct{ g *Guard }

// ChangeError makes the pipeline's refusals and failures: a *ChangeError
// whose Kind is the sentinel of k (nil for a failure).
func (pipeHost) ChangeError(k pipeline.Kind, id, msg string, cause error) error {
	return &ChangeError{ChangeID: id, Msg: msg, Err: cause, Kind: kindError(k)}
}

func (pipeHost) StateChanged(id, phase string, found json.RawMessage) error {
	return &StateChangedError{ChangeID: id, Phase: phase, found: found}
}

// Failed reads the cause of a failed apply or undo: an operation's own
// StateChangedError gets the change's ID and phase, the ledger keeps the
// kind of failure and the error's type name, and the caller is told what
// failureText says.
func (pipeHost) Failed(id, phase string, cause error) pipeline.Failure {
	var sc *StateChangedError
	if errors.As(cause, &sc) && sc.ChangeID == "" { // an operation's own (see StateChangedError)
		sc.ChangeID, sc.Phase = id, phase
	}
	f := pipeline.Failure{Kind: failureOf(cause), Type: typeName(cause), Err: failureText(id, phase, cause)}
	if sc != nil {
		f.Found = sc.found
	}
	return f
}

func (pipeHost) Is(err error, k pipeline.Kind) bool { return errors.Is(err, kindError(k)) }

func (pipeHost) Text(err error) string { return agentText(err) }

// Start tells the Observer, if any, that an apply or undo begins.
func (h pipeHost) Start(ctx context.Context, k pipeline.ClaimKind, id string) (context.Context, func(pipeline.Outcome, error)) {
	step := StepApply
	if k == pipeline.UndoClaim {
		step = StepUndo
	}
	ctx, end := h.g.start(ctx, Event{Step: step, ChangeID: id})
	if end == nil {
		return ctx, nil
	}
	return ctx, func(out pipeline.Outcome, err error) { end(changeOutcome(id, out.Change, err)) }
}

func (h pipeHost) Transition(ctx context.Context, c *ledger.Change, from ledger.Status, by string) {
	h.g.logTransition(ctx, c, from, by)
}

func (h pipeHost) WritesOff(id, verb string) error {
	if h.g.WritesEnabled() {
		return nil
	}
	return h.g.writesOff(id, verb)
}

func (h pipeHost) PreviewFailed(ctx context.Context, action string, err error) error {
	return h.g.previewRefusal(ctx, action, err)
}

// Unreadable logs a run undo's failed read of c's current state in full
// (see logFailure) and returns the reason the report gives for leaving c
// as it is.
func (h pipeHost) Unreadable(ctx context.Context, c *ledger.Change, beforeUndo bool, err error) string {
	ref := h.g.logFailure(ctx, "observe failed in a run undo", err,
		slog.String("change_id", c.ID), slog.String("action", c.Action), slog.String("run_id", c.RunID))
	return h.g.voice.ReasonUnreadable(beforeUndo, ref)
}

// failureOf classifies why a change failed.
func failureOf(cause error) ledger.Failure {
	var sc *StateChangedError
	switch {
	case errors.As(cause, &sc):
		return ledger.FailureStateChanged
	case errors.Is(cause, pipeline.ErrResultTooLarge):
		return ledger.FailureResultTooLarge
	}
	return ledger.FailureError
}

// failureText is the error the agent sees for the failed apply or undo
// (phase) of change id.
func failureText(id, phase string, cause error) error {
	verb := "applied"
	if phase == "undo" {
		verb = "undone"
	}
	var pe *PanicError
	if errors.As(cause, &pe) {
		return &ChangeError{ChangeID: id, Err: cause, Msg: voice.FailedAs(id, verb, voice.FailureKind("panic"))}
	}
	if msg := agentText(cause); msg != typeName(cause) {
		if !strings.Contains(msg, id) { // an operation's own refusal
			msg = voice.Failed(id, verb, msg)
		}
		return &ChangeError{ChangeID: id, Msg: msg, Err: cause}
	}
	return &ChangeError{ChangeID: id, Err: cause, Msg: voice.OperationFailed(id, verb, typeName(cause))}
}
