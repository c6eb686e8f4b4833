package voice

import (
	"encoding/json"
	"fmt"
	"strings"
)

// This file holds what the agent reads about runs: the refusals of
// start_run, get_run, list_runs and undo_run, the next steps of a run's
// undo, and the reasons and notes of its reports (the rules that decide
// them are in package undoplan). Reasons are clauses that a report shows
// on their own ("it was changed outside the run …; it is left as it is").

// RunNotFound refuses a run the caller cannot see (or an ID that names
// none).
func (v *Voice) RunNotFound(id string) string {
	return fmt.Sprintf("run %s not found; start one with %s", ID(id), v.Tool("start_run"))
}

// RunLabelInvalid refuses a run label that is not valid UTF-8 or too long.
func (v *Voice) RunLabelInvalid(maxBytes int) string {
	return fmt.Sprintf("a run's label must be valid UTF-8 of at most %d bytes", maxBytes)
}

// PageLimitInvalid refuses a page size outside 1..maxLimit.
func (v *Voice) PageLimitInvalid(maxLimit int) string {
	return fmt.Sprintf("limit must be between 1 and %d", maxLimit)
}

// RunCursorInvalid refuses a get_run cursor that is not a next_cursor of
// the run.
func (v *Voice) RunCursorInvalid(cursor, runID string) string {
	return fmt.Sprintf("cursor %s is not a next_cursor of run %s; call %s again without a cursor", Quote(cursor), ID(runID), v.Tool("get_run"))
}

// RunStatusUnknown refuses a list_runs status filter it does not know.
func (v *Voice) RunStatusUnknown(status string) string {
	return fmt.Sprintf("unknown run status %s (want open, undoing, undone or partially_undone)", Quote(status))
}

// RunBusy refuses while another request undoes the run.
func (v *Voice) RunBusy(id string) string {
	return fmt.Sprintf("run %s is being undone by another request; check it with %s when it finishes", ID(id), v.Tool("get_run"))
}

// RunMoved refuses a dry run whose run left the open status meanwhile.
func (v *Voice) RunMoved(id, status string) string {
	return fmt.Sprintf("run %s is %s now; nothing was done. Check it with %s", ID(id), status, v.Tool("get_run"))
}

// RunNotUndoable refuses the undo of a run in a status that allows none.
func (v *Voice) RunNotUndoable(id, status string) string {
	return fmt.Sprintf("run %s cannot be undone (status: %s)", ID(id), status)
}

// RunChangeInFlight refuses a run's undo while one of its changes is being
// applied or undone.
func (v *Voice) RunChangeInFlight(runID, changeID, status string) string {
	return fmt.Sprintf("run %s cannot be undone now: change %s is %s; nothing was undone. Try again when it finishes", ID(runID), ID(changeID), status)
}

// RunNeedsToken refuses a real undo without the dry run's token.
func (v *Voice) RunNeedsToken(id string) string {
	return fmt.Sprintf("undo of run %s needs the confirmation_token of its dry run: call %s with dry_run=true, show the report to the user, then call it again with dry_run=false and the token",
		ID(id), v.Tool("undo_run"))
}

// RunTokenInvalid refuses a confirmation token that is not the latest dry
// run's.
func (v *Voice) RunTokenInvalid(id string) string {
	return fmt.Sprintf("invalid confirmation token for run %s: use the token of the latest dry run (%s with dry_run=true)", ID(id), v.Tool("undo_run"))
}

// RunTokenNotNeeded refuses, under user approval, a confirmation token
// that does not match: none is needed.
func (v *Voice) RunTokenNotNeeded(id string) string {
	return fmt.Sprintf("invalid confirmation token for run %s; it is not needed with user approval, so leave it out", ID(id))
}

// RunDryRunExpired refuses a real undo whose dry run expired at at.
func (v *Voice) RunDryRunExpired(id, at string) string {
	return fmt.Sprintf("the dry run of run %s expired at %s; run the dry run again", ID(id), at)
}

// RunPlanChanged refuses a real undo whose plan is not the one the dry run
// showed (or the user was asked about).
func (v *Voice) RunPlanChanged(id string) string {
	if v.mode == User {
		return fmt.Sprintf("run %s was not undone: what undoing it would do has changed since the user was asked; nothing was undone. "+
			"Run the dry run again, show the new report to the user, and call %s with dry_run=false to ask the user about it.", ID(id), v.Tool("undo_run"))
	}
	return fmt.Sprintf("what undoing run %s would do has changed since the dry run; run the dry run again and show the new report to the user. Nothing was undone.", ID(id))
}

