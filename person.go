package changeset

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"sync"

	"github.com/mcp-changeset/changeset-go/ledger"
	"github.com/mcp-changeset/changeset-go/notify"
)

// Person approval, the side of people and operators: the links to the
// pages where people decide, the webhook that tells them something waits,
// the Go API through which an application's own interface approves or
// declines, and the rule of each operation. The agent's side, which waits
// for the decision, is in personwait.go.

// approvalLink is the page where people decide approval id:
// Options.DashboardURL + "/approvals/" + id, or "" without a DashboardURL.
func (g *Guard) approvalLink(id string) string {
	return g.dashboardLink("approvals", id)
}

// dashboardLink is the dashboard's page of kind ("approvals", "changes",
// "runs") for id, "" without a DashboardURL.
func (g *Guard) dashboardLink(kind, id string) string {
	if g.opts.DashboardURL == "" || id == "" {
		return ""
	}
	return strings.TrimRight(g.opts.DashboardURL, "/") + "/" + kind + "/" + id
}

// eventLink is the link an event carries: the approval's page for an
// approval's events, else the change's or the run's.
func (g *Guard) eventLink(e ledger.EventBody) string {
	switch {
	case e.ApprovalID != "":
		return g.dashboardLink("approvals", e.ApprovalID)
	case e.ChangeID != "":
		return g.dashboardLink("changes", e.ChangeID)
	}
	return g.dashboardLink("runs", e.RunID)
}

// startNotify runs w on the Guard's ledger until Close, linking its events
// to the dashboard when w names no links of its own.
func (g *Guard) startNotify(w notify.Webhook) error {
	if err := w.Check(); err != nil {
		return err
	}
	if w.Link == nil && g.opts.DashboardURL != "" {
		w.Link = g.eventLink
	}
	if w.Logger == nil {
		w.Logger = g.log
	}
	ctx, cancel := context.WithCancel(context.Background())
	var wg sync.WaitGroup
	wg.Add(1)
	go func() {
		defer wg.Done()
		_ = w.Run(ctx, g.ledger) // returns when ctx ends; w was checked above
	}()
	g.notifyStop = func() { cancel(); wg.Wait() }
	return nil
}

// stopNotify ends the webhook sender, if any, once.
func (g *Guard) stopNotify() {
	if g.notifyStop != nil {
		g.notifyStop()
		g.notifyStop = nil
	}
}

// approversFor is how many people must approve the writes of an operation
// that asks for mode (zero: the server's) and n people (zero: the
// server's number): 0 when nobody but the token's holder has to. It
// reports an override the server cannot serve.
func (g *Guard) approversFor(mode Approval, n int) (int, error) {
	server := g.opts.Approval
	switch {
	case mode != 0 && mode != TokenApproval && mode != UserApproval && mode != PersonApproval:
		return 0, fmt.Errorf("unknown Approval %v", mode)
	case n < 0 || n > ledger.MaxApprovers:
		return 0, fmt.Errorf("the operation's Approvers %d is outside 0 to %d", n, ledger.MaxApprovers)
	case server == UserApproval && (mode != 0 && mode != UserApproval || n != 0):
		return 0, errors.New("a server with UserApproval takes no approval override (its tools ask the user in the client)")
	case server != UserApproval && mode == UserApproval:
		return 0, fmt.Errorf("UserApproval needs a server with UserApproval; this one has %v", server)
	}
	if mode == 0 {
		mode = server
	}
	switch {
	case mode != PersonApproval && n != 0:
		return 0, fmt.Errorf("the operation's Approvers %d needs PersonApproval, and its mode is %v", n, mode)
	case mode != PersonApproval:
		return 0, nil
	case n == 0:
		return g.opts.Approvers, nil
	}
	return n, nil
}

// Approve records that person approves the write that approval
// approvalID waits for, with an optional note, as "person:<name>" in the
// ledger's history (person may be given with or without the "person:"
// prefix). The write goes ahead once as many distinct people as it needs
// have approved; an agent waiting for it sees the decision at once. One
// person approving twice is one approval: the second time fails with an
// error wrapping ledger.ErrDecided and changes nothing. It returns the
// approval as it stands after the decision.
//
// Approve is for trusted code acting for a named person: an
// application's own interface, after it has authenticated that person.
// No tool lets an agent approve.
func (g *Guard) Approve(ctx context.Context, approvalID, person, note string) (*ledger.Approval, error) {
	return g.decide(ctx, approvalID, person, note, ledger.Approve)
}

// Decline records that person declines the write that approval
// approvalID waits for, as Approve does. A declined apply ends its change
// in the status declined; the agent is told who declined and the note.
func (g *Guard) Decline(ctx context.Context, approvalID, person, note string) (*ledger.Approval, error) {
	return g.decide(ctx, approvalID, person, note, ledger.Decline)
}

func (g *Guard) decide(ctx context.Context, id, person, note string, v ledger.Verdict) (*ledger.Approval, error) {
	name := strings.TrimPrefix(person, "person:")
	if strings.TrimSpace(name) == "" {
		return nil, fmt.Errorf("changeset: %s approval %s: name the person who decides", v, id)
	}
	return g.ledger.Decide(ctx, ledger.Decision{ApprovalID: id, Person: Person(name), Verdict: v, Note: note, At: g.now()})
}

// WaitingApprovals returns the approvals that wait for people, newest
// first, at most limit (all when limit is 0), for an application's own
// list of what waits.
func (g *Guard) WaitingApprovals(ctx context.Context, limit int) ([]*ledger.Approval, error) {
	all, err := g.ledger.Approvals(ctx, ledger.ApprovalFilter{Statuses: []ledger.ApprovalStatus{ledger.ApprovalWaiting}, Limit: limit})
	if err != nil {
		return nil, err
	}
	now := g.now()
	out := all[:0]
	for _, a := range all {
		if a.StatusAt(now) == ledger.ApprovalWaiting {
			out = append(out, a)
		}
	}
	return out, nil
}
