package changeset

import (
	"context"
	"errors"
	"unicode/utf8"

	"github.com/mcp-changeset/changeset-go/internal/pipeline"
	"github.com/mcp-changeset/changeset-go/internal/token"
	"github.com/mcp-changeset/changeset-go/internal/voice"
	"github.com/mcp-changeset/changeset-go/ledger"
	"github.com/modelcontextprotocol/go-sdk/mcp"
)

// A run groups the changes of one agent task, so that people can review
// everything the agent did as one unit and take it back in one step. The
// agent starts a run with start_run and passes its ID on every preview; a
// preview without one joins the caller's session run (see session.go).

// RunInfo is a run as the agent and trusted code see it: no tokens, no
// digests.
type RunInfo struct {
	RunID  string `json:"run_id" jsonschema:"the run"`
	Label  string `json:"label" jsonschema:"what the task is"`
	Status string `json:"status" jsonschema:"open, undoing, undone or partially_undone"`
	// Kind is "task" for a run started with start_run, "session" for the
	// run the Guard keeps for a caller's session.
	Kind      string `json:"kind" jsonschema:"task or session"`
	CreatedAt string `json:"created_at" jsonschema:"when started"`
	UpdatedAt string `json:"updated_at" jsonschema:"last update"`
}

// RunDetail is a run with one page of its changes, newest first, and the
// stored report of its undo once there is one.
type RunDetail struct {
	RunInfo
	Changes []ChangeStatus `json:"changes" jsonschema:"newest first; each a change status"`
	// NextCursor, when set, reads the next page of changes (RunPage.Cursor).
	NextCursor string     `json:"next_cursor,omitempty" jsonschema:"for the next page"`
	Report     *RunReport `json:"report,omitempty" jsonschema:"its undo report"`
}

// RunPage selects a page of a run's changes.
type RunPage struct {
	// Limit caps the page (default DefaultRunPageLimit, at most
	// MaxRunPageLimit). A page also ends early once its changes hold
	// MaxRunPageBytes of JSON, so that no answer grows without bound.
	Limit int
	// Cursor is the NextCursor of the previous page; empty for the first.
	Cursor string
}

// Bounds of a page of a run's changes.
const (
	DefaultRunPageLimit = 100
	MaxRunPageLimit     = 500
	MaxRunPageBytes     = 4 << 20
)

// StartRun opens a run for trusted code, as start_run does for the agent.
// The run belongs to the scope of ctx (see ScopeFunc).
func (g *Guard) StartRun(ctx context.Context, label string) (*RunInfo, error) {
	return g.startRun(ctx, nil, label)
}

func (g *Guard) startRun(ctx context.Context, req *mcp.CallToolRequest, label string) (*RunInfo, error) {
	if !utf8.ValidString(label) || len(label) > pipeline.MaxLabelBytes {
		return nil, Refuse("%s", g.voice.RunLabelInvalid(pipeline.MaxLabelBytes))
	}
	scope, err := g.scopeOf(ctx, req)
	if err != nil {
		return nil, err
	}
	now := g.now()
	r := &ledger.Run{ID: token.NewID(token.RunIDPrefix), Label: label, ScopeHash: scope, Status: ledger.RunOpen, Kind: ledger.RunTask, CreatedAt: now, UpdatedAt: now}
	by := "" // trusted code starting a run is nobody the ledger can name
	if req != nil {
		if by, err = g.agentBy(ctx, req); err != nil {
			return nil, err
		}
	}
	if err := g.ledger.WithLazyTx(ctx, func(tx *ledger.Tx) error { return tx.InsertRunBy(r, by) }); err != nil {
		return nil, err
	}
	g.log.Info("run started", "run_id", r.ID)
	return runInfo(r), nil
}

// Run returns a run and a page of its changes, newest first, as get_run
// does. A run of another scope is reported as not found.
func (g *Guard) Run(ctx context.Context, runID string, page RunPage) (*RunDetail, error) {
	return g.runDetail(ctx, nil, runID, page)
}

