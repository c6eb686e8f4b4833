package ledgertest

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/mcp-changeset/changeset-go/ledger"
	"github.com/mcp-changeset/changeset-go/ledger/driver"
)

func exerciseApprovals(t *testing.T, h Harness) {
	runAll(t, h, []test{
		{"TwoPeopleApproveOnceEachAndTheClaimUsesIt", testApprovalTwoPeople},
		{"AnApprovalIsNeverUsedForAnythingElse", testApprovalNotReusable},
		{"ADeclinedApplyEndsTheChangeDeclined", testApprovalDeclineApply},
		{"ADeclinedUndoLeavesTheChangeApplied", testApprovalDeclineUndo},
		{"ARunUndoIsBoundToItsPlan", testApprovalRunUndo},
		{"RequestsAreCheckedAndDeadlinesCut", testApprovalRequests},
		{"WaitingApprovalsPageNewestFirst", testApprovalPaging},
		{"ExpireAndPruneTakeApprovalsAlong", testApprovalExpireAndPrune},
		{"TwoHandlesDecidingAtOnce", testApprovalConcurrentDecisions},
	})
}

// approvableChange stores a pending change with a payload hash, created
// at t0, whose token expires a minute later.
func approvableChange(t *testing.T, l *ledger.Ledger, id string) *ledger.Change {
	t.Helper()
	c := pendingChange(id, t0)
	c.PayloadHash, c.Summary, c.PreviewedBy = ledger.Digest("payload-"+id), "set x to 1", "agent:alice"
	c.Payload = json.RawMessage(`{"secret_value":"p4yl0ad"}`)
	insertChanges(t, l, c)
	return c
}

// appliedChange stores an applied, undoable change with a live undo token
// that expires an hour after t0.
func appliedChange(t *testing.T, l *ledger.Ledger, id string) *ledger.Change {
	t.Helper()
	c := pendingChange(id, t0)
	c.Status, c.ConfirmHash, c.PayloadHash = ledger.Applied, "", ledger.Digest("payload-"+id)
	c.Undoable, c.UndoHash, c.AppliedAt, c.UndoExpiresAt = true, "undo-"+ledger.Digest(id), t0, t0.Add(time.Hour)
	insertChanges(t, l, c)
	return c
}

func request(t *testing.T, l *ledger.Ledger, req ledger.ApprovalRequest) *ledger.Approval {
	t.Helper()
	if req.RequestedBy == "" {
		req.RequestedBy = "agent:alice"
	}
	a, err := l.RequestApproval(context.Background(), req)
	if err != nil {
		t.Fatalf("RequestApproval(%+v): %v", req, err)
	}
	return a
}

func decide(t *testing.T, l *ledger.Ledger, id, person string, v ledger.Verdict, note string) *ledger.Approval {
	t.Helper()
	a, err := l.Decide(context.Background(), ledger.Decision{ApprovalID: id, Person: person, Verdict: v, Note: note, At: sec(1)})
	if err != nil {
		t.Fatalf("%s %s %s: %v", person, v, id, err)
	}
	return a
}

// use runs UseApproval in a transaction of its own, committed only when
// it succeeds.
func use(l *ledger.Ledger, id string, u ledger.ApprovalUse) (*ledger.Approval, error) {
	var out *ledger.Approval
	err := l.WithTx(context.Background(), func(tx *ledger.Tx) error {
		var err error
		out, err = tx.UseApproval(id, u)
		return err
	})
	return out, err
}

// historyOf lists an approval's history as "from→to by (note)".
func historyOf(t *testing.T, l *ledger.Ledger, id string) []string {
	t.Helper()
	es, err := l.History(context.Background(), ledger.HistoryFilter{ApprovalID: id})
	if err != nil {
		t.Fatal(err)
	}
	var out []string
	for _, e := range es {
		if e.ApprovalID != id {
			t.Errorf("History(ApprovalID %s) returned an entry of %q", id, e.ApprovalID)
		}
		out = append(out, fmt.Sprintf("%s→%s by %s (%s)", e.From, e.To, e.By, e.Note))
	}
	return out
}

