package changeset

import (
	"context"
	"sync"
	"time"

	"github.com/mcp-changeset/changeset-go/internal/pipeline"
	"github.com/mcp-changeset/changeset-go/internal/token"
	"github.com/mcp-changeset/changeset-go/internal/undoplan"
	"github.com/mcp-changeset/changeset-go/internal/voice"
	"github.com/mcp-changeset/changeset-go/ledger"
	"github.com/modelcontextprotocol/go-sdk/mcp"
)

// Person approval, the agent's side: before apply_change, undo_change or
// undo_run(dry_run=false) claims a write that people must approve, it
// finds the write's approval (or requests one, for an undo), waits up to
// Options.ApprovalWait for the decision while telling the client how it
// stands, and then either hands the approval to the claim, which uses it
// in its own transaction, or refuses: still waiting (nothing written, no
// token spent, call again later), declined (who, and their note), expired.

// The polls of a wait: the first after pollFirst, each later one twice as
// late, up to pollMax.
const (
	pollFirst = 250 * time.Millisecond
	pollMax   = time.Second
)

// gate is one write that people may have to approve.
type gate struct {
	kind     ledger.ApprovalKind
	changeID string // an apply's or undo's change
	runID    string // a run undo's run
	// hash is what the approval must be bound to now: the change's
	// payload hash, the run's plan hash.
	hash   ledger.Digest
	needed int
	// deadline is that of an approval requested now: the token's expiry.
	deadline time.Time
	// subject, verb and tool word the refusals; id is the change's ID for
	// a ChangeError, "" for a run.
	subject, id, verb, tool string
}

// awaitPeople finds gt's approval, requesting one when none is live, and
// waits up to Options.ApprovalWait for its decision. It returns the
// approval's ID once approved, and otherwise the refusal the agent reads.
func (g *Guard) awaitPeople(ctx context.Context, req *mcp.CallToolRequest, gt gate, by string) (string, error) {
	a, err := g.pipe.ApprovalFor(ctx, gt.kind, gt.changeID, gt.runID, gt.hash)
	if err != nil {
		return "", err
	}
	now := g.now()
	var s ledger.ApprovalStatus
	if a != nil {
		s = a.StatusAt(now)
	}
	live := s == ledger.ApprovalWaiting || s == ledger.ApprovalApproved
	switch {
	case live && a.BoundHash != gt.hash:
		return "", g.pipe.ApprovalRefusal(gt.subject, gt.id, gt.verb, gt.tool, a, ledger.ErrApprovalMismatch)
	case s == ledger.ApprovalDeclined && a.BoundHash == gt.hash:
		return "", g.pipe.ApprovalRefusal(gt.subject, gt.id, gt.verb, gt.tool, a, nil)
	case !live:
		a, err = g.ledger.RequestApproval(ctx, ledger.ApprovalRequest{Kind: gt.kind, ChangeID: gt.changeID, RunID: gt.runID,
			Needed: gt.needed, RequestedBy: by, Deadline: gt.deadline, At: now})
		if err != nil {
			if pipeline.IsApprovalRefusal(err) {
				return "", g.pipe.ApprovalRefusal(gt.subject, gt.id, gt.verb, gt.tool, nil, err)
			}
			return "", err
		}
	}
	if a, err = g.waitDecision(ctx, req, a, gt.subject); err != nil {
		return "", err
	}
	if a.StatusAt(g.now()) == ledger.ApprovalApproved {
		return a.ID, nil
	}
	return "", g.pipe.ApprovalRefusal(gt.subject, gt.id, gt.verb, gt.tool, a, nil)
}

