package dashboard

import (
	"context"
	"errors"
	"fmt"
	"net/http"
	"strings"
	"unicode"
	"unicode/utf8"

	changeset "github.com/mcp-changeset/changeset-go"
	"github.com/mcp-changeset/changeset-go/ledger"
)

// Person approval from the dashboard: the list of approvals waiting for
// people, each with what it would let go ahead (a change's diff, or the
// plan of a run's undo), one approval's page with its decisions so far,
// and the two actions, approve and decline. A decision goes straight to
// the ledger (Ledger.Decide), which keeps the rules: a person decides an
// approval once, only while it waits and before its deadline. It is
// recorded as person:<the signed-in person>.
//
// The shared login link names nobody in particular: its decisions are
// recorded as person:<Options.Person> ("person:dashboard" by default), and
// however many people use the link they count as that one person, so a
// two-person approval needs people who sign in as themselves (a people
// file, the trusted header, WithPerson) or the CLI.

// approvalsPageSize is how many approvals a page of the list shows: each
// carries a diff or a plan, so fewer than a page of changes.
const approvalsPageSize = 20

// maxWaitingCount bounds the count of waiting approvals the navigation
// shows: beyond it, it says "99+".
const maxWaitingCount = 99

// approvalView is an approval as the pages show it. It has no field for
// the hash the approval is bound to.
type approvalView struct {
	ID, Kind, Status string // Status as of now: a waiting approval past its deadline is expired
	// What says what it lets go ahead, in words ("Apply set_value",
	// "Undo set_value", "Undo the run"); Summary is the change's summary
	// or the run's label.
	What, Action, Summary string
	ChangeID, RunID       string
	RunLabel              string // the label of the change's run, if any
	RequestedBy           *actor
	DecidedBy             *actor
	Note                  string // the deciding person's note
	UsedBy                *actor
	Needed, Approvals     int
	Remaining             int // approvals still needed while it waits
	Created, Deadline     *stamp
	Decided, Used         *stamp
	// Change is the change of an apply or undo, for its diff; Plan is
	// what undoing the run would do now, for a run undo (PlanProblem
	// says why it could not be worked out).
	Change      *changeView
	Plan        *reportView
	PlanProblem string
}

// decisionView is one person's decision.
type decisionView struct {
	Person  *actor
	Verdict string // "approved" or "declined"
	Note    string
	At      *stamp
}

// approvalsData is the data of the approvals page.
type approvalsData struct {
	Approvals []approvalView
	// Older is the ID of the last approval of this page, where the next
	// page starts ("": this is the last page); Newer says this is not the
	// first page.
	Older string
	Newer bool
	// Shared says the person is signed in with the shared login link.
	Shared bool
}

// approvalData is the data of one approval's page.
type approvalData struct {
	Approval  approvalView
	Decisions []decisionView
	// Mine is the signed-in person's own decision, if they made one.
	Mine *decisionView
	// CanDecide says the approval waits and this person has not decided
	// it: the page shows the form.
	CanDecide bool
	Shared    bool
	NoteMax   int
	// Note is the note to put back in the form after a refusal.
	Note string
}

// approvalsPage lists the approvals waiting for people, newest first.
func (d *Dashboard) approvalsPage(w http.ResponseWriter, r *http.Request) {
	ctx, l := r.Context(), d.guard.Ledger()
	f := ledger.ApprovalFilter{Statuses: []ledger.ApprovalStatus{ledger.ApprovalWaiting}, Limit: approvalsPageSize + 1}
	_, named := d.identify(r)
	data := approvalsData{Approvals: []approvalView{}, Shared: !named}
	if id := r.URL.Query().Get("before"); id != "" {
		after, err := l.Approval(ctx, id)
		if errors.Is(err, ledger.ErrNotFound) || !validID(id, "apr_") {
			d.renderError(w, r, http.StatusBadRequest, "No such page",
				"The page started after an approval that is not in the ledger (pruned, or a mistyped link). Start again from the newest approvals.")
			return
		}
		if err != nil {
			d.internalError(w, r, err)
			return
		}
		f.Before, data.Newer = &ledger.ChangeKey{CreatedAt: after.CreatedAt, ID: after.ID}, true
	}
	rows, err := l.Approvals(ctx, f)
	if err != nil {
		d.internalError(w, r, err)
		return
	}
	if len(rows) > approvalsPageSize {
		rows = rows[:approvalsPageSize]
		data.Older = rows[len(rows)-1].ID
	}
	now := d.opts.Now()
	for _, a := range rows {
		if a.StatusAt(now) != ledger.ApprovalWaiting {
			continue // past its deadline: it can no longer be decided
		}
		av, err := d.approvalView(ctx, r, a)
		if err != nil {
			d.internalError(w, r, err)
			return
		}
		data.Approvals = append(data.Approvals, av)
	}
	d.render(w, r, http.StatusOK, "approvals", page{Title: "Approvals", Nav: "approvals", Data: data})
}

