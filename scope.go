package changeset

import (
	"context"

	"github.com/mcp-changeset/changeset-go/internal/token"
	"github.com/mcp-changeset/changeset-go/internal/voice"
	"github.com/mcp-changeset/changeset-go/ledger"
	"github.com/modelcontextprotocol/go-sdk/mcp"
)

// ScopeFunc returns the scope a request runs under, e.g. the authenticated
// principal from req.Extra.TokenInfo. Changes and runs are bound to the
// scope they were created under: any other scope can neither see nor claim
// them. req is nil when trusted code calls the Guard's methods directly;
// the function should then take the scope from ctx.
type ScopeFunc func(ctx context.Context, req *mcp.CallToolRequest) (string, error)

// scopeOf returns the hashed scope of a call. req is nil for calls from
// trusted code.
func (g *Guard) scopeOf(ctx context.Context, req *mcp.CallToolRequest) (ledger.Digest, error) {
	if g.opts.ScopeFunc == nil {
		return token.ScopeDigest(g.opts.Scope), nil
	}
	s, err := g.opts.ScopeFunc(ctx, req)
	if err != nil {
		return "", &ChangeError{Kind: ErrRefused, Msg: voice.ScopeUnknown(), Err: err}
	}
	return token.ScopeDigest(s), nil
}
