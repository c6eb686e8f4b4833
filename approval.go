package changeset

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/google/jsonschema-go/jsonschema"
	"github.com/mcp-changeset/changeset-go/internal/pipeline"
	"github.com/mcp-changeset/changeset-go/internal/seal"
	"github.com/mcp-changeset/changeset-go/internal/voice"
	"github.com/mcp-changeset/changeset-go/ledger"
	"github.com/modelcontextprotocol/go-sdk/mcp"
)

// Approval selects who says yes to a write. See docs/approval.md. The
// zero value means "the default": TokenApproval in Options, and the
// server's mode in an Operation.
type Approval int

const (
	// TokenApproval, the default, returns a single-use confirmation token
	// with each preview, and apply_change needs it. The agent holds the
	// token, so nothing proves that a person approved the change: the
	// server's instructions and the client's own confirmation are what
	// keep a person in the loop.
	TokenApproval Approval = iota + 1
	// UserApproval asks the user, through the client, before every
	// apply_change, undo_change and undo_run with dry_run=false: the tool
	// returns an input request (a form with one boolean, "approve") whose
	// message is rendered from the ledger, and writes only if the answer is
	// accept with approve=true. Previews return no token, and tokens are
	// optional arguments that, if given, must be valid: a token is never
	// enough on its own. Clients without form elicitation cannot approve
	// anything; the refusal says so.
	UserApproval
	// PersonApproval needs a named person, not the agent and not the
	// client, to approve every apply, undo and run undo, out of band: in
	// the dashboard, with the CLI, or through [Guard.Approve] from an
	// application's own interface. It works with every client. The agent
	// still needs its tokens, as under TokenApproval: a write needs both
	// the token and the approval. Each preview (and each undo_run dry run)
	// requests an approval in the ledger and returns its link
	// (Options.DashboardURL); apply_change, undo_change and undo_run wait
	// up to Options.ApprovalWait for the decision and are refused, with
	// nothing written and no token spent, while it is still open.
	// Options.Approvers people must approve (two-person rule and more).
	PersonApproval
)

// String returns "token", "user" or "person" ("default" for the zero
// value).
func (a Approval) String() string {
	switch a {
	case 0:
		return "default"
	case TokenApproval:
		return "token"
	case UserApproval:
		return "user"
	case PersonApproval:
		return "person"
	}
	return fmt.Sprintf("Approval(%d)", int(a))
}

// ParseApproval reads "token", "user" or "person", as the examples'
// --approval flag takes them.
func ParseApproval(s string) (Approval, error) {
	for _, a := range []Approval{TokenApproval, UserApproval, PersonApproval} {
		if s == a.String() {
			return a, nil
		}
	}
	return 0, fmt.Errorf("changeset: unknown approval mode %q (token, user or person)", s)
}

// approveKey names both the input request and the form's one property.
const approveKey = "approve"

// The inputs of apply_change and undo_change with user approval: the
// token is optional.
type (
	approvalApplyInput struct {
		ChangeID          string `json:"change_id" jsonschema:"the change_id from the preview"`
		ConfirmationToken string `json:"confirmation_token,omitempty" jsonschema:"not needed: the user approves in their client; if given it must be the change's valid token"`
	}
	approvalUndoInput struct {
		ChangeID  string `json:"change_id" jsonschema:"the change_id of the applied change"`
		UndoToken string `json:"undo_token,omitempty" jsonschema:"not needed: the user approves in their client; if given it must be the change's valid undo token"`
	}
)