// approvalPage shows one approval: what it is for, who asked, the
// decisions so far, and the form to approve or decline it.
func (d *Dashboard) approvalPage(w http.ResponseWriter, r *http.Request) {
	d.renderApproval(w, r, http.StatusOK, "", "")
}

// renderApproval renders the approval named in the path with status code,
// a problem to show and the note to put back in the form.
func (d *Dashboard) renderApproval(w http.ResponseWriter, r *http.Request, code int, problem, note string) {
	a, ok := d.loadApproval(w, r)
	if !ok {
		return
	}
	ctx := r.Context()
	av, err := d.approvalView(ctx, r, a)
	if err != nil {
		d.internalError(w, r, err)
		return
	}
	decisions, err := d.guard.Ledger().Decisions(ctx, a.ID)
	if err != nil {
		d.internalError(w, r, err)
		return
	}
	name, named := d.identify(r)
	me := changeset.Person(name)
	data := approvalData{Approval: av, Shared: !named, NoteMax: ledger.MaxApprovalNote, Note: visible(note)}
	v := d.viewer()
	for _, dec := range decisions {
		dv := decisionView{Person: parseActor(dec.Person), Verdict: pastTense(dec.Verdict), Note: visible(dec.Note), At: v.stamp(dec.At)}
		data.Decisions = append(data.Decisions, dv)
		if dec.Person == me {
			data.Mine = &dv
		}
	}
	data.CanDecide = av.Status == string(ledger.ApprovalWaiting) && data.Mine == nil
	d.render(w, r, code, "approval", page{Title: av.What + ": " + av.Summary, Nav: "approvals", Problem: problem, Data: data})
}

// loadApproval reads the approval named in the path; it writes a 404 or
// 500 page and returns ok=false when it cannot.
func (d *Dashboard) loadApproval(w http.ResponseWriter, r *http.Request) (*ledger.Approval, bool) {
	return loadByID(d, w, r, "apr_", d.guard.Ledger().Approval)
}