// bodies reads the outbox's events named name, decoded.
func bodies(t *testing.T, l *ledger.Ledger, name string) []ledger.EventBody {
	t.Helper()
	es, err := l.Events(context.Background(), ledger.EventFilter{Name: name})
	if err != nil {
		t.Fatal(err)
	}
	var out []ledger.EventBody
	for _, e := range es {
		if strings.Contains(string(e.Body), "p4yl0ad") || strings.Contains(string(e.Body), "confirm-") || strings.Contains(string(e.Body), "undo-") {
			t.Errorf("event %s carries a payload or a token digest: %s", e.ID, e.Body)
		}
		var b ledger.EventBody
		if err := json.Unmarshal(e.Body, &b); err != nil {
			t.Fatalf("event %s: %v", e.ID, err)
		}
		if b.ID != e.ID || b.Event != e.Name {
			t.Errorf("event %s: body names %s %s", e.ID, b.ID, b.Event)
		}
		out = append(out, b)
	}
	return out
}

func testApprovalTwoPeople(t *testing.T, h Harness) {
	l, _ := open(t, h)
	c := approvableChange(t, l, "chg_1")
	a := request(t, l, ledger.ApprovalRequest{Kind: ledger.ApproveApply, ChangeID: c.ID, Needed: 2, At: t0})
	if !strings.HasPrefix(a.ID, "apr_") || len(a.ID) != 24 || a.Status != ledger.ApprovalWaiting || a.Needed != 2 ||
		a.BoundHash != c.PayloadHash || !a.Deadline.Equal(c.ExpiresAt) || a.RequestedBy != "agent:alice" {
		t.Fatalf("requested %+v", a)
	}
	if again := request(t, l, ledger.ApprovalRequest{Kind: ledger.ApproveApply, ChangeID: c.ID, Needed: 2, At: sec(2)}); again.ID != a.ID {
		t.Errorf("a second request made %s beside the waiting %s", again.ID, a.ID)
	}
	if got := decide(t, l, a.ID, "person:ann", ledger.Approve, "fine"); got.Status != ledger.ApprovalWaiting || got.Approvals != 1 {
		t.Errorf("after one of two: %+v", got)
	}
	_, err := l.Decide(context.Background(), ledger.Decision{ApprovalID: a.ID, Person: "person:ann", Verdict: ledger.Approve, At: sec(2)})
	if !errors.Is(err, ledger.ErrDecided) {
		t.Errorf("ann approving twice: %v, want ErrDecided", err)
	}
	if _, err := use(l, a.ID, ledger.ApprovalUse{Kind: ledger.ApproveApply, ChangeID: c.ID, At: sec(2)}); !errors.Is(err, ledger.ErrApprovalWaiting) {
		t.Errorf("use after one approval of two: %v, want ErrApprovalWaiting", err)
	}
	got := decide(t, l, a.ID, "person:bob", ledger.Approve, "go")
	if got.Status != ledger.ApprovalApproved || got.Approvals != 2 || got.DecidedBy != "person:bob" || got.Note != "go" || !got.DecidedAt.Equal(storedTime(sec(1))) {
		t.Errorf("after two of two: %+v", got)
	}
	ds, err := l.Decisions(context.Background(), a.ID)
	if err != nil || len(ds) != 2 || ds[0].Person != "person:ann" || ds[1].Person != "person:bob" || ds[0].Verdict != ledger.Approve || ds[0].Note != "fine" {
		t.Errorf("decisions: %+v, %v", ds, err)
	}
	used, err := use(l, a.ID, ledger.ApprovalUse{Kind: ledger.ApproveApply, ChangeID: c.ID, By: "agent:alice", At: sec(3)})
	if err != nil || used.Status != ledger.ApprovalUsed || used.UsedBy != "agent:alice" {
		t.Fatalf("use: %+v, %v", used, err)
	}
	if stored, _ := l.Approval(context.Background(), a.ID); stored.Status != ledger.ApprovalUsed || !stored.UsedAt.Equal(storedTime(sec(3))) {
		t.Errorf("stored after use: %+v", stored)
	}
	if _, err := use(l, a.ID, ledger.ApprovalUse{Kind: ledger.ApproveApply, ChangeID: c.ID, At: sec(4)}); !errors.Is(err, ledger.ErrApprovalUsed) {
		t.Errorf("second use: %v, want ErrApprovalUsed", err)
	}
	want := []string{"→waiting by agent:alice (apply)", "waiting→waiting by person:ann (approve: fine)",
		"waiting→approved by person:bob (approve: go)", "approved→used by agent:alice ()"}
	if got := historyOf(t, l, a.ID); strings.Join(got, "\n") != strings.Join(want, "\n") {
		t.Errorf("history:\n%s\nwant\n%s", strings.Join(got, "\n"), strings.Join(want, "\n"))
	}
	req, appr := bodies(t, l, ledger.EventApprovalRequested), bodies(t, l, ledger.EventApprovalApproved)
	if len(req) != 1 || req[0].ApprovalID != a.ID || req[0].ChangeID != c.ID || req[0].Action != "a" || req[0].Summary != "set x to 1" || req[0].RequestedBy != "agent:alice" {
		t.Errorf("approval.requested events: %+v", req)
	}
	if len(appr) != 1 || appr[0].DecidedBy != "person:bob" || appr[0].ApprovalID != a.ID {
		t.Errorf("approval.approved events: %+v", appr)
	}
	if problems, err := l.Check(context.Background()); err != nil || len(problems) != 0 {
		t.Errorf("Check: %q, %v", problems, err)
	}
}