// RunDryRunNext is the next step of a dry run whose plan undoes or closes
// something.
func (v *Voice) RunDryRunNext() string {
	if v.mode == User {
		return fmt.Sprintf("Nothing has been changed yet. Show this report to the user. To undo, call %s with dry_run=false: the user's client asks the user to approve this plan.", v.Tool("undo_run"))
	}
	return fmt.Sprintf("Nothing has been changed yet. Show this report to the user; only if the user approves, call %s with dry_run=false and this confirmation_token.", v.Tool("undo_run"))
}

// RunNothingToUndo is the next step of an undo whose plan undoes and
// closes nothing: everything left is skipped or cannot be undone, or the
// run has no applied change. The dry run asks for no approval, and the
// real undo of such a plan does nothing.
func (v *Voice) RunNothingToUndo(dryRun bool) string {
	if dryRun {
		return "Nothing to undo: no change of this run can be undone now; skipped and irreversible say why. Tell the user; there is nothing to approve."
	}
	return "Nothing to undo: no change of this run can be undone now; skipped and irreversible say why. Nothing was done."
}

// RunReplayed is the note of a stored report returned again: the run was
// undone at at by by, and nothing was done now.
func (v *Voice) RunReplayed(status, at, by string) string {
	who := ""
	if by != "" {
		who = " by " + Quote(by)
	}
	when := ""
	if at != "" {
		when = " at " + at
	}
	return fmt.Sprintf("This run was already undone (status: %s)%s%s; this is the stored report of that undo. Nothing was done now.", status, when, who)
}

// The reasons of a run's report, each a clause about one change ("it …").

// ReasonLinked notes that the change and change other, neither naming its
// resource, were related by their states.
func (v *Voice) ReasonLinked(other string) string {
	o := ID(other)
	return fmt.Sprintf("neither this change nor change %s names its resource; they were taken to touch the same thing because %s started from the state this one left and both read the same state now. "+
		"Each undo is checked again right before it runs. Proposals that set Resource make this certain.", o, o)
}

// ReasonOperationGone: the server no longer has the change's operation.
func (v *Voice) ReasonOperationGone(action string) string {
	return "this server no longer has the operation " + Quote(action)
}

// ReasonNoUndo: the change's operation has no inverse.
func (v *Voice) ReasonNoUndo() string { return "its operation has no undo" }

// ReasonWindowClosed: the change's undo window closed at at.
func (v *Voice) ReasonWindowClosed(at string) string { return "its undo window closed at " + at }

// ReasonKeptByNewer: a newer change of the run to the same resource stays,
// so this one stays too.
func (v *Voice) ReasonKeptByNewer(newer string) string {
	return fmt.Sprintf("change %s of the run, made after it to the same resource, stays in place (see its reason), so this one stays too and the resource keeps the state it has now", ID(newer))
}

// ReasonNoSnapshot: no state was recorded after the change.
func (v *Voice) ReasonNoSnapshot() string {
	return "no state was recorded after it was applied, so a later edit cannot be ruled out; it is left as it is"
}

// ReasonAlsoMoved adds what moved to the reason of a change kept for
// another reason.
func (v *Voice) ReasonAlsoMoved(reason, moved string) string { return reason + ": " + moved }

// ReasonChangedBetween: the resource was changed outside the run between
// the change and the newer change between of the run; moved says how.
func (v *Voice) ReasonChangedBetween(between, moved string) string {
	return fmt.Sprintf("it was changed outside the run between this change and change %s of the run: %s; it is left as it is", ID(between), moved)
}

// ReasonChangedOutside: the resource changed after the change, outside the
// run; moved says how.
func (v *Voice) ReasonChangedOutside(moved string) string {
	return "its resource changed after it was applied, outside the run: " + moved + "; it is left as it is"
}

// ReasonChangedSinceReview: a reviewed change whose check failed right
// before its inverse; moved says how.
func (v *Voice) ReasonChangedSinceReview(moved string) string {
	return "it was in the reviewed plan, but its resource changed after the review: " + moved + "; it is left as it is"
}

// ReasonUndoFailedEarlier: the change's undo failed before this run undo.
// failure is the ledger's kind of failure.
func (v *Voice) ReasonUndoFailedEarlier(failure string, nothingWritten bool) string {
	why := "its undo failed earlier"
	switch failure {
	case "state_changed":
		why = "its undo was refused earlier because its resource had changed"
	case "interrupted":
		why = "its undo was interrupted earlier and reconciled by an operator"
	}
	if nothingWritten {
		why += " (nothing was written)"
	}
	return why + "; it is left as it is. Check it with " + v.Tool("get_change_status") + "; it cannot be undone again"
}

