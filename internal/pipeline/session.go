package pipeline

import (
	"strings"
	"sync"
	"time"

	"github.com/mcp-changeset/changeset-go/internal/token"
	"github.com/mcp-changeset/changeset-go/internal/voice"
	"github.com/mcp-changeset/changeset-go/ledger"
)

// MaxLabelBytes caps a run's label.
const MaxLabelBytes = 200

// sessionRun returns the open session run of p's session (p.SessionKey)
// that a preview at now joins, starting one when there is none or the
// last one sat idle for SessionRunIdle. It runs in the preview's
// transaction; the previewer (p.By) starts a new run.
func (e *Engine) sessionRun(tx *ledger.Tx, p Pending, now time.Time) (string, error) {
	key, scope := p.SessionKey, p.Scope
	runs, err := tx.Runs(ledger.RunFilter{ScopeHash: scope, Kind: ledger.RunSession, SessionKey: key, Statuses: []ledger.RunStatus{ledger.RunOpen}, Limit: 1})
	if err != nil {
		return "", err
	}
	if len(runs) == 1 {
		last := runs[0].CreatedAt
		if seen, ok := e.recent.get(runs[0].ID); ok && seen.After(last) {
			last = seen
		}
		if now.Sub(last) < e.SessionRunIdle {
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
		if now.Sub(last) < e.SessionRunIdle {
			return runs[0].ID, nil
		}
	}
	label := voice.SessionLabel(p.Client, voice.Time(now))
	if len(label) > MaxLabelBytes {
		label = strings.ToValidUTF8(label[:MaxLabelBytes], "")
	}
	r := &ledger.Run{ID: token.NewID(token.RunIDPrefix), Label: label, ScopeHash: scope, Status: ledger.RunOpen,
		Kind: ledger.RunSession, SessionKey: key, CreatedAt: now, UpdatedAt: now}
	if err := tx.InsertRunBy(r, p.By); err != nil {
		return "", err
	}
	e.Log.Info("session run started", "run_id", r.ID)
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