func testApprovalNotReusable(t *testing.T, h Harness) {
	ctx := context.Background()
	l, _ := open(t, h)
	c := approvableChange(t, l, "chg_1")
	other := approvableChange(t, l, "chg_2")
	a := request(t, l, ledger.ApprovalRequest{Kind: ledger.ApproveApply, ChangeID: c.ID, At: t0, Deadline: sec(30)})
	decide(t, l, a.ID, "person:ann", ledger.Approve, "")
	for name, u := range map[string]ledger.ApprovalUse{
		"another change":      {Kind: ledger.ApproveApply, ChangeID: other.ID, At: sec(2)},
		"another kind":        {Kind: ledger.ApproveUndo, ChangeID: c.ID, At: sec(2)},
		"a run":               {Kind: ledger.ApproveRunUndo, RunID: "run_1", At: sec(2)},
		"after its deadline":  {Kind: ledger.ApproveApply, ChangeID: c.ID, At: sec(30)},
		"long after deadline": {Kind: ledger.ApproveApply, ChangeID: c.ID, At: sec(3600)},
	} {
		want := ledger.ErrApprovalMismatch
		if strings.Contains(name, "deadline") {
			want = ledger.ErrApprovalExpired
		}
		if got, err := use(l, a.ID, u); !errors.Is(err, want) || got == nil || got.ID != a.ID {
			t.Errorf("use for %s: %v, want %v and the approval", name, err, want)
		}
	}
	// A claim that fails after the use rolls the use back with it.
	boom := errors.New("the claim failed")
	err := l.WithTx(ctx, func(tx *ledger.Tx) error {
		if _, err := tx.UseApproval(a.ID, ledger.ApprovalUse{Kind: ledger.ApproveApply, ChangeID: c.ID, At: sec(2)}); err != nil {
			return err
		}
		return boom
	})
	if !errors.Is(err, boom) {
		t.Fatal(err)
	}
	if got, _ := l.Approval(ctx, a.ID); got.Status != ledger.ApprovalApproved {
		t.Errorf("after a rolled back claim: %s, want approved", got.Status)
	}
	// The payload edited in the ledger: the approval no longer applies.
	edited := mustGet(t, l, c.ID)
	edited.PayloadHash = "payload-edited"
	if err := driver.BackendOf(l).UpdateChange(ctx, l.DB(), edited, ledger.Pending); err != nil {
		t.Fatal(err)
	}
	if _, err := use(l, a.ID, ledger.ApprovalUse{Kind: ledger.ApproveApply, ChangeID: c.ID, At: sec(2)}); !errors.Is(err, ledger.ErrApprovalMismatch) {
		t.Errorf("use after the payload changed: %v, want ErrApprovalMismatch", err)
	}
	if got, _ := l.Approval(ctx, a.ID); got.Status != ledger.ApprovalApproved {
		t.Errorf("refused uses changed the approval: %s", got.Status)
	}
	if _, err := use(l, "apr_00000000000000000000", ledger.ApprovalUse{Kind: ledger.ApproveApply, ChangeID: c.ID}); !errors.Is(err, ledger.ErrNotFound) {
		t.Errorf("use of a missing approval: %v, want ErrNotFound", err)
	}
}

