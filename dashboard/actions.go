package dashboard

import (
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"net/http"
	"reflect"
	"strings"

	changeset "github.com/mcp-changeset/changeset-go"
	"github.com/mcp-changeset/changeset-go/ledger"
)

// The actions are the dashboard's only writes. Each is a POST that
// requireSession has checked for the session's CSRF token and for the
// dashboard's own origin, and each goes through the Guard's trusted path,
// recording the person who acted.

// dryRunData is the data of the dry-run page.
type dryRunData struct {
	runData
	Plan *reportView
}

// dryRun shows what undoing a run will do. It changes nothing: the Guard's
// trusted dry run stores no token and writes no row.
func (d *Dashboard) dryRun(w http.ResponseWriter, r *http.Request) {
	run, changes, ok := d.loadRun(w, r)
	if !ok {
		return
	}
	rep, err := d.guard.UndoRun(r.Context(), run.ID, true, changeset.Person(d.person(r)))
	if err != nil {
		d.refused(w, r, err, func(code int, msg string) { d.renderRun(w, r, code, run, changes, msg) })
		return
	}
	if !rep.DryRun { // undone meanwhile: the stored report is on the run page
		d.redirect(w, r, "/runs/"+run.ID, "This run has already been undone. Its report is below.")
		return
	}
	d.renderDryRun(w, r, http.StatusOK, run.ID, rep, "")
}

func (d *Dashboard) renderDryRun(w http.ResponseWriter, r *http.Request, code int, runID string, rep *changeset.RunReport, problem string) {
	run, changes, ok := d.loadRun(w, r)
	if !ok {
		return
	}
	rd, err := d.runData(r.Context(), run, changes, nil)
	if err != nil {
		d.internalError(w, r, err)
		return
	}
	plan := report(rep, summaries(changes))
	plan.Fingerprint, plan.Planned = fingerprint(rep), rep.Planned()
	d.render(w, r, code, "dryrun", page{Title: "Undo run " + rd.Run.Label + "?", Nav: "runs", Problem: problem,
		Data: dryRunData{runData: rd, Plan: plan}})
}

// undoRun undoes a run as a person. The form carries the fingerprint of
// the plan the person reviewed and the changes it acts on; if a fresh dry
// run now plans something else, nothing is undone and the new plan is
// shown instead. Otherwise the Guard carries out the reviewed changes and
// no others (UndoRunReviewed): what happens is what the person saw, or
// less, and the report says what was not carried out.
func (d *Dashboard) undoRun(w http.ResponseWriter, r *http.Request) {
	run, changes, ok := d.loadRun(w, r)
	if !ok {
		return
	}
	ctx, by := r.Context(), changeset.Person(d.person(r))
	fail := func(code int, msg string) { d.renderRun(w, r, code, run, changes, msg) }
	plan, err := d.guard.UndoRun(ctx, run.ID, true, by)
	if err != nil {
		d.refused(w, r, err, fail)
		return
	}
	if !plan.DryRun {
		d.redirect(w, r, "/runs/"+run.ID, "This run had already been undone. Its report is below.")
		return
	}
	if fingerprint(plan) != r.PostFormValue("plan") {
		d.renderDryRun(w, r, http.StatusConflict, run.ID, plan,
			"What undoing this run will do has changed since you reviewed it. Nothing has been changed. Review the new plan below.")
		return
	}
	if err := r.ParseForm(); err != nil {
		fail(http.StatusBadRequest, "The form could not be read: "+err.Error())
		return
	}
	rep, err := d.guard.UndoRunReviewed(ctx, run.ID, r.PostForm["change"], by)
	if err != nil {
		d.refused(w, r, err, func(code int, msg string) { d.renderDryRun(w, r, code, run.ID, plan, msg) })
		return
	}
	d.opts.Logger.Info("dashboard: run undone", "run_id", run.ID, "by", by, "status", rep.Status)
	msg := "Run undone by " + by + "."
	switch {
	case len(rep.NotCarriedOut) > 0:
		msg = fmt.Sprintf("Run partly undone by %s: %d of the changes you reviewed were not undone, because they changed after your review. The report below says which and why.", by, len(rep.NotCarriedOut))
	case rep.Status == "open":
		msg = "Run partly undone by " + by + ": changes that joined the run after your review were left alone. Review the run again to undo them."
	case rep.Status != "undone":
		msg = "Run partly undone by " + by + ": some changes were skipped or could not be undone. The report below says which and why."
	}
	d.redirect(w, r, "/runs/"+run.ID, msg)
}

