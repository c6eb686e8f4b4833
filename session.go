package changeset

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"strings"
	"sync"
	"time"

	"github.com/mcp-changeset/changeset-go/internal/token"
	"github.com/mcp-changeset/changeset-go/internal/voice"
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
// work is split into reviewable pieces.

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

// sessionRun returns the open session run of req that a preview at now
// joins, starting one when there is none or the last one sat idle for
// SessionRunIdle. It runs in the preview's transaction; by names the
// previewer, who starts a new run.
func (g *Guard) sessionRun(tx *ledger.Tx, req *mcp.CallToolRequest, key, scope ledger.Digest, now time.Time, by string) (string, error) {
	runs, err := tx.Runs(ledger.RunFilter{ScopeHash: scope, Kind: ledger.RunSession, SessionKey: key, Statuses: []ledger.RunStatus{ledger.RunOpen}, Limit: 1})
	if err != nil {
		return "", err
	}
	if len(runs) == 1 {
		last := runs[0].CreatedAt
		if seen, ok := g.recent.get(runs[0].ID); ok && seen.After(last) {
			last = seen
		}
		if now.Sub(last) < g.opts.SessionRunIdle {
			// A preview this process stored in the run is recent enough:
			// the newest change, wherever it came from, can only be
			// newer, so it need not be read.
			return runs[0].ID, nil
		}
		newest, err := tx.Changes(ledger.ChangeFilter{RunID: runs[0].ID, Limit: 1})
		if err != nil {
			return "", err
		}
		if len(newest) == 1 && newest[0].CreatedAt.After(last) {
			last = newest[0].CreatedAt
		}
		if now.Sub(last) < g.opts.SessionRunIdle {
			return runs[0].ID, nil
		}
	}
	label := voice.SessionLabel(clientName(req), formatTime(now))
	if len(label) > maxLabelBytes {
		label = strings.ToValidUTF8(label[:maxLabelBytes], "")
	}
	r := &ledger.Run{ID: token.NewID(token.RunIDPrefix), Label: label, ScopeHash: scope, Status: ledger.RunOpen,
		Kind: ledger.RunSession, SessionKey: key, CreatedAt: now, UpdatedAt: now}
	if err := tx.InsertRunBy(r, by); err != nil {
		return "", err
	}
	g.log.Info("session run started", "run_id", r.ID)
	return r.ID, nil
}

// maxRecentRuns bounds recentRuns: beyond it the memory is dropped and
// rebuilt from the ledger as previews come.
const maxRecentRuns = 4096

// recentRuns remembers, per session run, when this process last stored a
// preview in it, so that a preview joining a busy session run need not
// read the run's newest change to see that the run is not idle. It only
// ever shortens that check: a run it does not know, or knows as idle, is
// checked against the ledger, where another process's newer preview shows.
type recentRuns struct {
	mu   sync.Mutex
	last map[string]time.Time
}

func (r *recentRuns) get(runID string) (time.Time, bool) {
	r.mu.Lock()
	defer r.mu.Unlock()
	t, ok := r.last[runID]
	return t, ok
}

// saw records a preview at t in run runID, once it is committed.
func (r *recentRuns) saw(runID string, t time.Time) {
	r.mu.Lock()
	defer r.mu.Unlock()
	if r.last == nil || len(r.last) >= maxRecentRuns {
		r.last = make(map[string]time.Time)
	}
	if t.After(r.last[runID]) {
		r.last[runID] = t
	}
}