func testApprovalDeclineApply(t *testing.T, h Harness) {
	ctx := context.Background()
	l, _ := open(t, h)
	c := approvableChange(t, l, "chg_1")
	a := request(t, l, ledger.ApprovalRequest{Kind: ledger.ApproveApply, ChangeID: c.ID, Needed: 2, At: t0})
	decide(t, l, a.ID, "person:ann", ledger.Approve, "")
	got := decide(t, l, a.ID, "person:bob", ledger.Decline, "not on a Friday")
	if got.Status != ledger.ApprovalDeclined || got.DecidedBy != "person:bob" || got.Note != "not on a Friday" || got.Approvals != 1 {
		t.Errorf("declined: %+v", got)
	}
	changed := mustGet(t, l, c.ID)
	if changed.Status != ledger.Declined || changed.ConfirmHash != "" || !changed.UpdatedAt.Equal(storedTime(sec(1))) {
		t.Errorf("the change after the decline: %s, confirm %q, updated %v", changed.Status, changed.ConfirmHash, changed.UpdatedAt)
	}
	es, err := l.History(ctx, ledger.HistoryFilter{ChangeID: c.ID})
	if err != nil {
		t.Fatal(err)
	}
	last := es[len(es)-1]
	if last.ApprovalID != "" || last.From != "pending" || last.To != "declined" || last.By != "person:bob" {
		t.Errorf("the change's last entry: %+v", last)
	}
	if _, err := l.Decide(ctx, ledger.Decision{ApprovalID: a.ID, Person: "person:cy", Verdict: ledger.Approve, At: sec(2)}); !errors.Is(err, ledger.ErrApprovalDeclined) {
		t.Errorf("a decision after the decline: %v, want ErrApprovalDeclined", err)
	}
	if _, err := use(l, a.ID, ledger.ApprovalUse{Kind: ledger.ApproveApply, ChangeID: c.ID, At: sec(2)}); !errors.Is(err, ledger.ErrApprovalDeclined) {
		t.Errorf("use after the decline: %v, want ErrApprovalDeclined", err)
	}
	if ev := bodies(t, l, ledger.EventApprovalDeclined); len(ev) != 1 || ev[0].DecidedBy != "person:bob" || ev[0].ChangeID != c.ID {
		t.Errorf("approval.declined events: %+v", ev)
	}
	if problems, err := l.Check(ctx); err != nil || len(problems) != 0 {
		t.Errorf("Check: %q, %v", problems, err)
	}
	// No agent, and nobody unnamed, decides.
	other := approvableChange(t, l, "chg_2")
	b := request(t, l, ledger.ApprovalRequest{Kind: ledger.ApproveApply, ChangeID: other.ID, At: t0})
	for _, who := range []string{"agent:alice", "", "person:", "ann", "person:a\x1bnn"} {
		if _, err := l.Decide(ctx, ledger.Decision{ApprovalID: b.ID, Person: who, Verdict: ledger.Approve}); err == nil {
			t.Errorf("%q approved", who)
		}
	}
	if _, err := l.Decide(ctx, ledger.Decision{ApprovalID: b.ID, Person: "person:ann", Verdict: "maybe"}); err == nil {
		t.Error("a verdict of maybe was accepted")
	}
	if got, _ := l.Approval(ctx, b.ID); got.Status != ledger.ApprovalWaiting || got.Approvals != 0 {
		t.Errorf("refused decisions changed the approval: %+v", got)
	}
}

func testApprovalDeclineUndo(t *testing.T, h Harness) {
	l, _ := open(t, h)
	c := appliedChange(t, l, "chg_1")
	a := request(t, l, ledger.ApprovalRequest{Kind: ledger.ApproveUndo, ChangeID: c.ID, At: t0})
	if !a.Deadline.Equal(storedTime(c.UndoExpiresAt)) || a.BoundHash != c.PayloadHash {
		t.Errorf("undo approval: %+v", a)
	}
	decide(t, l, a.ID, "person:ann", ledger.Decline, "keep it")
	if got := mustGet(t, l, c.ID); got.Status != ledger.Applied || got.UndoHash == "" {
		t.Errorf("after a declined undo the change is %s (undo digest kept: %t), want applied with its undo token", got.Status, got.UndoHash != "")
	}
	// A new request after a decline is a new approval.
	if b := request(t, l, ledger.ApprovalRequest{Kind: ledger.ApproveUndo, ChangeID: c.ID, At: sec(2)}); b.ID == a.ID || b.Status != ledger.ApprovalWaiting {
		t.Errorf("request after the decline: %+v", b)
	}
}

