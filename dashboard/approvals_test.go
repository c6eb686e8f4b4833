package dashboard_test

import (
	"context"
	"fmt"
	"net/http"
	"net/url"
	"regexp"
	"slices"
	"strings"
	"testing"
	"time"

	changeset "github.com/mcp-changeset/changeset-go"
	"github.com/mcp-changeset/changeset-go/dashboard"
	"github.com/mcp-changeset/changeset-go/ledger"
)

// The tests make approvals through the ledger's API, as the Guard does
// under person approval: a pending change (or an applied one, or a run
// with the agent's dry run), then RequestApproval.

// requestApproval asks for approval of the apply of the pending change id
// (or the undo of an applied one), by the agent, needing needed people.
func (f *fixture) requestApproval(kind ledger.ApprovalKind, changeID, runID string, needed int) string {
	f.t.Helper()
	f.clock.Advance(time.Second)
	a, err := f.guard.Ledger().RequestApproval(context.Background(), ledger.ApprovalRequest{
		Kind: kind, ChangeID: changeID, RunID: runID, Needed: needed, RequestedBy: "agent:claude", At: f.clock.Now(),
	})
	if err != nil {
		f.t.Fatalf("request approval: %v", err)
	}
	return a.ID
}

// approval reads approval id and the history entries about it.
func (f *fixture) approval(id string) (*ledger.Approval, []ledger.HistoryEntry) {
	f.t.Helper()
	ctx := context.Background()
	a, err := f.guard.Ledger().Approval(ctx, id)
	if err != nil {
		f.t.Fatal(err)
	}
	h, err := f.guard.Ledger().History(ctx, ledger.HistoryFilter{ApprovalID: id})
	if err != nil {
		f.t.Fatal(err)
	}
	return a, h
}

// approvalState is approval id and its decisions, for comparisons.
func (f *fixture) approvalState(id string) string {
	f.t.Helper()
	a, h := f.approval(id)
	decisions, err := f.guard.Ledger().Decisions(context.Background(), id)
	if err != nil {
		f.t.Fatal(err)
	}
	return fmt.Sprintf("%+v %d %+v", *a, len(h), decisions)
}

// approvalLinks returns the approvals a list page links to, in order.
func approvalLinks(body string) []string {
	var ids []string
	for _, m := range regexp.MustCompile(`<a class="title" href="/approvals/(apr_[0-9a-f]{20})"`).FindAllStringSubmatch(body, -1) {
		ids = append(ids, m[1])
	}
	return ids
}

