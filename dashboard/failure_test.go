package dashboard_test

import (
	"context"
	"errors"
	"net/http"
	"strings"
	"testing"
	"time"

	changeset "github.com/mcp-changeset/changeset-go"
	"github.com/mcp-changeset/changeset-go/ledger"
)

// refusedApply previews a change, lets a person edit its resource, and
// applies: the check refuses, nothing is written.
func (f *fixture) refusedApply() string {
	f.t.Helper()
	id := f.preview("", "set_value", "language", "de")
	human := "edited by a person"
	f.store.put("language", &human)
	f.clock.Advance(time.Minute)
	_, err := f.guard.Apply(context.Background(), id, f.tokens[len(f.tokens)-1])
	if !errors.Is(err, changeset.ErrStateChanged) {
		f.t.Fatalf("apply after an edit: %v, want ErrStateChanged", err)
	}
	c, err := f.guard.Ledger().Change(context.Background(), id)
	if err != nil || c.Status != ledger.ApplyFailed || c.Failure != ledger.FailureStateChanged || !c.NothingWritten {
		f.t.Fatalf("refused change: %+v, %v", c, err)
	}
	return id
}

// A refused apply that wrote nothing reads as a refusal, in amber, with
// what happened in plain words: not a red failure, not a Go type name.
func TestChangePage_RefusedApplyIsWordedNotRed(t *testing.T) {
	f := newFixture(t)
	s := f.build()
	refused := f.refusedApply()
	c := f.login()
	page := c.get("/changes/" + refused)
	if page.Code != http.StatusOK {
		t.Fatalf("GET = %d", page.Code)
	}
	mustContain(t, "refused change", page.Body,
		`<span class="badge st-apply_refused">apply refused</span>`,
		`<div class="banner refused failure" role="note">`,
		"Refused: the state changed since the preview; nothing was written.",
		"Expected (the state the preview saw)", "Found (when the apply checked)", "edited by a person",
		"Apply refused: the state changed since the preview; nothing was written") // the timeline
	for _, bad := range []string{`banner error`, `st-apply_failed`, "StateChangedError", "Apply failed"} {
		if strings.Contains(page.Body, bad) {
			t.Errorf("the refused change's page holds %q", bad)
		}
	}
	list := c.get("/changes")
	mustContain(t, "changes list", list.Body, `<span class="badge st-apply_refused">apply refused</span>`,
		`<div class="failline tone-refused">Refused: the state changed since the preview; nothing was written.</div>`)
	// A real error stays a red failure, worded by its kind.
	failed := c.get("/changes/" + s.failed)
	mustContain(t, "failed change", failed.Body, `<span class="badge st-apply_failed">apply failed</span>`,
		`<div class="banner error failure" role="note">`, "Failed: the operation returned an error.",
		"It may have written part of the change")
	// The status filter still finds it: its status is apply_failed.
	if got := listed(c.get("/changes?status=apply_failed").Body); !sameSet(got, []string{s.failed, refused}) {
		t.Errorf("status=apply_failed lists %v", got)
	}
}

// Undoing a change whose resource a person edited since is refused and
// writes nothing; the page says so and shows the state the undo expected
// beside the state its check found (the person's edit), which the ledger
// keeps in undo_found_state.
func TestChangePage_RefusedUndoShowsWhatItExpectedAndFound(t *testing.T) {
	f := newFixture(t)
	s := f.build()
	c := f.login()
	motd := s.changes[4] // a person edited motd after the agent
	c.get("/changes/" + motd)
	res := c.post("/changes/"+motd+"/undo", nil)
	if res.Code != http.StatusConflict {
		t.Fatalf("undo of an edited change = %d, want 409:\n%s", res.Code, res.Body)
	}
	if v, _ := f.store.get("motd"); v != "edited by a person" {
		t.Fatalf("motd = %q: the refused undo wrote", v)
	}
	row, _ := f.guard.Ledger().Change(context.Background(), motd)
	t.Logf("after the refused undo: %s, failure %q", row.Status, row.Failure)
	page := c.get("/changes/" + motd)
	if row.Status != ledger.UndoFailed || row.Failure != ledger.FailureStateChanged {
		t.Fatalf("after a refused undo the change is %s (%s), want undo_failed (state_changed)", row.Status, row.Failure)
	}
	if !strings.Contains(string(row.UndoFound), "edited by a person") || string(row.UndoFound) == string(row.After) {
		t.Errorf("the refused undo kept found %s (after %s), want the person's edit", row.UndoFound, row.After)
	}
	mustContain(t, "refused undo", page.Body, `<span class="badge st-undo_refused">undo refused</span>`,
		"Undo refused: the resource changed after this change was applied; nothing was written.",
		"Expected (the state the apply left)", "&#34;updated by the agent&#34;",
		"Found (when the undo checked)", "&#34;edited by a person&#34;")
	if strings.Contains(page.Body, "Not kept by the ledger") {
		t.Error("the page says the found state was not kept")
	}
	if strings.Contains(page.Body, "banner error failure") {
		t.Error("a refused undo is styled as a failure")
	}
}

// A skipped change in the dry run and in the stored report shows its
// drift: what the undo expected (what the change left) and what it found.
func TestDryRunAndReport_ShowDriftOfSkippedChanges(t *testing.T) {
	f := newFixture(t)
	s := f.build()
	c := f.login()
	dry := c.post("/runs/"+s.run+"/dry-run", nil)
	if dry.Code != http.StatusOK {
		t.Fatalf("dry run = %d", dry.Code)
	}
	drift := func(what, body string) {
		t.Helper()
		i := strings.Index(body, `<section class="rsec rs-skip"><h3>Skipped`)
		if i < 0 {
			t.Fatalf("%s has no skipped section", what)
		}
		sec := body[i:]
		sec = sec[:strings.Index(sec, "</section>")]
		mustContain(t, what+"'s skipped section", sec,
			`<div class="diff drift" role="table" aria-label="What changed since: expected and found">`,
			`Expected (left by this change)`, `Found now`,
			`<div class="field" role="rowheader">(the whole state)</div>`,
			`<span class="val">&#34;updated by the agent&#34;</span>`, `<span class="val">&#34;edited by a person&#34;</span>`)
	}
	drift("the dry run", dry.Body)
	if res := c.post("/runs/"+s.run+"/undo", confirmForm(t, dry.Body)); res.Code != http.StatusSeeOther {
		t.Fatalf("confirm = %d", res.Code)
	}
	drift("the report", c.get("/runs/"+s.run).Body)
}