func testApprovalRunUndo(t *testing.T, h Harness) {
	ctx := context.Background()
	l, _ := open(t, h)
	r := &ledger.Run{ID: "run_1", Label: "migrate prices", Status: ledger.RunOpen, PlanHash: "plan-1", ConfirmHash: "confirm-run",
		ConfirmExpiresAt: sec(300), CreatedAt: t0, UpdatedAt: t0}
	if err := driver.BackendOf(l).InsertRun(ctx, l.DB(), r); err != nil {
		t.Fatal(err)
	}
	if _, err := l.RequestApproval(ctx, ledger.ApprovalRequest{Kind: ledger.ApproveRunUndo, ChangeID: "chg_1", RequestedBy: "agent:a"}); err == nil {
		t.Error("a run undo approval naming a change was accepted")
	}
	a := request(t, l, ledger.ApprovalRequest{Kind: ledger.ApproveRunUndo, RunID: r.ID, At: t0, Deadline: sec(9999)})
	if a.BoundHash != "plan-1" || !a.Deadline.Equal(storedTime(sec(300))) || a.ChangeID != "" {
		t.Errorf("run undo approval: %+v", a)
	}
	decide(t, l, a.ID, "person:ann", ledger.Approve, "")
	if _, err := use(l, a.ID, ledger.ApprovalUse{Kind: ledger.ApproveRunUndo, RunID: r.ID, PlanHash: "plan-2", At: sec(2)}); !errors.Is(err, ledger.ErrApprovalMismatch) {
		t.Errorf("use with another plan: %v, want ErrApprovalMismatch", err)
	}
	// A new dry run stored another plan.
	r.PlanHash, r.UpdatedAt = "plan-2", sec(2)
	if err := l.WithTx(ctx, func(tx *ledger.Tx) error { return tx.UpdateRun(r, ledger.RunOpen) }); err != nil {
		t.Fatal(err)
	}
	if _, err := use(l, a.ID, ledger.ApprovalUse{Kind: ledger.ApproveRunUndo, RunID: r.ID, At: sec(3)}); !errors.Is(err, ledger.ErrApprovalMismatch) {
		t.Errorf("use after the plan changed: %v, want ErrApprovalMismatch", err)
	}
	b := request(t, l, ledger.ApprovalRequest{Kind: ledger.ApproveRunUndo, RunID: r.ID, At: sec(3)})
	decide(t, l, b.ID, "person:ann", ledger.Approve, "")
	if got, err := use(l, b.ID, ledger.ApprovalUse{Kind: ledger.ApproveRunUndo, RunID: r.ID, PlanHash: "plan-2", At: sec(4)}); err != nil || got.Status != ledger.ApprovalUsed {
		t.Errorf("use of the approval of the new plan: %+v, %v", got, err)
	}
	got, err := l.Approvals(ctx, ledger.ApprovalFilter{RunID: r.ID})
	if err != nil || len(got) != 2 || got[0].ID != b.ID || got[1].ID != a.ID {
		t.Errorf("approvals of the run: %+v, %v", got, err)
	}
	if ev := bodies(t, l, ledger.EventApprovalRequested); len(ev) != 2 || ev[0].RunID != r.ID || ev[0].Summary != "migrate prices" || ev[0].Action != "undo_run" {
		t.Errorf("approval.requested events of the run: %+v", ev)
	}
}

