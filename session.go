package changeset

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"sync"
	"time"

	"github.com/mcp-changeset/changeset-go/internal/token"
	"github.com/mcp-changeset/changeset-go/ledger"
	"github.com/modelcontextprotocol/go-sdk/mcp"
)

// Session runs: a preview that names no run joins the run of its caller's
// session, so that everything an agent did can be reviewed and undone as
// one unit even when it never called start_run. A session is an MCP
// session (its ID over stateful Streamable HTTP; the connection itself
// over stdio or in memory), or, where requests carry no session (stateless
// HTTP), the caller's principal. After Options.SessionRunIdle without a
// preview the session gets a new run, so that a long-lived connection's
// work is split into reviewable pieces. The Guard names the session
// (sessionKey); the pipeline joins or starts its run as it stores the
// preview (pipeline.Engine.Store).

// DefaultSessionRunIdle is the default of Options.SessionRunIdle.
const DefaultSessionRunIdle = 30 * time.Minute

// connections gives each MCP session without an ID of its own (stdio, in
// memory, stateless HTTP) a random one for as long as it lives.
type connections struct {
	mu  sync.Mutex
	ids map[*mcp.ServerSession]string
}

func (cs *connections) id(ss *mcp.ServerSession) string {
	cs.mu.Lock()
	defer cs.mu.Unlock()
	if id, ok := cs.ids[ss]; ok {
		return id
	}
	if cs.ids == nil {
		cs.ids = map[*mcp.ServerSession]string{}
	}
	id := token.NewID("conn_")
	cs.ids[ss] = id
	go func() { // forget the session when it ends
		_ = ss.Wait()
		cs.mu.Lock()
		delete(cs.ids, ss)
		cs.mu.Unlock()
	}()
	return id
}

// sessionKey identifies the session of req, hashed for the ledger, or ""
// when the request has none (trusted code).
func (g *Guard) sessionKey(ctx context.Context, req *mcp.CallToolRequest) (ledger.Digest, error) {
	if req == nil || req.Session == nil {
		return "", nil
	}
	var key string
	switch {
	case req.Session.ID() != "":
		key = "session:" + req.Session.ID()
	case g.statelessHint(req):
		p, err := g.principalOf(ctx, req)
		if err != nil {
			return "", err
		}
		key = "principal:" + p
	default:
		key = "connection:" + g.conns.id(req.Session)
	}
	sum := sha256.Sum256([]byte("changeset session run\x00" + key))
	return ledger.Digest(hex.EncodeToString(sum[:])), nil
}

// statelessHint reports whether req likely comes from a session that lives
// for one request only (stateless Streamable HTTP): the session has no ID
// and the request carries HTTP details. Such requests are keyed by
// principal instead.
func (g *Guard) statelessHint(req *mcp.CallToolRequest) bool {
	return req.Extra != nil && (req.Extra.Header != nil || req.Extra.TokenInfo != nil)
}