// addApprovalChangeTools registers apply_change and undo_change for
// UserApproval, and the middleware that keeps every failure of the
// approval a tool error.
func (g *Guard) addApprovalChangeTools() {
	g.server.AddReceivingMiddleware(g.approvalMiddleware)
	addTool(g, &mcp.Tool{
		Name:         g.toolName("apply_change"),
		Description:  g.voice.ApplyTool(),
		OutputSchema: outputSchema[ApplyResult](),
		Annotations:  &mcp.ToolAnnotations{DestructiveHint: ptr(true), OpenWorldHint: ptr(false)},
	}, func(ctx context.Context, req *mcp.CallToolRequest, in approvalApplyInput) (*mcp.CallToolResult, *ApplyResult, error) {
		if ask, err := g.approveChange(ctx, req, pipeline.ApplyClaim, in.ChangeID, in.ConfirmationToken); ask != nil || err != nil {
			return ask, nil, g.toolError(err)
		}
		res, err := g.apply(ctx, req, in.ChangeID, in.ConfirmationToken, pipeline.ByUser, approvalActor)
		if res != nil {
			res.UndoToken = "" // undo_change asks the user too; the agent holds no token
		}
		return nil, res, g.toolError(err)
	})
	addTool(g, &mcp.Tool{
		Name:         g.toolName("undo_change"),
		Description:  g.voice.UndoTool(),
		OutputSchema: outputSchema[UndoResult](),
		Annotations:  &mcp.ToolAnnotations{DestructiveHint: ptr(true), OpenWorldHint: ptr(false)},
	}, func(ctx context.Context, req *mcp.CallToolRequest, in approvalUndoInput) (*mcp.CallToolResult, *UndoResult, error) {
		if ask, err := g.approveChange(ctx, req, pipeline.UndoClaim, in.ChangeID, in.UndoToken); ask != nil || err != nil {
			return ask, nil, g.toolError(err)
		}
		res, err := g.undo(ctx, req, in.ChangeID, in.UndoToken, pipeline.ByUser, approvalActor)
		return nil, res, g.toolError(err)
	})
}

// approveChange is the approval of one change's apply or undo (k). Without
// an answer in the call it checks, writing nothing, everything the claim
// will check and returns the question. With an answer it verifies the
// sealed state and the answer, and returns (nil, nil) if the user
// approved: the caller then claims the change by the user's approval
// (pipeline.ByUser), which still checks a token if one was given.
func (g *Guard) approveChange(ctx context.Context, req *mcp.CallToolRequest, k pipeline.ClaimKind, id, token string) (*mcp.CallToolResult, error) {
	tool := g.toolName("apply_change")
	if k.From == ledger.Applied {
		tool = g.toolName("undo_change")
	}
	scope, err := g.scopeOf(ctx, req)
	if err != nil {
		return nil, err
	}
	subject := voice.Change(id)
	if answered(req) {
		st, err := g.openState(req, tool, id, k.Purpose, scope, subject, k.Verb)
		if err != nil {
			return nil, err
		}
		c, err := g.get(ctx, id)
		if err != nil {
			return nil, err
		}
		if string(c.PayloadHash) != st.Hash {
			return nil, badState(subject, k.Verb, tool)
		}
		return nil, readAnswer(req, subject, k.Verb, tool)
	}
	c, err := g.pipe.Precheck(ctx, pipeline.Claim{Kind: k, ID: id, Token: token, Auth: pipeline.ByUser, Scope: scope})
	if err != nil {
		return nil, err
	}
	if !canElicitForm(req) {
		return nil, noElicitation(subject, k.Verb)
	}
	end := c.ExpiresAt
	if k.From == ledger.Applied {
		end = c.UndoExpiresAt
	}
	st := seal.State{Tool: tool, ID: id, Purpose: k.Purpose, Hash: string(c.PayloadHash), Scope: string(scope),
		Expires: seal.ExpiresAt(g.now(), end).Unix()}
	return g.ask(changeMessage(k.Purpose, c), st), nil
}

// answered reports whether a call carries an answer (the retry of a
// multi round-trip request), as opposed to asking for a question.
func answered(req *mcp.CallToolRequest) bool {
	return req.Params.InputResponses != nil || req.Params.RequestState != ""
}

// canElicitForm reports whether the client declared form elicitation.
// An elicitation capability without modes means form, as the SDK reads it.
func canElicitForm(req *mcp.CallToolRequest) bool {
	if req == nil || req.Session == nil {
		return false
	}
	p := req.Session.InitializeParams()
	if p == nil || p.Capabilities == nil || p.Capabilities.Elicitation == nil {
		return false
	}
	e := p.Capabilities.Elicitation
	return e.Form != nil || e.URL == nil
}