func testApprovalRequests(t *testing.T, h Harness) {
	ctx := context.Background()
	l, _ := open(t, h)
	c := approvableChange(t, l, "chg_1")
	undone := appliedChange(t, l, "chg_2")
	for name, req := range map[string]ledger.ApprovalRequest{
		"an unknown kind":           {Kind: "publish", ChangeID: c.ID},
		"no change":                 {Kind: ledger.ApproveApply},
		"a change and a run":        {Kind: ledger.ApproveApply, ChangeID: c.ID, RunID: "run_1"},
		"too many people":           {Kind: ledger.ApproveApply, ChangeID: c.ID, Needed: ledger.MaxApprovers + 1},
		"nobody asking":             {Kind: ledger.ApproveApply, ChangeID: c.ID, RequestedBy: "\x00"},
		"the apply of an applied":   {Kind: ledger.ApproveApply, ChangeID: undone.ID},
		"the undo of a pending":     {Kind: ledger.ApproveUndo, ChangeID: c.ID},
		"a token already expired":   {Kind: ledger.ApproveApply, ChangeID: c.ID, At: sec(60)},
		"a deadline already passed": {Kind: ledger.ApproveApply, ChangeID: c.ID, At: sec(10), Deadline: sec(5)},
		"a missing change":          {Kind: ledger.ApproveApply, ChangeID: "chg_missing"},
	} {
		if req.RequestedBy == "" {
			req.RequestedBy = "agent:alice"
		}
		if a, err := l.RequestApproval(ctx, req); err == nil {
			t.Errorf("a request for %s was accepted: %+v", name, a)
		}
	}
	got, err := l.Approvals(ctx, ledger.ApprovalFilter{})
	if err != nil || len(got) != 0 {
		t.Errorf("refused requests stored approvals: %+v, %v", got, err)
	}
	a := request(t, l, ledger.ApprovalRequest{Kind: ledger.ApproveApply, ChangeID: c.ID, At: t0, Deadline: sec(20)})
	if !a.Deadline.Equal(storedTime(sec(20))) || a.Needed != 1 {
		t.Errorf("a deadline before the token's expiry is kept: %+v", a)
	}
	// An undo that never expires takes the caller's deadline.
	forever := appliedChange(t, l, "chg_3")
	forever.UndoExpiresAt = time.Time{}
	if err := driver.BackendOf(l).UpdateChange(ctx, l.DB(), forever, ledger.Applied); err != nil {
		t.Fatal(err)
	}
	if _, err := l.RequestApproval(ctx, ledger.ApprovalRequest{Kind: ledger.ApproveUndo, ChangeID: forever.ID, RequestedBy: "agent:a", At: t0}); err == nil {
		t.Error("an undo that never expires was approved without a deadline")
	}
	if b := request(t, l, ledger.ApprovalRequest{Kind: ledger.ApproveUndo, ChangeID: forever.ID, At: t0, Deadline: sec(900)}); !b.Deadline.Equal(storedTime(sec(900))) {
		t.Errorf("undo that never expires: deadline %v", b.Deadline)
	}
}

func testApprovalPaging(t *testing.T, h Harness) {
	ctx := context.Background()
	l, _ := open(t, h)
	var ids []string // newest first
	for i := range 7 {
		c := approvableChange(t, l, fmt.Sprintf("chg_%d", i))
		a := request(t, l, ledger.ApprovalRequest{Kind: ledger.ApproveApply, ChangeID: c.ID, At: t0.Add(time.Duration(i) * time.Millisecond)})
		ids = append([]string{a.ID}, ids...)
	}
	decide(t, l, ids[2], "person:ann", ledger.Approve, "") // no longer waiting
	want := append(append([]string{}, ids[:2]...), ids[3:]...)
	var got []string
	f := ledger.ApprovalFilter{Statuses: []ledger.ApprovalStatus{ledger.ApprovalWaiting}, Limit: 2}
	for {
		page, err := l.Approvals(ctx, f)
		if err != nil {
			t.Fatal(err)
		}
		for _, a := range page {
			got = append(got, a.ID)
		}
		if len(page) < f.Limit {
			break
		}
		last := page[len(page)-1]
		f.Before = &ledger.ChangeKey{CreatedAt: last.CreatedAt, ID: last.ID}
	}
	if strings.Join(got, " ") != strings.Join(want, " ") {
		t.Errorf("waiting approvals, a page of 2 at a time:\n got %v\nwant %v", got, want)
	}
	one, err := l.Approvals(ctx, ledger.ApprovalFilter{ChangeID: "chg_3"})
	if err != nil || len(one) != 1 || one[0].ID != ids[3] {
		t.Errorf("approvals of chg_3: %+v, %v", one, err)
	}
}