// A person signs in with their own token, finds the approval in the list
// with its diff, approves it over HTTP with the CSRF token, and the ledger
// records the decision as person:ana.
func TestApprovals_APersonApprovesWithCSRFRecordedAsThem(t *testing.T) {
	f := newPeopleFixture(t)
	s := f.build()
	older := f.requestApproval(ledger.ApproveUndo, s.single, "", 1)
	id := f.requestApproval(ledger.ApproveApply, s.pending, "", 1)
	ana := f.web(f.serve())
	home := ana.login(anaToken)
	mustContain(t, "the navigation", home.Body, `<a href="/approvals">Approvals <span class="count">2</span><span class="sr-only"> waiting</span></a>`)

	list := ana.get("/approvals")
	if got, want := approvalLinks(list.Body), []string{id, older}; !slices.Equal(got, want) {
		t.Fatalf("the list links to %v, want newest first %v", got, want)
	}
	mustContain(t, "the list", list.Body, "Apply set_value: Set theme to &#34;solarized&#34;", "Undo set_value: Set volume to &#34;11&#34;",
		`<div class="field" role="rowheader">theme</div>`, "solarized", "0 of 1 approved", "asked by", "agent:claude", "Review and decide")

	mustContain(t, "the change page", ana.get("/changes/"+s.pending).Body, "Apply waits for approval", "0 of 1 approved so far",
		`<a class="button primary" href="/approvals/`+id+`">Review and decide</a>`)
	page := ana.get("/approvals/" + id)
	mustContain(t, "the approval page", page.Body, `action="/approvals/`+id+`/approve"`, `formaction="/approvals/`+id+`/decline"`,
		`<textarea id="note" name="note"`, "Nobody has decided yet.", "recorded", "<code>person:ana</code>")
	res := ana.post("/approvals/"+id+"/approve", url.Values{"note": {"looks right\r\nship it"}})
	if res.Code != http.StatusSeeOther || res.Header.Get("Location") != "/approvals/"+id {
		t.Fatalf("approve = %d to %q:\n%s", res.Code, res.Header.Get("Location"), res.Body)
	}
	a, h := f.approval(id)
	if a.Status != ledger.ApprovalApproved || a.DecidedBy != "person:ana" || a.Note != "looks right\nship it" {
		t.Fatalf("after the approval: %+v", a)
	}
	if last := h[len(h)-1]; last.By != "person:ana" || last.To != "approved" || last.ChangeID != s.pending {
		t.Errorf("the history's entry of the decision is %+v", last)
	}
	after := ana.get("/approvals/" + id)
	mustContain(t, "the page after", after.Body, "Approved by person:ana (1 of 1). The agent may go ahead", "You approved this",
		`<span class="badge st-approved">approved</span>`, "looks right\nship it")
	if strings.Contains(after.Body, `action="/approvals/`+id+`/approve"`) {
		t.Error("the page still offers to decide an approved approval")
	}
	list = ana.get("/approvals")
	if got := approvalLinks(list.Body); !slices.Equal(got, []string{older}) {
		t.Errorf("after the approval the list shows %v, want only %s", got, older)
	}
	mustContain(t, "the navigation after", list.Body, `Approvals <span class="count">1</span>`)
	// The change's timeline says who approved it, and nothing waits.
	changePage := ana.get("/changes/" + s.pending).Body
	mustContain(t, "the change page", changePage, "Approval requested (apply)", "Approved", "person:ana")
	if strings.Contains(changePage, "waits for approval") {
		t.Error("the change page says an approved change waits for approval")
	}
}

// A POST without the session's CSRF token, or with another's, is refused
// with 403 and decides nothing.
func TestApprovals_DecisionWithoutCSRFIs403AndChangesNothing(t *testing.T) {
	f := newPeopleFixture(t)
	s := f.build()
	id := f.requestApproval(ledger.ApproveApply, s.pending, "", 1)
	ana := f.web(f.serve())
	ana.login(anaToken)
	bob := f.web(ana.base)
	bob.login(bobToken)
	before, rows := f.approvalState(id), f.snapshot()
	for _, form := range []url.Values{{"csrf": nil}, {"csrf": {""}}, {"csrf": {"forged"}}, {"csrf": {bob.csrf}}} {
		for _, verdict := range []string{"approve", "decline"} {
			res := ana.post("/approvals/"+id+"/"+verdict, form)
			if res.Code != http.StatusForbidden || !strings.Contains(res.Body, "Nothing was changed") {
				t.Errorf("POST %s with csrf %q = %d, want 403", verdict, form["csrf"], res.Code)
			}
		}
	}
	if f.approvalState(id) != before || f.snapshot() != rows {
		t.Error("a decision without a valid CSRF token changed something")
	}
	// Signed out: 401, nothing changes.
	if res := f.web(ana.base).post("/approvals/"+id+"/approve", url.Values{"csrf": {ana.csrf}}); res.Code != http.StatusUnauthorized {
		t.Errorf("an approval without a session = %d, want 401", res.Code)
	}
	if f.approvalState(id) != before {
		t.Error("an approval without a session changed it")
	}
}