// approvalView builds the view of a, with the diff of its change or the
// plan of its run's undo.
func (d *Dashboard) approvalView(ctx context.Context, r *http.Request, a *ledger.Approval) (approvalView, error) {
	v := d.viewer()
	av := approvalView{
		ID: a.ID, Kind: string(a.Kind), Status: string(a.StatusAt(v.now)), ChangeID: a.ChangeID, RunID: a.RunID,
		RequestedBy: parseActor(a.RequestedBy), DecidedBy: parseActor(a.DecidedBy), Note: visible(a.Note), UsedBy: parseActor(a.UsedBy),
		Needed: a.Needed, Approvals: a.Approvals, Remaining: max(0, a.Needed-a.Approvals),
		Created: v.stamp(a.CreatedAt), Deadline: v.stamp(a.Deadline), Decided: v.stamp(a.DecidedAt), Used: v.stamp(a.UsedAt),
	}
	l := d.guard.Ledger()
	if a.ChangeID != "" {
		c, err := l.Change(ctx, a.ChangeID)
		if errors.Is(err, ledger.ErrNotFound) {
			av.What = "Change (deleted)"
			return av, nil
		}
		if err != nil {
			return av, err
		}
		cv := v.change(c)
		av.Change, av.Action, av.Summary = &cv, cv.Action, cv.Summary
		av.What = "Apply " + cv.Action
		if a.Kind == ledger.ApproveUndo {
			av.What = "Undo " + cv.Action
		}
		if c.RunID != "" {
			if run, err := l.Run(ctx, c.RunID); err == nil {
				av.RunID, av.RunLabel = run.ID, visible(run.Label)
			}
		}
		return av, nil
	}
	av.What, av.Action = "Undo the run", "undo_run"
	run, err := l.Run(ctx, a.RunID)
	if errors.Is(err, ledger.ErrNotFound) {
		av.Summary = "(deleted)"
		return av, nil
	}
	if err != nil {
		return av, err
	}
	av.Summary, av.RunLabel = visible(run.Label), visible(run.Label)
	if av.Status != string(ledger.ApprovalWaiting) {
		return av, nil // only a waiting approval needs its plan
	}
	// The trusted dry run stores no token and writes no row: it says what
	// undoing the run would do now.
	rep, err := d.guard.UndoRun(ctx, run.ID, true, changeset.Person(d.person(r)))
	if err != nil {
		av.PlanProblem = "What undoing this run would do could not be worked out now: " + err.Error()
		return av, nil
	}
	changes, err := l.Changes(ctx, ledger.ChangeFilter{RunID: run.ID})
	if err != nil {
		return av, err
	}
	av.Plan = report(rep, summaries(changes))
	return av, nil
}

// decide records the signed-in person's approval or decline of the
// approval named in the path, then shows its page. requireSession has
// checked the CSRF token and the origin.
func (d *Dashboard) decide(verdict ledger.Verdict) http.HandlerFunc {
	return func(w http.ResponseWriter, r *http.Request) {
		a, ok := d.loadApproval(w, r)
		if !ok {
			return
		}
		note := strings.TrimSpace(strings.ReplaceAll(r.PostFormValue("note"), "\r\n", "\n"))
		if msg := checkNote(note); msg != "" {
			d.renderApproval(w, r, http.StatusBadRequest, msg+" Nothing was changed.", note)
			return
		}
		by := changeset.Person(d.person(r))
		done, err := d.guard.Ledger().Decide(r.Context(), ledger.Decision{ApprovalID: a.ID, Person: by, Verdict: verdict, Note: note})
		if err != nil {
			code, msg := decideRefusal(err, done, by)
			if code == http.StatusInternalServerError {
				d.opts.Logger.Error("dashboard: decision failed", "approval_id", a.ID, "by", by, "err", err)
			}
			d.renderApproval(w, r, code, msg, note)
			return
		}
		d.opts.Logger.Info("dashboard: approval decided", "approval_id", a.ID, "by", by, "verdict", string(verdict), "status", string(done.Status))
		d.redirect(w, r, "/approvals/"+a.ID, decidedMessage(done, by))
	}
}

// checkNote returns why a decision's note is refused, or "".
func checkNote(note string) string {
	switch {
	case len(note) > ledger.MaxApprovalNote:
		return fmt.Sprintf("The note is %d bytes long; at most %d are allowed.", len(note), ledger.MaxApprovalNote)
	case !utf8.ValidString(note):
		return "The note is not valid UTF-8."
	case strings.ContainsFunc(note, func(r rune) bool { return unicode.IsControl(r) && r != '\n' && r != '\t' }):
		return "The note holds control characters."
	}
	return ""
}