// ReasonHeld: undoing the change would remove resource, which dep (its
// summary, where it is: of the same run, of another run, outside runs)
// depends on and which stays. It ends with "; it is left as it is".
func (v *Voice) ReasonHeld(resource, dep, depSummary, depRun string, sameRun bool) string {
	where := "outside the run"
	switch {
	case sameRun:
		where = "of the same run"
	case depRun != "":
		where = "of run " + ID(depRun)
	}
	return fmt.Sprintf("undoing it would remove %s, which change %s (%s, %s) depends on and which stays in place; it is left as it is",
		Quote(resource), ID(dep), Quote(depSummary), where)
}

// ReasonUnreadable: the change's current state could not be read (right
// before its undo, or while planning); failure names what failed, as the
// library logged it.
func (v *Voice) ReasonUnreadable(beforeUndo bool, failure string) string {
	when := ""
	if beforeUndo {
		when = " right before its undo"
	}
	return "its current state could not be read" + when + ": " + failure + "; it is left as it is"
}

// ReasonNotReviewed: the change was not part of the reviewed plan.
func (v *Voice) ReasonNotReviewed() string {
	return "it was not part of the plan that was reviewed, so it is left as it is; run the dry run again to review it"
}

// ReasonLate: the change joined the run after the plan was made.
func (v *Voice) ReasonLate() string {
	return "it was applied (or is still being applied) after the plan was made, so it was not part of the reviewed plan; it is left as it is. Run the dry run again to review it"
}

// ReasonNoLongerApplied: another request took the change meanwhile.
func (v *Voice) ReasonNoLongerApplied(status string) string {
	return fmt.Sprintf("it is no longer applied (status: %s); another request took it", status)
}

// ChangeNoLongerApplied is why a change could not be closed: it is no
// longer applied.
func (v *Voice) ChangeNoLongerApplied(id, status string) string {
	return fmt.Sprintf("change %s is no longer applied (status: %s)", ID(id), status)
}

// ReasonUndoFailed: the undo was tried and failed; failure is what the
// agent may be told of the error.
func (v *Voice) ReasonUndoFailed(failure string) string { return "undo failed: " + failure }

// DriftMoreFields is the found value of the last drift entry of a change
// whose drift was cut: how many more fields differ.
func (v *Voice) DriftMoreFields(n int) string { return fmt.Sprintf("%d more fields differ", n) }

// DriftValueCut is a drift value too long for a report, cut to its start:
// a string that says how long the whole was. start is JSON text, kept as
// the string's content.
func (v *Voice) DriftValueCut(start string, total int) string {
	return fmt.Sprintf("%s… (%d bytes in all)", start, total)
}

// Drift is one thing a run's undo found moved: a field (or, Field empty,
// the whole state) of a resource (Resource empty for a change of one).
// Expected is what the change left, Found what is there now (JSON).
type Drift struct {
	Resource string          `json:"resource,omitempty"`
	Field    string          `json:"field"`
	Expected json.RawMessage `json:"expected"`
	Found    json.RawMessage `json:"found"`
}

// Moved says in a few words what moved, for a reason:
// `"theme" is now "blue" (this change left "dark")`. Names and values are
// quoted.
func (v *Voice) Moved(d []Drift) string {
	var resources []string
	for _, e := range d {
		if e.Resource != "" && !containsString(resources, e.Resource) {
			resources = append(resources, e.Resource)
		}
	}
	if len(resources) == 1 {
		own := make([]Drift, 0, len(d))
		for _, e := range d {
			e.Resource = ""
			own = append(own, e)
		}
		return "resource " + Quote(resources[0]) + ": " + v.Moved(own)
	}
	if len(resources) > 0 {
		return "resources " + quoteList(resources) + " differ from what this change left"
	}
	switch {
	case len(d) == 0:
		return "its state differs from the one this change left"
	case len(d) == 1 && d[0].Field == "":
		return fmt.Sprintf("it is now %s (this change left %s)", Value(d[0].Found), Value(d[0].Expected))
	case len(d) == 1:
		return fmt.Sprintf("%s is now %s (this change left %s)", Quote(d[0].Field), Value(d[0].Found), Value(d[0].Expected))
	}
	names := make([]string, 0, len(d))
	for _, e := range d {
		names = append(names, e.Field)
	}
	return "fields " + quoteList(names) + " differ from what this change left"
}

// quoteList quotes the first four names and counts the rest.
func quoteList(names []string) string {
	out := make([]string, 0, min(len(names), 5))
	for i, n := range names {
		if i == 4 {
			out = append(out, fmt.Sprintf("%d more", len(names)-4))
			break
		}
		out = append(out, Quote(n))
	}
	return strings.Join(out, ", ")
}

func containsString(list []string, s string) bool {
	for _, e := range list {
		if e == s {
			return true
		}
	}
	return false
}
