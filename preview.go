package changeset

import (
	"context"
	"encoding/json"
	"errors"
	"log/slog"

	"github.com/mcp-changeset/changeset-go/internal/canonjson"
	"github.com/mcp-changeset/changeset-go/internal/pipeline"
	"github.com/mcp-changeset/changeset-go/internal/token"
	"github.com/mcp-changeset/changeset-go/internal/voice"
	"github.com/mcp-changeset/changeset-go/ledger"
	"github.com/modelcontextprotocol/go-sdk/mcp"
)

// Preview runs the preview of a registered operation for trusted code, as
// the preview_<action> tool does for the agent: it validates input, stores
// the proposal as a pending change and returns its confirmation token.
// input is encoded to JSON and decoded into the operation's input type; a
// "run_id" property joins the change to a run.
func (g *Guard) Preview(ctx context.Context, action string, input any) (*PreviewResult, error) {
	o, ok := g.lookup(action)
	if !ok {
		return nil, refuse(ErrNotFound, "", "unknown operation %s", voice.Quote(action))
	}
	args, err := canonjson.Marshal(input)
	if err != nil {
		return nil, Refuse("the input for %s cannot be encoded as JSON: %v", action, err)
	}
	return g.preview(ctx, nil, o, args)
}

// preview is the one path every preview takes.
func (g *Guard) preview(ctx context.Context, req *mcp.CallToolRequest, o *pipeline.Op, args json.RawMessage) (*PreviewResult, error) {
	ctx, end := g.start(ctx, Event{Step: StepPreview, Action: o.Name})
	res, err := g.previewStep(g.withPrincipal(ctx, req), req, o, args)
	if end != nil {
		out := Outcome{Action: o.Name, Err: err, Failure: failureKind(err)}
		if res != nil {
			out.ChangeID, out.RunID, out.Status = res.ChangeID, res.RunID, string(ledger.Pending)
		}
		end(out)
	}
	return res, err
}

func (g *Guard) previewStep(ctx context.Context, req *mcp.CallToolRequest, o *pipeline.Op, args json.RawMessage) (*PreviewResult, error) {
	scope, err := g.scopeOf(ctx, req)
	if err != nil {
		return nil, err
	}
	args, runID, err := g.splitRunID(args)
	if err != nil {
		return nil, err
	}
	p, err := o.Preview(ctx, args)
	if err != nil {
		return nil, g.previewRefusal(ctx, o.Name, err)
	}
	state, err := g.pipe.Check(ctx, o, p)
	if err != nil {
		return nil, err
	}
	by, err := g.agentBy(ctx, req)
	if err != nil {
		return nil, err
	}
	var sessionKey ledger.Digest
	if runID == "" && !g.opts.NoSessionRuns {
		if sessionKey, err = g.sessionKey(ctx, req); err != nil {
			return nil, err
		}
	}
	stored, err := g.pipe.Store(ctx, pipeline.Pending{Op: o, Proposal: p, StateHash: state, Scope: scope, By: by,
		RunID: runID, SessionKey: sessionKey, Client: clientName(req)})
	if err != nil {
		return nil, err
	}
	c, tok := stored.Change, stored.Token
	res := &PreviewResult{
		Status:            "preview",
		ChangeID:          c.ID,
		Action:            c.Action,
		Summary:           c.Summary,
		Diff:              diffEntries(c.Diff),
		ConfirmationToken: tok,
		ExpiresAt:         voice.Time(c.ExpiresAt),
		WritesEnabled:     g.WritesEnabled(),
		RunID:             c.RunID,
		Warnings:          c.Warnings,
	}
	res.NextStep = g.voice.PreviewNextStep(res.WritesEnabled, g.unknownWriteMode())
	if a := stored.Approval; a != nil { // people approve the apply too; the agent passes the link on
		res.Approval = &ApprovalRef{ID: a.ID, URL: g.approvalLink(a.ID), Needed: a.Needed}
		res.NextStep = g.voice.PersonPreviewNextStep(res.WritesEnabled, g.unknownWriteMode(), a.ID, res.Approval.URL, a.Needed)
	}
	if g.opts.Approval == UserApproval && req != nil {
		// The user approves in the client; the agent gets no token.
		res.ConfirmationToken = ""
	}
	return res, nil
}

// noSuchRun is the refusal for an unknown run (or one of another scope).
func (g *Guard) noSuchRun(id string) error {
	return refuse(ErrNotFound, "", "%s", g.voice.RunNotFound(id))
}

// splitRunID takes the optional "run_id" property out of a preview's
// arguments.
func (g *Guard) splitRunID(args json.RawMessage) (json.RawMessage, string, error) {
	if len(args) == 0 {
		return args, "", nil
	}
	var m map[string]json.RawMessage
	if err := json.Unmarshal(args, &m); err != nil {
		return nil, "", Refuse("%s", voice.ArgsNotObject())
	}
	raw, ok := m["run_id"]
	if !ok {
		return args, "", nil
	}
	delete(m, "run_id")
	var runID string
	if err := json.Unmarshal(raw, &runID); err != nil {
		return nil, "", Refuse("%s", voice.RunIDNotString())
	}
	if runID != "" && !token.ValidID(runID, token.RunIDPrefix) {
		return nil, "", g.noSuchRun(runID)
	}
	rest, err := json.Marshal(m)
	if err != nil {
		return nil, "", err
	}
	return rest, runID, nil
}

// previewRefusal passes a preview's refusal to the agent, and reduces any
// other error to its type name and a reference to the log record that
// holds the full error.
func (g *Guard) previewRefusal(ctx context.Context, action string, err error) error {
	var ce *ChangeError
	if errors.As(err, &ce) {
		return err
	}
	msg := g.logFailure(ctx, "preview failed", err, slog.String("action", action))
	return &ChangeError{Msg: voice.PreviewFailed(action, msg), Err: err}
}