// decideRefusal words a refused decision for the page: the HTTP status
// and the message. a is the approval as the ledger returned it with the
// refusal, or nil. It branches on the ledger's error kinds, never on
// message text.
func decideRefusal(err error, a *ledger.Approval, by string) (int, string) {
	const nothing = " Nothing was changed."
	switch {
	case errors.Is(err, ledger.ErrNotFound):
		return http.StatusNotFound, "This approval is no longer in the ledger." + nothing
	case errors.Is(err, ledger.ErrDecided):
		return http.StatusConflict, "You (" + by + ") have already decided this approval: a person decides an approval once, and approving twice counts once." + nothing
	case a == nil:
	case errors.Is(err, ledger.ErrApprovalExpired):
		return http.StatusConflict, "This approval expired: its deadline passed before it was decided. The agent must ask again." + nothing
	case errors.Is(err, ledger.ErrApprovalUsed):
		return http.StatusConflict, "This approval was used already, by " + visible(a.UsedBy) + "." + nothing
	case errors.Is(err, ledger.ErrApprovalDeclined):
		return http.StatusConflict, "This approval was declined by " + visible(a.DecidedBy) + "." + nothing
	case errors.Is(err, ledger.ErrApprovalApproved):
		return http.StatusConflict, fmt.Sprintf("This approval is already approved (%d of %d, the last by %s).", a.Approvals, a.Needed, visible(a.DecidedBy)) + nothing
	}
	return http.StatusInternalServerError, "The decision could not be recorded. The server's log has the details." + nothing
}

// decidedMessage says what a decision did, for the page after it.
func decidedMessage(a *ledger.Approval, by string) string {
	switch a.Status {
	case ledger.ApprovalApproved:
		return fmt.Sprintf("Approved by %s (%d of %d). The agent may go ahead, once, before the deadline.", by, a.Approvals, a.Needed)
	case ledger.ApprovalDeclined:
		if a.Kind == ledger.ApproveApply {
			return "Declined by " + by + ". The change is declined and will not be applied."
		}
		return "Declined by " + by + ". The agent's request is refused; nothing else changes."
	}
	return fmt.Sprintf("Approved by %s (%d of %d). It waits for %s.", by, a.Approvals, a.Needed, morePeople(a.Needed-a.Approvals))
}

// morePeople says how many more people must approve: "1 more person",
// "2 more people".
func morePeople(n int) string {
	if n == 1 {
		return "1 more person"
	}
	return fmt.Sprintf("%d more people", n)
}

// pastTense is "approved" or "declined".
func pastTense(v ledger.Verdict) string {
	if v == ledger.Decline {
		return "declined"
	}
	return "approved"
}

// waiting counts the approvals waiting for people, up to maxWaitingCount
// and one more (shown as "99+"), for the navigation. It reads one short
// page; an error counts nothing and is logged.
func (d *Dashboard) waiting(ctx context.Context) int {
	rows, err := d.guard.Ledger().Approvals(ctx, ledger.ApprovalFilter{Statuses: []ledger.ApprovalStatus{ledger.ApprovalWaiting}, Limit: maxWaitingCount + 1})
	if err != nil {
		d.opts.Logger.Error("dashboard: count waiting approvals", "err", err)
		return 0
	}
	now, n := d.opts.Now(), 0
	for _, a := range rows {
		if a.StatusAt(now) == ledger.ApprovalWaiting {
			n++
		}
	}
	return n
}

// waitingFor returns the approvals f selects (those of a change, or the
// run undo approvals of a run) that wait for people, for the change's or
// the run's page: each with what it is for, but not the change or plan.
func (d *Dashboard) waitingFor(ctx context.Context, f ledger.ApprovalFilter) ([]approvalView, error) {
	f.Statuses = []ledger.ApprovalStatus{ledger.ApprovalWaiting}
	rows, err := d.guard.Ledger().Approvals(ctx, f)
	if err != nil {
		return nil, err
	}
	v := d.viewer()
	var out []approvalView
	for _, a := range rows {
		if a.StatusAt(v.now) != ledger.ApprovalWaiting {
			continue
		}
		what := "Apply"
		switch a.Kind {
		case ledger.ApproveUndo:
			what = "Undo"
		case ledger.ApproveRunUndo:
			what = "Undoing this run"
		}
		out = append(out, approvalView{ID: a.ID, Kind: string(a.Kind), What: what, Needed: a.Needed, Approvals: a.Approvals,
			RequestedBy: parseActor(a.RequestedBy), Deadline: v.stamp(a.Deadline)})
	}
	return out, nil
}
