package changeset

import (
	"context"
	"encoding/json"
	"errors"
	"log/slog"
	"time"

	"github.com/mcp-changeset/changeset-go/internal/canonjson"
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
func (g *Guard) preview(ctx context.Context, req *mcp.CallToolRequest, o *op, args json.RawMessage) (*PreviewResult, error) {
	ctx, end := g.start(ctx, Event{Step: StepPreview, Action: o.name})
	res, err := g.previewStep(g.withPrincipal(ctx, req), req, o, args)
	if end != nil {
		out := Outcome{Action: o.name, Err: err, Failure: failureKind(err)}
		if res != nil {
			out.ChangeID, out.RunID, out.Status = res.ChangeID, res.RunID, string(ledger.Pending)
		}
		end(out)
	}
	return res, err
}

func (g *Guard) previewStep(ctx context.Context, req *mcp.CallToolRequest, o *op, args json.RawMessage) (*PreviewResult, error) {
	scope, err := g.scopeOf(ctx, req)
	if err != nil {
		return nil, err
	}
	args, runID, err := g.splitRunID(args)
	if err != nil {
		return nil, err
	}
	p, err := o.preview(ctx, args)
	if err != nil {
		return nil, g.previewRefusal(ctx, o.name, err)
	}
	if string(p.diff) == "[]" && !o.allowEmptyDiff {
		return nil, refuse(ErrNoChange, "", "%s", voice.EmptyDiff(o.name))
	}
	if size := len(p.payload) + len(p.diff) + len(p.summary); size > g.opts.MaxPayloadBytes {
		return nil, refuse(ErrQuota, "", "%s", voice.ProposalTooLarge(o.name, size, g.opts.MaxPayloadBytes))
	}
	var stateHash ledger.Digest
	switch {
	case p.state != nil && o.hasObserve(): // the state the preview itself read
		stateHash = hashOf(p.state)
	case o.observe != nil: // outside the write lock: it may be slow I/O
		state, err := g.observe(ctx, o, p.payload)
		if err == nil {
			err = checkStates(p.resources, state)
		}
		if err != nil {
			return nil, g.previewRefusal(ctx, o.name, err)
		}
		stateHash = hashOf(state)
	}

	by, err := g.agentBy(ctx, req)
	if err != nil {
		return nil, err
	}
	now := g.now()
	c := &ledger.Change{
		ID:            newID(changeIDPrefix),
		Action:        o.name,
		PreviewedBy:   by,
		Status:        ledger.Pending,
		ScopeHash:     scope,
		RunID:         runID,
		Resource:      p.resource,
		Resources:     p.resources,
		DependsOn:     p.depends,
		Payload:       p.payload,
		PayloadHash:   hashOf(p.payload),
		Diff:          p.diff,
		Summary:       p.summary,
		Warnings:      p.warnings,
		StateHash:     stateHash,
		Undoable:      o.hasUndo(),
		Transactional: o.tx != nil,
		RedactFields:  o.redact,
		CreatedAt:     now,
		UpdatedAt:     now,
		ExpiresAt:     now.Add(g.opts.TTL),
	}
	token := newToken(confirmPrefix)
	if g.opts.Approval == UserApproval { // the user approves in the client; see byUser
		token = g.sealer.tokenFor(confirmPrefix, purposeApply, c.ID, c.PayloadHash)
	}
	c.ConfirmHash = tokenDigest(purposeApply, c.ID, c.PayloadHash, token)
	var sessionKey ledger.Digest
	if runID == "" && !g.opts.NoSessionRuns {
		if sessionKey, err = g.sessionKey(ctx, req); err != nil {
			return nil, err
		}
	}

	var sessionRun string // the session run the preview joined, if any
	// A preview claims nothing: it may ride on the next claim's sync.
	err = g.ledger.WithLazyTx(ctx, func(tx *ledger.Tx) error {
		// WithLazyTx may run this again.
		sessionRun = ""
		if o.tx != nil && o.tx.observe != nil && p.state == nil { // in the same transaction as the row
			state, err := g.observeTx(ctx, tx, o, c.Payload)
			if err == nil {
				err = checkStates(c.Resources, state)
			}
			if err != nil {
				return g.previewRefusal(ctx, o.name, err)
			}
			c.StateHash = hashOf(state)
		}
		if err := g.checkPendingQuota(tx, scope, now); err != nil {
			return err
		}
		switch {
		case runID != "":
			if err := g.checkRunOpen(tx, runID, scope); err != nil {
				return err
			}
		case sessionKey != "":
			id, err := g.sessionRun(tx, req, sessionKey, scope, now, c.PreviewedBy)
			if err != nil {
				return err
			}
			c.RunID, sessionRun = id, id
		}
		return tx.InsertChange(c)
	})
	if err != nil {
		return nil, err
	}
	if sessionRun != "" {
		g.recent.saw(sessionRun, c.CreatedAt)
	}
	g.logTransition(ctx, c, "", c.PreviewedBy)

	res := &PreviewResult{
		Status:            "preview",
		ChangeID:          c.ID,
		Action:            c.Action,
		Summary:           c.Summary,
		Diff:              diffViews(c.Diff),
		ConfirmationToken: token,
		ExpiresAt:         formatTime(c.ExpiresAt),
		WritesEnabled:     g.WritesEnabled(),
		RunID:             c.RunID,
		Warnings:          c.Warnings,
	}
	res.NextStep = g.voice.PreviewNextStep(res.WritesEnabled, g.unknownWriteMode())
	if g.opts.Approval == UserApproval && req != nil {
		// The user approves in the client; the agent gets no token.
		res.ConfirmationToken = ""
	}
	return res, nil
}

// checkPendingQuota refuses a preview when the scope already has
// MaxPendingPerScope previews waiting that have not expired: previews an
// agent walked away from stop counting once they expire.
func (g *Guard) checkPendingQuota(tx *ledger.Tx, scope ledger.Digest, now time.Time) error {
	n, err := tx.CountChanges(ledger.ChangeFilter{ScopeHash: scope, Statuses: []ledger.Status{ledger.Pending}, ExpiresAfter: now})
	if err != nil {
		return err
	}
	if n >= g.opts.MaxPendingPerScope {
		return refuse(ErrQuota, "", "%s", voice.PendingQuota(n))
	}
	return nil
}

// checkRunOpen refuses to join a change to a run that is unknown, in
// another scope, or being or already undone.
func (g *Guard) checkRunOpen(tx *ledger.Tx, runID string, scope ledger.Digest) error {
	r, err := tx.Run(runID)
	if errors.Is(err, ledger.ErrNotFound) || (err == nil && r.ScopeHash != scope) {
		return g.noSuchRun(runID)
	}
	if err != nil {
		return err
	}
	if r.Status != ledger.RunOpen {
		return refuse(ErrRunClosed, "", "%s", g.voice.RunClosed(runID, string(r.Status)))
	}
	return nil
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
	if runID != "" && !validID(runID, runIDPrefix) {
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

// logFailure logs err in full at Error level under a short random
// reference, and returns what the agent is told instead: the error's type
// name and the reference, e.g. "fs.PathError (reference ref_1a2b3c4d; the
// server's log has the details)". An operator finds the record by the
// reference the user quotes.
func (g *Guard) logFailure(ctx context.Context, msg string, err error, attrs ...slog.Attr) string {
	ref := newID(refPrefix)[:len(refPrefix)+8]
	attrs = append(attrs, slog.String("reference", ref), slog.String("error_type", typeName(err)), slog.String("err", err.Error()))
	g.log.LogAttrs(ctx, slog.LevelError, msg, attrs...)
	if text := agentText(err); text != typeName(err) { // a failure named by its kind
		return voice.Reference(text, "", ref)
	}
	return voice.Reference("", typeName(err), ref)
}

// refPrefix starts the reference of a logged failure.
const refPrefix = "ref_"