// undoChange undoes one applied change as a person.
func (d *Dashboard) undoChange(w http.ResponseWriter, r *http.Request) {
	c, ok := d.loadChange(w, r)
	if !ok {
		return
	}
	by := changeset.Person(d.person(r))
	if _, err := d.guard.UndoAs(r.Context(), c.ID, by); err != nil {
		d.refused(w, r, err, func(code int, msg string) { d.renderChange(w, r, code, msg) })
		return
	}
	d.opts.Logger.Info("dashboard: change undone", "change_id", c.ID, "by", by)
	d.redirect(w, r, "/changes/"+c.ID, "Change undone by "+by+".")
}

// refused shows a refusal from the library with its own text (it names the
// change and the reason, and never holds a token), with the HTTP status its
// kind calls for, or logs any other error and shows a generic failure. It
// branches on the library's error kinds (errors.Is), never on message text.
func (d *Dashboard) refused(w http.ResponseWriter, r *http.Request, err error, show func(code int, msg string)) {
	var (
		ce *changeset.ChangeError
		le *changeset.LedgerError
	)
	switch {
	case errors.Is(err, changeset.ErrWritesDisabled), errors.Is(err, changeset.ErrBusy):
		show(http.StatusServiceUnavailable, "Refused: "+err.Error())
	case errors.Is(err, changeset.ErrNotFound):
		show(http.StatusNotFound, "Refused: "+err.Error())
	case errors.Is(err, ledger.ErrCorrupt) && errors.As(err, &ce):
		d.opts.Logger.Error("dashboard: the ledger holds an altered change", "path", r.URL.Path, "err", err)
		show(http.StatusConflict, "Refused: "+err.Error())
	case errors.As(err, &ce), errors.Is(err, changeset.ErrStateChanged):
		show(http.StatusConflict, "Refused: "+err.Error())
	case errors.As(err, &le):
		d.opts.Logger.Error("dashboard: ledger error", "path", r.URL.Path, "err", err)
		show(http.StatusServiceUnavailable, "The ledger could not complete this ("+le.Err.Error()+"). Nothing was reported as changed; try again.")
	default:
		d.opts.Logger.Error("dashboard: action failed", "path", r.URL.Path, "err", err)
		show(http.StatusInternalServerError, "The undo failed with an error of type "+strings.TrimLeft(reflect.TypeOf(err).String(), "*")+". The server's log has the details.")
	}
}

// redirect sends the browser to the page that shows an action's outcome
// (303, so that reloading it repeats nothing), with msg shown there once.
func (d *Dashboard) redirect(w http.ResponseWriter, r *http.Request, to, msg string) {
	d.sessions.setFlash(sessionOf(r).id, msg)
	http.Redirect(w, r, to, http.StatusSeeOther)
}

// fingerprint identifies a dry run's decisions: which change gets which
// verdict, and why. It is the dashboard's own value (not the ledger's plan
// digest, which never leaves the ledger) and only tells whether the plan
// changed between review and confirmation.
func fingerprint(rep *changeset.RunReport) string {
	h := sha256.New()
	h.Write([]byte("changeset-dashboard-plan-v1\x00"))
	add := func(kind, id, reason string) {
		h.Write([]byte(kind + "\x00" + id + "\x00" + reason + "\x00"))
	}
	for _, s := range rep.WillUndo {
		add("undo", s.ChangeID, "")
	}
	for _, s := range rep.NoNetChange {
		add("no_net_change", s.ChangeID, "")
	}
	for _, n := range rep.Skipped {
		add("skip", n.ChangeID, n.Reason)
	}
	for _, n := range rep.Irreversible {
		add("irreversible", n.ChangeID, n.Reason)
	}
	for _, n := range rep.Failed {
		add("failed", n.ChangeID, n.Reason)
	}
	return hex.EncodeToString(h.Sum(nil)[:16])
}
