package serve

import (
	"context"
	"errors"

	"github.com/modelcontextprotocol/go-sdk/auth"
	"github.com/modelcontextprotocol/go-sdk/mcp"
)

// LocalScope is the scope [ScopeFromRequest] gives every change made over
// stdio: the one client is the person who started the server.
const LocalScope = "local"

// tokenInfo is the verified bearer token of a request: from req over HTTP,
// from ctx when trusted code calls the Guard directly (req == nil).
func tokenInfo(ctx context.Context, req *mcp.CallToolRequest) *auth.TokenInfo {
	if req == nil {
		return auth.TokenInfoFromContext(ctx)
	}
	if req.Extra != nil {
		return req.Extra.TokenInfo
	}
	return nil
}

// ScopeFromRequest is a changeset.ScopeFunc that scopes every change to
// the identity behind the request. Over HTTP it returns "user:" followed
// by the identity the caller's bearer token maps to
// (req.Extra.TokenInfo.UserID, as set by the Verifier of [HTTPOptions]), so
// that a change previewed by one identity cannot be applied, undone or even
// seen by another. Over stdio, where there is no token, it returns
// [LocalScope]. The prefix keeps an HTTP identity named "local" apart from
// the stdio scope of a shared ledger. A token without an identity is an
// error: the Guard then refuses the call rather than pool it with others.
//
//	changeset.Options{ScopeFunc: serve.ScopeFromRequest, Principal: serve.PrincipalFromRequest}
func ScopeFromRequest(ctx context.Context, req *mcp.CallToolRequest) (string, error) {
	info := tokenInfo(ctx, req)
	if info == nil {
		return LocalScope, nil
	}
	if info.UserID == "" {
		return "", errors.New("the bearer token has no identity")
	}
	return "user:" + info.UserID, nil
}

// PrincipalFromRequest is a changeset.PrincipalFunc that names the caller
// in the ledger's records (previewed_by, applied_by, undone_by): the
// bearer token's identity over HTTP, else the client's name from its
// initialize request (stdio), else "". Like [ScopeFromRequest], it refuses
// a token without an identity.
func PrincipalFromRequest(ctx context.Context, req *mcp.CallToolRequest) (string, error) {
	if info := tokenInfo(ctx, req); info != nil {
		if info.UserID == "" {
			return "", errors.New("the bearer token has no identity")
		}
		return info.UserID, nil
	}
	if req != nil && req.Session != nil {
		if p := req.Session.InitializeParams(); p != nil && p.ClientInfo != nil {
			return p.ClientInfo.Name, nil
		}
	}
	return "", nil
}