// waitDecision polls the ledger for a's decision until people decide, its
// deadline passes, Options.ApprovalWait runs out or ctx ends, and returns
// the approval as it last read it. While it waits it sends progress
// notifications, when the request asked for them, and asks a client that
// declares URL-mode elicitation to open the approval's page.
func (g *Guard) waitDecision(ctx context.Context, req *mcp.CallToolRequest, a *ledger.Approval, subject string) (*ledger.Approval, error) {
	if a.StatusAt(g.now()) != ledger.ApprovalWaiting || g.opts.ApprovalWait <= 0 {
		return a, nil
	}
	link := g.approvalLink(a.ID)
	stop := g.askToOpen(ctx, req, a.ID, link, subject)
	defer stop()
	start := time.Now()
	delay := pollFirst
	for {
		g.progress(ctx, req, a, link, time.Since(start))
		left := g.opts.ApprovalWait - time.Since(start)
		if left <= 0 {
			return a, nil
		}
		t := time.NewTimer(min(delay, left))
		select {
		case <-ctx.Done():
			t.Stop()
			return a, nil // the caller went away: the approval still waits
		case <-t.C:
		}
		cur, err := g.ledger.Approval(ctx, a.ID)
		if err != nil {
			if ctx.Err() != nil {
				return a, nil
			}
			return nil, err
		}
		a = cur
		if a.StatusAt(g.now()) != ledger.ApprovalWaiting {
			return a, nil
		}
		delay = min(2*delay, pollMax)
	}
}

// progress sends a progress notification about a, waiting for elapsed,
// when req carries a progress token. A notification that cannot be sent
// changes nothing.
func (g *Guard) progress(ctx context.Context, req *mcp.CallToolRequest, a *ledger.Approval, link string, elapsed time.Duration) {
	if req == nil || req.Session == nil || req.Params == nil {
		return
	}
	tok := req.Params.GetProgressToken()
	if tok == nil {
		return
	}
	_ = req.Session.NotifyProgress(ctx, &mcp.ProgressNotificationParams{
		ProgressToken: tok,
		Progress:      elapsed.Seconds(),
		Total:         g.opts.ApprovalWait.Seconds(),
		Message:       voice.ApprovalProgress(a.ID, link, a.Approvals, a.Needed),
	})
}

// askToOpen asks a client that declares URL-mode elicitation to open the
// approval's page, in the background, and returns the function that
// withdraws the question and waits for it. The answer does not matter:
// the decision is made on the page. go-sdk sends the question only on
// sessions before protocol 2026-07-28, where a server may ask during a
// call; on later sessions (which would need the call to end with an input
// request instead of waiting) and without a link, it asks nothing.
func (g *Guard) askToOpen(ctx context.Context, req *mcp.CallToolRequest, id, link, subject string) func() {
	if link == "" || !canElicitURL(req) || !bridged(req) {
		return func() {}
	}
	ctx, cancel := context.WithCancel(ctx)
	var wg sync.WaitGroup
	wg.Add(1)
	go func() {
		defer wg.Done()
		_, err := req.Session.Elicit(ctx, &mcp.ElicitParams{Mode: "url", Message: voice.OpenLink(subject), URL: link, ElicitationID: id})
		if err != nil && ctx.Err() == nil {
			g.log.Debug("the client did not open the approval's page", "approval_id", id, "err", err)
		}
	}()
	return func() { cancel(); wg.Wait() }
}

// canElicitURL reports whether the client declared URL-mode elicitation.
func canElicitURL(req *mcp.CallToolRequest) bool {
	if req == nil || req.Session == nil {
		return false
	}
	p := req.Session.InitializeParams()
	return p != nil && p.Capabilities != nil && p.Capabilities.Elicitation != nil && p.Capabilities.Elicitation.URL != nil
}