// A two-person approval needs two different people: ana's second approval
// is refused with a clear message and counts once; bob's completes it.
func TestApprovals_TwoPeopleAndOnePersonTwice(t *testing.T) {
	f := newPeopleFixture(t)
	s := f.build()
	id := f.requestApproval(ledger.ApproveApply, s.pending, "", 2)
	base := f.serve()
	ana, bob := f.web(base), f.web(base)
	ana.login(anaToken)
	bob.login(bobToken)
	if res := ana.post("/approvals/"+id+"/approve", nil); res.Code != http.StatusSeeOther {
		t.Fatalf("ana's approval = %d:\n%s", res.Code, res.Body)
	}
	mustContain(t, "the page after ana's approval", ana.get("/approvals/"+id).Body,
		"Approved by person:ana (1 of 2). It waits for 1 more person.", "You approved this", "It waits for 1 more person.")
	before := f.approvalState(id)
	for _, verdict := range []string{"approve", "decline"} {
		res := ana.post("/approvals/"+id+"/"+verdict, url.Values{"note": {"again"}})
		if res.Code != http.StatusConflict {
			t.Fatalf("ana's second %s = %d, want 409", verdict, res.Code)
		}
		mustContain(t, "the refusal", res.Body, "You (person:ana) have already decided this approval", "approving twice counts once", "Nothing was changed.")
	}
	if f.approvalState(id) != before {
		t.Fatal("one person deciding twice changed the approval")
	}
	if a, _ := f.approval(id); a.Approvals != 1 || a.Status != ledger.ApprovalWaiting {
		t.Fatalf("after ana twice: %+v", a)
	}
	mustContain(t, "bob's page", bob.get("/approvals/"+id).Body, "1 of 2 people have approved so far", `action="/approvals/`+id+`/approve"`)
	if res := bob.post("/approvals/"+id+"/approve", nil); res.Code != http.StatusSeeOther {
		t.Fatalf("bob's approval = %d:\n%s", res.Code, res.Body)
	}
	a, h := f.approval(id)
	if a.Status != ledger.ApprovalApproved || a.Approvals != 2 || a.DecidedBy != "person:bob" {
		t.Fatalf("after two people: %+v", a)
	}
	var by []string
	for _, e := range h {
		by = append(by, e.By)
	}
	if want := []string{"agent:claude", "person:ana", "person:bob"}; !slices.Equal(by, want) {
		t.Errorf("the approval's history is made by %v, want %v", by, want)
	}
	mustContain(t, "the decisions", bob.get("/approvals/"+id).Body, "person:ana", "person:bob", "Approved by person:bob (2 of 2)")
	// The agent uses it: the page and the change's timeline say so.
	err := f.guard.Ledger().WithTx(t.Context(), func(tx *ledger.Tx) error {
		_, err := tx.UseApproval(id, ledger.ApprovalUse{Kind: ledger.ApproveApply, ChangeID: s.pending, By: "agent:claude"})
		return err
	})
	if err != nil {
		t.Fatal(err)
	}
	mustContain(t, "the used approval", bob.get("/approvals/"+id).Body, `<span class="badge st-used">used</span>`, "<dt>Used</dt>")
	mustContain(t, "the change page", bob.get("/changes/"+s.pending).Body, "Approved; more people must approve", "Approval used")
	if res := bob.post("/approvals/"+id+"/decline", nil); res.Code != http.StatusConflict || !strings.Contains(res.Body, "This approval was used already, by agent:claude.") {
		t.Errorf("declining a used approval = %d", res.Code)
	}
}

// A decline ends the change as declined, recorded as the person, with
// their note.
func TestApprovals_DeclineEndsTheChange(t *testing.T) {
	f := newPeopleFixture(t)
	s := f.build()
	id := f.requestApproval(ledger.ApproveApply, s.pending, "", 1)
	bob := f.web(f.serve())
	bob.login(bobToken)
	bob.get("/approvals/" + id)
	res := bob.post("/approvals/"+id+"/decline", url.Values{"note": {"not on a Friday"}})
	if res.Code != http.StatusSeeOther {
		t.Fatalf("decline = %d:\n%s", res.Code, res.Body)
	}
	mustContain(t, "the page after", bob.get("/approvals/"+id).Body, "Declined by person:bob. The change is declined and will not be applied.", "not on a Friday")
	rec, err := f.guard.Record(t.Context(), s.pending)
	if err != nil {
		t.Fatal(err)
	}
	if rec.Status != ledger.Declined {
		t.Errorf("the declined change is %s", rec.Status)
	}
	a, h := f.approval(id)
	if a.Status != ledger.ApprovalDeclined || a.DecidedBy != "person:bob" || h[len(h)-1].Note != "decline: not on a Friday" {
		t.Errorf("after the decline: %+v, last entry %+v", a, h[len(h)-1])
	}
	mustContain(t, "the change page", bob.get("/changes/"+s.pending).Body, "Declined; never applied")
}