// ask returns the question: one form input request and the sealed state.
func (g *Guard) ask(message string, st seal.State) *mcp.CallToolResult {
	return &mcp.CallToolResult{
		InputRequests: mcp.InputRequestMap{approveKey: &mcp.ElicitParams{
			Mode:    "form",
			Message: message,
			RequestedSchema: &jsonschema.Schema{
				Type: "object",
				Properties: map[string]*jsonschema.Schema{approveKey: {
					Type:        "boolean",
					Title:       "Approve",
					Description: voice.ApproveField(),
				}},
				Required: []string{approveKey},
			},
		}},
		RequestState: g.sealer.Seal(st),
	}
}

// openState opens and checks the sealed state of an answered call: made
// by this server's key for this tool, ID, purpose and scope, and not
// expired.
func (g *Guard) openState(req *mcp.CallToolRequest, tool, id, purpose string, scope ledger.Digest, subject, verb string) (*seal.State, error) {
	st, err := g.sealer.Open(req.Params.RequestState, tool, id)
	if err != nil || st.Purpose != purpose || st.Scope != string(scope) {
		return nil, badState(subject, verb, tool)
	}
	if exp := time.Unix(st.Expires, 0); !g.now().Before(exp) {
		return nil, refuse(ErrExpired, "", "%s", voice.QuestionExpired(subject, verb, voice.Time(exp), tool))
	}
	return st, nil
}

func badState(subject, verb, tool string) error {
	return refuse(ErrInvalidToken, "", "%s", voice.BadState(subject, verb, tool))
}

// readAnswer returns nil only for accept with approve=true.
func readAnswer(req *mcp.CallToolRequest, subject, verb, tool string) error {
	res, ok := req.Params.InputResponses[approveKey].(*mcp.ElicitResult)
	if !ok || res == nil {
		return refuse(ErrRefused, "", "%s", voice.NoAnswer(subject, verb, tool))
	}
	switch res.Action {
	case "accept":
		if yes, _ := res.Content[approveKey].(bool); yes {
			return nil
		}
		return refuse(ErrRefused, "", "%s", voice.NotApproved(subject, verb, tool))
	case "decline":
		return refuse(ErrRefused, "", "%s", voice.Declined(subject, verb, tool))
	case "cancel":
		return refuse(ErrRefused, "", "%s", voice.Dismissed(subject, verb, tool))
	}
	return refuse(ErrRefused, "", "%s", voice.UnknownAnswer(subject, verb))
}

// noElicitation is the refusal for a client that cannot show the question.
func noElicitation(subject, verb string) error {
	return refuse(ErrRefused, "", "%s", voice.NoElicitation(subject, verb))
}

// approvalMiddleware keeps every failure of an approval a tool error: for
// clients before protocol 2026-07-28, go-sdk asks the user itself
// (elicitation/create) and reports a failure there (no elicitation, a
// failing handler, an answer that does not fit the form) as a JSON-RPC
// error.
func (g *Guard) approvalMiddleware(next mcp.MethodHandler) mcp.MethodHandler {
	return func(ctx context.Context, method string, req mcp.Request) (mcp.Result, error) {
		res, err := next(ctx, method, req)
		ctr, ok := req.(*mcp.CallToolRequest)
		if err == nil || !ok || ctr.Params == nil || !g.asksUser(ctr.Params.Name) || !bridged(ctr) {
			return res, err
		}
		out := &mcp.CallToolResult{}
		out.SetError(errors.New(voice.CouldNotAsk(ctr.Params.Name, err.Error())))
		return out, nil
	}
}

// bridged reports whether go-sdk's server asks the user itself for this
// call: the client speaks a protocol older than 2026-07-28.
func bridged(req *mcp.CallToolRequest) bool {
	if req.Session == nil {
		return false
	}
	p := req.Session.InitializeParams()
	return p != nil && p.ProtocolVersion < "2026-07-28" // as go-sdk decides
}

// asksUser reports whether the tool named name asks the user.
func (g *Guard) asksUser(name string) bool {
	return name == g.toolName("apply_change") || name == g.toolName("undo_change") || name == g.toolName("undo_run")
}