// changeApproval is what the agent's claim cl of a change needs from
// people: "" when its operation needs nobody, else the ID of the approval
// people gave, after waiting for it. The claim's own checks come first
// (writing nothing), so that nobody waits for a write that would be
// refused anyway.
func (g *Guard) changeApproval(ctx context.Context, req *mcp.CallToolRequest, cl pipeline.Claim) (string, error) {
	c, err := g.get(ctx, cl.ID)
	if err != nil || c.ScopeHash != cl.Scope {
		return "", nil // the claim refuses it
	}
	o, ok := g.lookup(c.Action)
	if !ok || o.Approvers == 0 {
		return "", nil
	}
	kind := pipeline.ApprovalKindOf(cl.Kind)
	if a, err := g.pipe.ApprovalFor(ctx, kind, c.ID, "", c.PayloadHash); err != nil {
		return "", err
	} else if a != nil && a.BoundHash == c.PayloadHash && a.StatusAt(g.now()) == ledger.ApprovalDeclined {
		// Said before the claim's checks, which would only see a declined change.
		return "", g.pipe.ApprovalRefusal(voice.Change(c.ID), c.ID, cl.Kind.Verb, "", a, nil)
	}
	if c, err = g.pipe.Precheck(ctx, cl); err != nil {
		return "", err
	}
	gt := gate{kind: pipeline.ApprovalKindOf(cl.Kind), changeID: c.ID, hash: c.PayloadHash, needed: o.Approvers,
		deadline: c.ExpiresAt, subject: voice.Change(c.ID), id: c.ID, verb: cl.Kind.Verb, tool: g.toolName("apply_change")}
	if cl.Kind.From == ledger.Applied {
		gt.tool, gt.deadline = g.toolName("undo_change"), c.UndoExpiresAt
		if gt.deadline.IsZero() { // an undo that never expires: people have as long as a preview
			gt.deadline = g.now().Add(g.opts.TTL)
		}
	}
	return g.awaitPeople(ctx, req, gt, cl.By)
}

// runApprovers is how many people must approve the undo of a run whose
// plan carries out the changes in actions: the most any of their
// operations needs, and the server's number under PersonApproval; 0 when
// nobody has to.
func (g *Guard) runApprovers(ctx context.Context, actions map[string]bool) (int, error) {
	n := 0
	if g.opts.Approval == PersonApproval {
		n = g.opts.Approvers
	}
	for id := range actions {
		c, err := g.ledger.Change(ctx, id)
		if err != nil {
			return 0, err
		}
		if o, ok := g.lookup(c.Action); ok {
			n = max(n, o.Approvers)
		}
	}
	return n, nil
}

// runApproval is what the agent's real undo of run r, planned as plan,
// with the dry run's token tok, needs from people: "" when nobody has to
// approve, else the ID of the approval people gave to this plan, after
// waiting for it. A token or plan that the claim will refuse waits for
// nobody: the claim says what is wrong.
//
// required says whether the claim must bring an approval: the claim
// refuses one that brings none, so that a token checked here against a
// row read without a lock cannot let a write through unapproved.
func (g *Guard) runApproval(ctx context.Context, r *ledger.Run, plan *undoplan.Plan, tok, by string) (id string, required bool, err error) {
	needed, err := g.runApprovers(ctx, plan.Actions())
	if err != nil || needed == 0 {
		return "", false, err
	}
	if !token.Matches(r.ConfirmHash, token.PurposeRunUndo, r.ID, r.PlanHash, tok) || !g.now().Before(r.ConfirmExpiresAt) || r.PlanHash != plan.Hash {
		return "", true, nil
	}
	id, err = g.awaitPeople(ctx, requestOf(ctx), gate{kind: ledger.ApproveRunUndo, runID: r.ID, hash: plan.Hash, needed: needed,
		deadline: r.ConfirmExpiresAt, subject: voice.Run(r.ID), verb: "undone", tool: g.toolName("undo_run")}, by)
	return id, true, err
}

// requestKey keys the agent's tool call in a context, for the waits of a
// run undo, whose path is shared with trusted code.
type requestKey struct{}

// withRequest puts req in ctx; requestOf takes it out (nil for none).
func withRequest(ctx context.Context, req *mcp.CallToolRequest) context.Context {
	if req == nil {
		return ctx
	}
	return context.WithValue(ctx, requestKey{}, req)
}

func requestOf(ctx context.Context) *mcp.CallToolRequest {
	req, _ := ctx.Value(requestKey{}).(*mcp.CallToolRequest)
	return req
}