// An approval past its deadline is not listed and cannot be decided.
func TestApprovals_AnExpiredApprovalCannotBeDecided(t *testing.T) {
	f := newPeopleFixture(t)
	s := f.build()
	f.clock.Advance(time.Second)
	a, err := f.guard.Ledger().RequestApproval(t.Context(), ledger.ApprovalRequest{Kind: ledger.ApproveApply, ChangeID: s.pending,
		RequestedBy: "agent:claude", At: f.clock.Now(), Deadline: f.clock.Now().Add(time.Minute)})
	if err != nil {
		t.Fatal(err)
	}
	ana := f.web(f.serve())
	ana.login(anaToken)
	ana.get("/approvals/" + a.ID)
	f.clock.Advance(2 * time.Minute)
	before := f.approvalState(a.ID)
	for _, verdict := range []string{"approve", "decline"} {
		res := ana.post("/approvals/"+a.ID+"/"+verdict, nil)
		if res.Code != http.StatusConflict {
			t.Fatalf("%s after the deadline = %d, want 409", verdict, res.Code)
		}
		mustContain(t, "the refusal", res.Body, "This approval expired", "Nothing was changed.")
	}
	if f.approvalState(a.ID) != before {
		t.Error("a decision after the deadline changed the approval")
	}
	page := ana.get("/approvals/" + a.ID)
	mustContain(t, "the expired page", page.Body, `<span class="badge st-expired">expired</span>`, "it can no longer be decided")
	if strings.Contains(page.Body, `/approvals/`+a.ID+`/approve"`) {
		t.Error("the page offers to decide an expired approval")
	}
	list := ana.get("/approvals")
	if len(approvalLinks(list.Body)) != 0 || strings.Contains(list.Body, `class="count"`) {
		t.Error("the list or the navigation counts an expired approval")
	}
	mustContain(t, "the empty list", list.Body, "Nothing waits for approval.")
}

// A run undo's approval shows what undoing the run would do.
func TestApprovals_ARunUndoShowsItsPlan(t *testing.T) {
	f := newPeopleFixture(t)
	s := f.build()
	id := f.requestApproval(ledger.ApproveRunUndo, "", s.other, 1)
	before := f.snapshot()
	ana := f.web(f.serve())
	ana.login(anaToken)
	mustContain(t, "the run page", ana.get("/runs/"+s.other).Body, "Undoing this run waits for approval", `href="/approvals/`+id+`">Review and decide</a>`)
	for _, path := range []string{"/approvals", "/approvals/" + id} {
		mustContain(t, path, ana.get(path).Body, "Undo the run: Second task", "Will be undone", "Set colour to &#34;blue&#34;")
	}
	if f.snapshot() != before {
		t.Error("showing a run undo's plan changed the ledger")
	}
	if res := ana.post("/approvals/"+id+"/approve", nil); res.Code != http.StatusSeeOther {
		t.Fatalf("approve = %d:\n%s", res.Code, res.Body)
	}
	if a, _ := f.approval(id); a.Status != ledger.ApprovalApproved || a.DecidedBy != "person:ana" {
		t.Errorf("after approving the run undo: %+v", a)
	}
}

// With the shared login link under the default name, a person can still
// approve (from a phone, say): the decision is recorded as
// person:dashboard, and the page says that the link counts as one person.
func TestApprovals_TheSharedLoginDecidesAsOnePerson(t *testing.T) {
	f := newFixture(t, func(_ *changeset.Options, d *dashboard.Options) { d.Person = "" })
	s := f.build()
	id := f.requestApproval(ledger.ApproveApply, s.pending, "", 2)
	c := f.login()
	page := c.get("/approvals/" + id)
	mustContain(t, "the approval page", page.Body, "<code>person:dashboard</code>", "with the shared login link, everyone counts as that one person")
	mustContain(t, "the list", c.get("/approvals").Body, "You are signed in with the shared login link")
	if res := c.post("/approvals/"+id+"/approve", nil); res.Code != http.StatusSeeOther {
		t.Fatalf("approve = %d:\n%s", res.Code, res.Body)
	}
	other := f.login() // someone else with the same link
	other.get("/approvals/" + id)
	if res := other.post("/approvals/"+id+"/approve", nil); res.Code != http.StatusConflict {
		t.Fatalf("a second approval through the shared link = %d, want 409", res.Code)
	}
	if a, h := f.approval(id); a.Approvals != 1 || h[len(h)-1].By != "person:dashboard" {
		t.Errorf("after two approvals through the shared link: %+v", a)
	}
}

