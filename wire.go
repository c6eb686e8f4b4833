package changeset

import (
	"context"
	"encoding/json"
	"errors"
	"strings"

	"github.com/mcp-changeset/changeset-go/internal/canonjson"
	"github.com/mcp-changeset/changeset-go/internal/voice"
	"github.com/modelcontextprotocol/go-sdk/mcp"
)

// What crosses the wire between the SDK and the Guard's tools: arguments
// checked as strict JSON before a handler sees them, results sent exactly
// as encoding/json wrote them, and the Guard's instructions added to the
// server's.

// middleware appends the Guard's Instructions, as they read when the
// client connects, to the server's own instructions in the
// initialize result, and refuses calls of the Guard's tools whose arguments
// are not strictly valid JSON text: the SDK would otherwise replace invalid
// UTF-8 and lone surrogates with U+FFFD before a handler sees them, and a
// payload must never be altered silently. It sends the results of the
// Guard's tools exactly (see exactOutput).
func (g *Guard) middleware(next mcp.MethodHandler) mcp.MethodHandler {
	return func(ctx context.Context, method string, req mcp.Request) (mcp.Result, error) {
		if ctr, ok := req.(*mcp.CallToolRequest); ok && ctr.Params != nil && g.ownsTool(ctr.Params.Name) && len(ctr.Params.Arguments) > 0 {
			if _, err := canonjson.Canonicalize(ctr.Params.Arguments); err != nil {
				res := &mcp.CallToolResult{}
				res.SetError(errors.New(voice.ArgsRefused(ctr.Params.Name, strings.TrimPrefix(err.Error(), "canonjson: "))))
				return res, nil
			}
		}
		var keep *exactOutput
		if ctr, ok := req.(*mcp.CallToolRequest); ok && ctr.Params != nil && g.ownsTool(ctr.Params.Name) {
			keep = &exactOutput{}
			ctx = context.WithValue(ctx, exactOutputKey{}, keep)
		}
		res, err := next(ctx, method, req)
		if err == nil && keep != nil {
			sendExact(res, keep)
		}
		if err == nil {
			switch r := res.(type) {
			case *mcp.InitializeResult: // protocol 2025-11-25 and older
				r.Instructions = withInstructions(r.Instructions, g.Instructions())
			case *mcp.DiscoverResult: // protocol 2026-07-28
				r.Instructions = withInstructions(r.Instructions, g.Instructions())
			}
		}
		return res, err
	}
}

// addTool registers a tool on the server and remembers it as the Guard's.
// The handler's result is also kept, encoded exactly, for the middleware
// to send (see exactOutput).
func addTool[In, Out any](g *Guard, t *mcp.Tool, h mcp.ToolHandlerFor[In, Out]) {
	g.mu.Lock()
	g.tools[t.Name] = true
	g.mu.Unlock()
	mcp.AddTool(g.server, t, func(ctx context.Context, req *mcp.CallToolRequest, in In) (*mcp.CallToolResult, Out, error) {
		res, out, err := h(ctx, req, in)
		if keep, ok := ctx.Value(exactOutputKey{}).(*exactOutput); ok && err == nil && (res == nil || !res.IsError) {
			keep.text, _ = json.Marshal(out) // a failure leaves the SDK's encoding
		}
		return res, out, err
	})
}

// exactOutput carries a tool's result, as encoding/json wrote it, from the
// handler to the middleware. The go-sdk (v1.8.0) checks a typed tool's
// result against its output schema by decoding it into an any and sends
// that value encoded again, so an integer beyond 2^53 in a diff or an
// apply's result would reach the client rounded; the middleware puts the
// exact text back once the SDK has checked it.
type exactOutput struct{ text []byte }

type exactOutputKey struct{}

// sendExact replaces the structured content of res, the result of one of
// the Guard's tools, with the exact text kept, and the text block the SDK
// derived from it.
func sendExact(res mcp.Result, keep *exactOutput) {
	r, ok := res.(*mcp.CallToolResult)
	if !ok || r.IsError || keep.text == nil {
		return
	}
	sent, ok := r.StructuredContent.(json.RawMessage)
	if !ok {
		return
	}
	if len(r.Content) == 1 {
		if tc, ok := r.Content[0].(*mcp.TextContent); ok && tc.Text == string(sent) {
			tc.Text = string(keep.text)
		}
	}
	r.StructuredContent = json.RawMessage(keep.text)
}

// ownsTool reports whether the Guard registered the tool named name.
func (g *Guard) ownsTool(name string) bool {
	g.mu.RLock()
	defer g.mu.RUnlock()
	return g.tools[name]
}

// withInstructions appends the Guard's instructions ours to a server's own.
func withInstructions(own, ours string) string {
	switch {
	case strings.Contains(own, ours):
		return own
	case own == "":
		return ours
	}
	return own + "\n\n" + ours
}