func (g *Guard) runDetail(ctx context.Context, req *mcp.CallToolRequest, runID string, page RunPage) (*RunDetail, error) {
	switch {
	case page.Limit < 0 || page.Limit > MaxRunPageLimit:
		return nil, Refuse("%s", g.voice.PageLimitInvalid(MaxRunPageLimit))
	case page.Limit == 0:
		page.Limit = DefaultRunPageLimit
	}
	r, err := g.scopedRun(ctx, req, runID)
	if err != nil {
		return nil, err
	}
	f := ledger.ChangeFilter{RunID: r.ID, Limit: page.Limit + 1}
	if page.Cursor != "" {
		after, err := g.ledger.Change(ctx, page.Cursor)
		if !token.ValidID(page.Cursor, token.ChangeIDPrefix) || err != nil || after.RunID != r.ID {
			return nil, Refuse("%s", g.voice.RunCursorInvalid(voice.Cut(page.Cursor, 32), r.ID))
		}
		f.Before = &ledger.ChangeKey{CreatedAt: after.CreatedAt, ID: after.ID}
	}
	changes, err := g.ledger.Changes(ctx, f)
	if err != nil {
		return nil, err
	}
	d := &RunDetail{RunInfo: *runInfo(r), Changes: []ChangeStatus{}}
	size := 0
	for i, c := range changes {
		if i == page.Limit || (i > 0 && size >= MaxRunPageBytes) {
			d.NextCursor = changes[i-1].ID
			break
		}
		st := g.statusOf(c)
		size += approxSize(st)
		d.Changes = append(d.Changes, *st)
	}
	if r.Report != nil {
		d.Report, err = decodeReport(r.Report) // shown as stored: get_run reads it, nothing replays it
		if err != nil {
			return nil, err
		}
	}
	return d, nil
}

// Runs lists the runs of the caller's scope, newest first, as list_runs
// does. status filters by run status when not empty; limit caps the list
// (default 20, at most 100).
func (g *Guard) Runs(ctx context.Context, status string, limit int) ([]RunInfo, error) {
	return g.listRuns(ctx, nil, status, limit)
}

func (g *Guard) listRuns(ctx context.Context, req *mcp.CallToolRequest, status string, limit int) ([]RunInfo, error) {
	scope, err := g.scopeOf(ctx, req)
	if err != nil {
		return nil, err
	}
	f := ledger.RunFilter{ScopeHash: scope, Limit: 20}
	switch {
	case limit < 0 || limit > 100:
		return nil, Refuse("%s", g.voice.PageLimitInvalid(100))
	case limit > 0:
		f.Limit = limit
	}
	if status != "" {
		s := ledger.RunStatus(status)
		if !s.Valid() {
			return nil, Refuse("%s", g.voice.RunStatusUnknown(status))
		}
		f.Statuses = []ledger.RunStatus{s}
	}
	runs, err := g.ledger.Runs(ctx, f)
	if err != nil {
		return nil, err
	}
	out := []RunInfo{}
	for _, r := range runs {
		out = append(out, *runInfo(r))
	}
	return out, nil
}

// scopedRun reads a run of the caller's scope.
func (g *Guard) scopedRun(ctx context.Context, req *mcp.CallToolRequest, runID string) (*ledger.Run, error) {
	scope, err := g.scopeOf(ctx, req)
	if err != nil {
		return nil, err
	}
	r, err := g.getRun(ctx, runID)
	if err != nil {
		return nil, err
	}
	if r.ScopeHash != scope {
		return nil, g.noSuchRun(runID)
	}
	return r, nil
}

// getRun reads a run whatever its scope.
func (g *Guard) getRun(ctx context.Context, runID string) (*ledger.Run, error) {
	if !token.ValidID(runID, token.RunIDPrefix) {
		return nil, g.noSuchRun(runID)
	}
	r, err := g.ledger.Run(ctx, runID)
	if errors.Is(err, ledger.ErrNotFound) {
		return nil, g.noSuchRun(runID)
	}
	return r, err
}

// approxSize is about the size of a change's JSON in an answer.
func approxSize(st *ChangeStatus) int {
	n := 512 + len(st.Summary) + len(st.Resource)
	for _, d := range st.Diff {
		n += len(d.Field) + rawLen(d.Before) + rawLen(d.After) + 32
	}
	for _, w := range st.Warnings {
		n += len(w) + 4
	}
	return n
}

func runInfo(r *ledger.Run) *RunInfo {
	kind := r.Kind
	if kind == "" {
		kind = ledger.RunTask
	}
	return &RunInfo{RunID: r.ID, Label: r.Label, Status: string(r.Status), Kind: string(kind),
		CreatedAt: voice.Time(r.CreatedAt), UpdatedAt: voice.Time(r.UpdatedAt)}
}
