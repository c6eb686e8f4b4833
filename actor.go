package changeset

import (
	"context"
	"log/slog"
	"strings"

	"github.com/mcp-changeset/changeset-go/internal/voice"
	"github.com/modelcontextprotocol/go-sdk/mcp"
)

// Actors: every step the ledger records names who took it (a change's
// PreviewedBy, AppliedBy, UndoneBy, a run's UndoneBy): the agent, named by
// the principal behind it when one is known ("agent:<principal>"), the
// agent with the user's approval, or a person acting through trusted code
// ("person:<name>").

// agentActor is how the ledger names the agent as the one who took a step,
// when no principal is known; agentBy names the agent of a request.
const agentActor = "agent"

// approvalActor is recorded in the ledger as who applied or undid a change
// that the user approved through the client.
const approvalActor = "agent (approved by the user)"

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
	return agentActor + ":" + strings.ToValidUTF8(voice.Cut(p, 200), ""), nil
}

// Person names a person acting through trusted code (a dashboard, a
// support tool), as recorded in the ledger: "person:<name>".
func Person(name string) string { return "person:" + name }

// PrincipalFunc names the caller of a request for the ledger's records
// (e.g. the user behind an agent) and keys its session run where requests
// carry no session. req is nil for calls from trusted code.
type PrincipalFunc func(ctx context.Context, req *mcp.CallToolRequest) (string, error)

// principalOf names the caller of req: Options.Principal, else the bearer
// token's user, else the client's name from the initialize request, else
// "".
func (g *Guard) principalOf(ctx context.Context, req *mcp.CallToolRequest) (string, error) {
	if g.opts.Principal != nil {
		p, err := g.opts.Principal(ctx, req)
		if err != nil {
			return "", &ChangeError{Kind: ErrRefused, Msg: voice.CallerUnknown(), Err: err}
		}
		return p, nil
	}
	if req == nil {
		return "", nil
	}
	if req.Extra != nil && req.Extra.TokenInfo != nil && req.Extra.TokenInfo.UserID != "" {
		return req.Extra.TokenInfo.UserID, nil
	}
	return clientName(req), nil
}

// clientName is the client's name from its initialize request, or "".
func clientName(req *mcp.CallToolRequest) string {
	if req == nil || req.Session == nil {
		return ""
	}
	if p := req.Session.InitializeParams(); p != nil && p.ClientInfo != nil {
		return p.ClientInfo.Name
	}
	return ""
}

// principalKey keys the principal of a request in its context, for the
// log records of the steps it takes.
type principalKey struct{}

// withPrincipal puts the principal of req in ctx for logTransition, only
// when the Guard's logger records transitions: a principal that cannot be
// determined is left out.
func (g *Guard) withPrincipal(ctx context.Context, req *mcp.CallToolRequest) context.Context {
	if req == nil || !g.log.Enabled(ctx, slog.LevelInfo) {
		return ctx
	}
	p, err := g.principalOf(ctx, req)
	if err != nil || p == "" {
		return ctx
	}
	return context.WithValue(ctx, principalKey{}, p)
}

// principalIn returns the principal a step is taken for: the one in by
// ("agent:<principal>"), else the one withPrincipal put in ctx.
func principalIn(ctx context.Context, by string) string {
	if p, ok := strings.CutPrefix(by, agentActor+":"); ok {
		return p
	}
	p, _ := ctx.Value(principalKey{}).(string)
	return p
}