func testApprovalExpireAndPrune(t *testing.T, h Harness) {
	ctx := context.Background()
	l, clk := open(t, h)
	c := approvableChange(t, l, "chg_1")
	waiting := request(t, l, ledger.ApprovalRequest{Kind: ledger.ApproveApply, ChangeID: c.ID, At: t0, Deadline: sec(10)})
	d := approvableChange(t, l, "chg_2")
	approved := request(t, l, ledger.ApprovalRequest{Kind: ledger.ApproveApply, ChangeID: d.ID, At: t0, Deadline: sec(10)})
	decide(t, l, approved.ID, "person:ann", ledger.Approve, "")
	late := approvableChange(t, l, "chg_3")
	live := request(t, l, ledger.ApprovalRequest{Kind: ledger.ApproveApply, ChangeID: late.ID, At: t0})
	if s := waiting.StatusAt(sec(10)); s != ledger.ApprovalExpired {
		t.Errorf("StatusAt the deadline = %s, want expired", s)
	}
	if _, err := l.Decide(ctx, ledger.Decision{ApprovalID: waiting.ID, Person: "person:ann", Verdict: ledger.Approve, At: sec(10)}); !errors.Is(err, ledger.ErrApprovalExpired) {
		t.Errorf("a decision at the deadline: %v, want ErrApprovalExpired", err)
	}
	clk.Set(sec(10))
	ids, err := l.ExpireApprovals(ctx)
	if err != nil || !sameIDs(ids, waiting.ID, approved.ID) {
		t.Errorf("ExpireApprovals = %v, %v; want %s and %s", ids, err, waiting.ID, approved.ID)
	}
	if got, _ := l.Approval(ctx, live.ID); got.Status != ledger.ApprovalWaiting {
		t.Errorf("an approval before its deadline was expired: %s", got.Status)
	}
	if h := historyOf(t, l, waiting.ID); len(h) != 2 || h[1] != "waiting→expired by  ()" {
		t.Errorf("history of the expired approval: %q", h)
	}
	// A declined change goes with its approvals and their decisions.
	decide(t, l, live.ID, "person:ann", ledger.Decline, "no")
	clk.Set(t0.Add(1000 * day))
	if _, err := l.ExpireStale(ctx); err != nil {
		t.Fatal(err)
	}
	clk.Set(t0.Add(1001 * day))
	res, err := l.Prune(ctx, ledger.PruneOptions{})
	if err != nil || !sameIDs(res.Changes, c.ID, d.ID, late.ID) {
		t.Fatalf("Prune = %v, %v", res.Changes, err)
	}
	for _, id := range []string{waiting.ID, approved.ID, live.ID} {
		if _, err := l.Approval(ctx, id); !errors.Is(err, ledger.ErrNotFound) {
			t.Errorf("approval %s after its change was pruned: %v", id, err)
		}
	}
	if ds, err := l.Decisions(ctx, live.ID); err != nil || len(ds) != 0 {
		t.Errorf("decisions after the prune: %+v, %v", ds, err)
	}
	if problems, err := l.Check(ctx); err != nil || len(problems) != 0 {
		t.Errorf("Check: %q, %v", problems, err)
	}
}

// testApprovalConcurrentDecisions decides one approval from two handles at
// once, as two dashboards would: distinct people both count, and one
// person deciding twice at once counts once.
func testApprovalConcurrentDecisions(t *testing.T, h Harness) {
	if h.OpenSecond == nil {
		t.Skip("the harness opens no second handle")
	}
	ctx := context.Background()
	l, _ := open(t, h)
	l2 := second(t, h, l)
	for round := range 5 {
		c := approvableChange(t, l, fmt.Sprintf("chg_%d", round))
		a := request(t, l, ledger.ApprovalRequest{Kind: ledger.ApproveApply, ChangeID: c.ID, Needed: 3, At: t0})
		people := []string{"person:ann", "person:bob", "person:ann"}
		errs := make(chan error, len(people))
		for i, p := range people {
			go func() {
				_, err := []*ledger.Ledger{l, l2}[i%2].Decide(ctx, ledger.Decision{ApprovalID: a.ID, Person: p, Verdict: ledger.Approve, At: sec(1)})
				errs <- err
			}()
		}
		decided := 0
		for range people {
			switch err := <-errs; {
			case err == nil:
				decided++
			case !errors.Is(err, ledger.ErrDecided):
				t.Errorf("round %d: %v", round, err)
			}
		}
		got, err := l.Approval(ctx, a.ID)
		if err != nil || decided != 2 || got.Approvals != 2 || got.Status != ledger.ApprovalWaiting {
			t.Errorf("round %d: %d decisions went through; stored %+v, %v; want 2 and still waiting", round, decided, got, err)
		}
	}
}