// A note that is too long or holds control characters is refused, with
// the note kept in the form, and nothing is decided.
func TestApprovals_BadNotesAreRefused(t *testing.T) {
	f := newPeopleFixture(t)
	s := f.build()
	id := f.requestApproval(ledger.ApproveApply, s.pending, "", 1)
	ana := f.web(f.serve())
	ana.login(anaToken)
	before := f.approvalState(id)
	for note, want := range map[string]string{
		strings.Repeat("n", ledger.MaxApprovalNote+1): "at most 2000 are allowed",
		"bell\x07": "control characters",
	} {
		res := ana.post("/approvals/"+id+"/approve", url.Values{"note": {note}})
		if res.Code != http.StatusBadRequest {
			t.Fatalf("a bad note = %d, want 400", res.Code)
		}
		mustContain(t, "the refusal", res.Body, want, "Nothing was changed.")
		if kept := visibleNote(note); !strings.Contains(res.Body, `maxlength="2000">`+kept+`</textarea>`) {
			t.Errorf("the refused note %.20q… is not kept in the form", note)
		}
	}
	if f.approvalState(id) != before {
		t.Error("a refused note changed the approval")
	}
	for _, path := range []string{"/approvals/apr_00000000000000000000", "/approvals/nope"} {
		if res := ana.get(path); res.Code != http.StatusNotFound {
			t.Errorf("GET %s = %d, want 404", path, res.Code)
		}
	}
	if res := ana.post("/approvals/apr_00000000000000000000/approve", nil); res.Code != http.StatusNotFound {
		t.Errorf("approving an unknown approval = %d, want 404", res.Code)
	}
}

// visibleNote is a note as the form shows it again: control characters
// made visible (and the plus sign escaped by html/template).
func visibleNote(note string) string { return strings.ReplaceAll(note, "\x07", "⟨U&#43;0007⟩") }

// The list pages newest first with a cursor: no approval is on two pages
// or on none. The navigation counts up to 99, then says "99+".
func TestApprovals_ListPagesWithACursor(t *testing.T) {
	f := newPeopleFixture(t, func(o *changeset.Options, _ *dashboard.Options) { o.TTL = time.Hour })
	var want []string
	for i := range 101 {
		id := f.preview("", "set_value", fmt.Sprintf("key%03d", i), "v")
		f.clock.Advance(-50 * time.Second) // keep the first previews' tokens live
		want = append([]string{f.requestApproval(ledger.ApproveApply, id, "", 1)}, want...)
	}
	ana := f.web(f.serve())
	ana.login(anaToken)
	var got []string
	path := "/approvals"
	for pages := 1; ; pages++ {
		res := ana.get(path)
		ids := approvalLinks(res.Body)
		got = append(got, ids...)
		if pages == 1 {
			mustContain(t, "the first page", res.Body, `<span class="count">99+</span>`)
		} else {
			mustContain(t, "a later page", res.Body, `<a href="/approvals">← Newest</a>`)
		}
		next := regexp.MustCompile(`<a href="(/approvals\?before=apr_[0-9a-f]{20})" rel="next">Older →</a>`).FindStringSubmatch(res.Body)
		if next == nil {
			break
		}
		if len(ids) != 20 || pages > 10 {
			t.Fatalf("page %d shows %d approvals and links to another, want 20", pages, len(ids))
		}
		path = next[1]
	}
	if !slices.Equal(got, want) {
		t.Errorf("the pages list %d approvals %v, want %d %v", len(got), got, len(want), want)
	}
	if res := ana.get("/approvals?before=apr_00000000000000000000"); res.Code != http.StatusBadRequest {
		t.Errorf("a cursor of an unknown approval = %d, want 400", res.Code)
	}
}
