package main

import (
	"context"
	"encoding/json"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	changeset "github.com/mcp-changeset/changeset-go"
	"github.com/mcp-changeset/changeset-go/internal/pgtest"
	"github.com/mcp-changeset/changeset-go/ledger"
)

// approvalFixture fills the ledger at target (a SQLite path or a
// PostgreSQL URL, created) with approvals in every state, made through
// the ledger's API, and returns their IDs and their changes' IDs by role:
// "apply" (one person), "two" (two people), "undo" (the undo of an applied
// change), "expired", "used" and "declined".
func approvalFixture(t *testing.T, target string) map[string]string {
	t.Helper()
	ctx := context.Background()
	l, err := ledger.Open(ctx, target, ledger.OpenOptions{Create: true})
	if err != nil {
		t.Fatal(err)
	}
	defer l.Close()
	g, err := changeset.New(nil, changeset.Options{Ledger: l, WriteMode: changeset.WriteGuarded, TTL: time.Hour})
	if err != nil {
		t.Fatal(err)
	}
	registerOps(g, &store{m: map[string]string{}})
	ids := map[string]string{}
	now := time.Now()
	preview := func(role string) (string, string) {
		t.Helper()
		p, err := g.Preview(ctx, "set", setIn{Key: role, Value: "v"})
		if err != nil {
			t.Fatal(err)
		}
		addSecret("the confirmation token of "+role, p.ConfirmationToken)
		ids[role+"_change"] = p.ChangeID
		return p.ChangeID, p.ConfirmationToken
	}
	request := func(role string, req ledger.ApprovalRequest) *ledger.Approval {
		t.Helper()
		if req.RequestedBy == "" {
			req.RequestedBy = "agent:claude"
		}
		a, err := l.RequestApproval(ctx, req)
		if err != nil {
			t.Fatalf("request %s: %v", role, err)
		}
		ids[role] = a.ID
		return a
	}
	decide := func(id, person string, v ledger.Verdict) {
		t.Helper()
		if _, err := l.Decide(ctx, ledger.Decision{ApprovalID: id, Person: person, Verdict: v}); err != nil {
			t.Fatal(err)
		}
	}

	id, _ := preview("expired")
	request("expired", ledger.ApprovalRequest{Kind: ledger.ApproveApply, ChangeID: id, At: now.Add(-time.Hour), Deadline: now.Add(-59 * time.Minute)})
	id, _ = preview("used")
	a := request("used", ledger.ApprovalRequest{Kind: ledger.ApproveApply, ChangeID: id, At: now.Add(-5 * time.Minute)})
	decide(a.ID, "person:carol", ledger.Approve)
	err = l.WithTx(ctx, func(tx *ledger.Tx) error {
		_, err := tx.UseApproval(a.ID, ledger.ApprovalUse{Kind: ledger.ApproveApply, ChangeID: id, By: "agent:claude"})
		return err
	})
	if err != nil {
		t.Fatal(err)
	}
	id, _ = preview("declined")
	a = request("declined", ledger.ApprovalRequest{Kind: ledger.ApproveApply, ChangeID: id, At: now.Add(-4 * time.Minute)})
	decide(a.ID, "person:carol", ledger.Decline)

	id, tok := preview("undo")
	res, err := g.Apply(ctx, id, tok)
	if err != nil {
		t.Fatal(err)
	}
	addSecret("the undo token of undo", res.UndoToken)
	request("undo", ledger.ApprovalRequest{Kind: ledger.ApproveUndo, ChangeID: id, At: now.Add(-3 * time.Minute)})
	id, _ = preview("two")
	request("two", ledger.ApprovalRequest{Kind: ledger.ApproveApply, ChangeID: id, Needed: 2, At: now.Add(-2 * time.Minute), RequestedBy: "agent:codex"})
	id, _ = preview("apply")
	request("apply", ledger.ApprovalRequest{Kind: ledger.ApproveApply, ChangeID: id, At: now.Add(-time.Minute)})
	return ids
}

// approvalsJSON runs approvals --json on target and returns what it
// printed.
func approvalsJSON(t *testing.T, target string) []approvalView {
	t.Helper()
	r := run(t, []string{LedgerEnv + "=" + target}, "approvals", "--json")
	want(t, r, exitOK)
	var doc struct {
		Approvals []approvalView `json:"approvals"`
	}
	if err := json.Unmarshal([]byte(r.stdout), &doc); err != nil {
		t.Fatalf("approvals --json: %v\n%s", err, r)
	}
	return doc.Approvals
}

// approvalIDs returns the IDs of vs, in order.
func approvalIDs(vs []approvalView) []string {
	out := make([]string, len(vs))
	for i, v := range vs {
		out[i] = v.ApprovalID
	}
	return out
}

// readApproval reads approval id and the history entries about it.
func readApproval(t *testing.T, target, id string) (*ledger.Approval, []ledger.HistoryEntry) {
	t.Helper()
	ctx := context.Background()
	l, err := ledger.Open(ctx, target, ledger.OpenOptions{ReadOnly: true})
	if err != nil {
		t.Fatal(err)
	}
	defer l.Close()
	a, err := l.Approval(ctx, id)
	if err != nil {
		t.Fatal(err)
	}
	h, err := l.History(ctx, ledger.HistoryFilter{ApprovalID: id})
	if err != nil {
		t.Fatal(err)
	}
	return a, h
}

func TestApprovals_ListsTheWaitingNewestFirst(t *testing.T) {
	t.Parallel()
	path := filepath.Join(t.TempDir(), "ledger.db")
	ids := approvalFixture(t, path)
	got := approvalsJSON(t, path)
	if want := []string{ids["apply"], ids["two"], ids["undo"]}; !slices.Equal(approvalIDs(got), want) {
		t.Fatalf("approvals --json lists %v, want apply, two, undo: %v", approvalIDs(got), want)
	}
	two := got[1]
	if two.Kind != "apply" || two.ChangeID != ids["two_change"] || two.Action != "set" || two.Summary != "Set two to v" ||
		two.RequestedBy != "agent:codex" || two.Needed != 2 || two.Approvals != 0 || two.Status != "waiting" ||
		time.Time(two.Deadline).IsZero() {
		t.Errorf("the two-person approval is listed as %+v", two)
	}
	if got[2].Kind != "undo" || got[2].Action != "undo set" {
		t.Errorf("the undo approval is listed as %+v", got[2])
	}

	r := runL(t, path, "approvals")
	want(t, r, exitOK, "ID", "ACTION", "DEADLINE", ids["apply"], ids["two"], "0 of 2", "undo set", "agent:codex", "Set two to v", "(in ")
	for _, role := range []string{"expired", "used", "declined"} {
		if strings.Contains(r.stdout, ids[role]) {
			t.Errorf("approvals lists the %s approval:\n%s", role, r.stdout)
		}
	}
	r = runL(t, path, "approvals", "--limit", "1")
	want(t, r, exitOK, ids["apply"])
	if strings.Contains(r.stdout, ids["two"]) || !strings.Contains(r.stderr, "showing the newest 1 approvals") {
		t.Errorf("approvals --limit 1 did not cut the list with a note:\n%s", r)
	}
}

func TestApprovals_EmptyLedger(t *testing.T) {
	t.Parallel()
	f := populate(t)
	want(t, runL(t, f.path, "approvals"), exitOK, "no approvals waiting")
	want(t, runL(t, f.path, "approvals", "--json"), exitOK, `"approvals": []`)
}

func TestApproveDecline_WithoutYesOnlySayWhatWouldHappen(t *testing.T) {
	t.Parallel()
	path := filepath.Join(t.TempDir(), "ledger.db")
	ids := approvalFixture(t, path)
	before := readFile(t, path)
	for _, tc := range []struct {
		args []string
		out  []string
	}{
		{[]string{"approve", ids["apply"], "--as", "alice"}, []string{"would approve approval " + ids["apply"] + " as person:alice", "0 of 1 → 1 of 1; approved: the agent's set may go ahead", "--yes"}},
		{[]string{"approve", ids["two"], "--as", "alice", "--note", "looks right"}, []string{"0 of 2 → 1 of 2; still waiting for 1 more person", "looks right (person:alice)"}},
		{[]string{"decline", ids["apply"], "--as", "alice"}, []string{"would decline", "the change ends declined"}},
		{[]string{"decline", ids["undo"], "--as", "person:alice"}, []string{"as person:alice\n", "undo set is refused"}},
	} {
		want(t, runL(t, path, tc.args...), exitDryRun, tc.out...)
		sameBytes(t, path, before, strings.Join(tc.args, " "))
	}
	if a, _ := readApproval(t, path, ids["apply"]); a.Status != ledger.ApprovalWaiting || a.Approvals != 0 {
		t.Fatalf("a dry run moved the approval: %+v", a)
	}
}

func TestApprove_RecordsThePersonInTheHistory(t *testing.T) {
	t.Parallel()
	path := filepath.Join(t.TempDir(), "ledger.db")
	ids := approvalFixture(t, path)
	want(t, runL(t, path, "approve", ids["apply"], "--as", "alice", "--note", "fine by me", "--yes"), exitOK,
		"approved approval "+ids["apply"]+" as person:alice: approved (1 of 1); the agent's set of "+ids["apply_change"]+" may go ahead")
	a, h := readApproval(t, path, ids["apply"])
	if a.Status != ledger.ApprovalApproved || a.DecidedBy != "person:alice" || a.Note != "fine by me" {
		t.Fatalf("after approve: %+v", a)
	}
	if last := h[len(h)-1]; last.By != "person:alice" || last.To != "approved" || last.Note != "approve: fine by me" {
		t.Fatalf("the history's last entry of the approval is %+v", last)
	}
	want(t, runL(t, path, "log", "--by", "person:alice"), exitOK, ids["apply_change"], "approval:waiting", "approval:approved", "approve: fine by me")
	r := runL(t, path, "log", "--approval", ids["apply"], "--json")
	want(t, r, exitOK, `"approval_id":"`+ids["apply"]+`"`, `"to":"approved","by":"person:alice"`)
	if n := strings.Count(r.stdout, "\n"); n != 2 {
		t.Errorf("log --approval prints %d entries, want the request and the decision:\n%s", n, r.stdout)
	}
	want(t, runL(t, path, "show", ids["apply_change"]), exitOK, "approval:approved", "person:alice")
	// It no longer waits.
	if slices.Contains(approvalIDs(approvalsJSON(t, path)), ids["apply"]) {
		t.Error("an approved approval is still listed as waiting")
	}
	// Deciding it again is refused, by anyone.
	wantErr(t, runL(t, path, "approve", ids["apply"], "--as", "bob", "--yes"), "is already approved (1 of 1, the last by person:alice)", "nothing was changed")
	wantErr(t, runL(t, path, "decline", ids["apply"], "--as", "bob"), "is already approved")
}

func TestApprove_TwoPeopleAndOnePersonTwice(t *testing.T) {
	t.Parallel()
	path := filepath.Join(t.TempDir(), "ledger.db")
	ids := approvalFixture(t, path)
	id := ids["two"]
	want(t, runL(t, path, "approve", id, "--as", "alice", "--yes"), exitOK, "1 of 2 approved; waiting for 1 more person")
	before := readFile(t, path)
	for _, args := range [][]string{
		{"approve", id, "--as", "alice"},
		{"approve", id, "--as", "alice", "--yes"},
		{"decline", id, "--as", "alice", "--yes"},
	} {
		wantErr(t, runL(t, path, args...), "person:alice already decided approval "+id, "approving twice counts once", "nothing was changed")
		sameBytes(t, path, before, strings.Join(args, " "))
	}
	if a, _ := readApproval(t, path, id); a.Approvals != 1 || a.Status != ledger.ApprovalWaiting {
		t.Fatalf("one person approving twice counted twice: %+v", a)
	}
	want(t, runL(t, path, "approve", id, "--as", "bob", "--yes"), exitOK, "approved (2 of 2)")
	a, h := readApproval(t, path, id)
	if a.Status != ledger.ApprovalApproved || a.DecidedBy != "person:bob" {
		t.Fatalf("after two people: %+v", a)
	}
	var by []string
	for _, e := range h {
		by = append(by, e.By)
	}
	if want := []string{"agent:codex", "person:alice", "person:bob"}; !slices.Equal(by, want) {
		t.Errorf("the approval's history is made by %v, want %v", by, want)
	}
}

func TestDecline_EndsTheApplyLeavesTheUndo(t *testing.T) {
	t.Parallel()
	path := filepath.Join(t.TempDir(), "ledger.db")
	ids := approvalFixture(t, path)
	want(t, runL(t, path, "decline", ids["apply"], "--as", "alice", "--note", "not today", "--yes"), exitOK,
		"declined approval "+ids["apply"]+" as person:alice: declined; change "+ids["apply_change"]+" is declined")
	if got := status(t, path, ids["apply_change"]); got != ledger.Declined {
		t.Errorf("the declined apply's change is %s", got)
	}
	a, _ := readApproval(t, path, ids["apply"])
	if a.Status != ledger.ApprovalDeclined || a.DecidedBy != "person:alice" || a.Note != "not today" {
		t.Errorf("after decline: %+v", a)
	}
	want(t, runL(t, path, "decline", ids["undo"], "--as", "alice", "--yes"), exitOK, "the agent's undo set of "+ids["undo_change"]+" is refused")
	if got := status(t, path, ids["undo_change"]); got != ledger.Applied {
		t.Errorf("a declined undo moved its change to %s", got)
	}
	want(t, runL(t, path, "show", ids["apply_change"]), exitOK, "declined", "person:alice")
}

func TestApproveDecline_Refusals(t *testing.T) {
	t.Parallel()
	path := filepath.Join(t.TempDir(), "ledger.db")
	ids := approvalFixture(t, path)
	before := readFile(t, path)
	for _, tc := range []struct {
		args []string
		msgs []string
	}{
		{[]string{"approve", "apr_00000000000000000000", "--as", "alice", "--yes"}, []string{"approval apr_00000000000000000000 not found", "mcp-changeset approvals"}},
		{[]string{"approve", ids["expired"], "--as", "alice", "--yes"}, []string{"approval " + ids["expired"] + " expired at", "ask again", "nothing was changed"}},
		{[]string{"approve", ids["expired"], "--as", "alice"}, []string{"expired at"}},
		{[]string{"decline", ids["used"], "--as", "alice", "--yes"}, []string{"was used already by agent:claude"}},
		{[]string{"approve", ids["declined"], "--as", "alice", "--yes"}, []string{"was declined by person:carol"}},
		{[]string{"approve", ids["apply"], "--yes"}, []string{"--as is required"}},
		{[]string{"approve", ids["apply"], "--as", " ", "--yes"}, []string{"--as is required"}},
		{[]string{"approve", ids["apply"], "--as", "al\x1bice", "--yes"}, []string{"control characters"}},
		{[]string{"approve", "--as", "alice"}, []string{"exactly one approval ID"}},
		{[]string{"decline", ids["apply"], "--as", "alice", "--note", strings.Repeat("n", ledger.MaxApprovalNote+1), "--yes"}, []string{"--note is"}},
	} {
		wantErr(t, runL(t, path, tc.args...), tc.msgs...)
		sameBytes(t, path, before, strings.Join(tc.args, " "))
	}
}

func TestPostgres_ApproveAndDecline(t *testing.T) {
	t.Parallel()
	dsn := pgtest.DSN(t)
	ids := approvalFixture(t, dsn)
	env := []string{LedgerEnv + "=" + dsn}
	if got, want := approvalIDs(approvalsJSON(t, dsn)), []string{ids["apply"], ids["two"], ids["undo"]}; !slices.Equal(got, want) {
		t.Fatalf("approvals on PostgreSQL lists %v, want %v", got, want)
	}
	want(t, run(t, env, "approve", ids["two"], "--as", "alice"), exitDryRun, "would approve")
	want(t, run(t, env, "approve", ids["two"], "--as", "alice", "--yes"), exitOK, "1 of 2 approved")
	wantErr(t, run(t, env, "approve", ids["two"], "--as", "alice", "--yes"), "person:alice already decided")
	want(t, run(t, env, "approve", ids["two"], "--as", "bob", "--yes"), exitOK, "approved (2 of 2)")
	want(t, run(t, env, "decline", ids["apply"], "--as", "alice", "--yes"), exitOK, "is declined")
	wantErr(t, run(t, env, "approve", ids["expired"], "--as", "alice", "--yes"), "expired at")
	a, h := readApproval(t, dsn, ids["two"])
	if a.Status != ledger.ApprovalApproved || h[len(h)-1].By != "person:bob" {
		t.Fatalf("on PostgreSQL after two people: %+v, last entry %+v", a, h[len(h)-1])
	}
	if got, want := approvalIDs(approvalsJSON(t, dsn)), []string{ids["undo"]}; !slices.Equal(got, want) {
		t.Fatalf("approvals on PostgreSQL lists %v after the decisions, want %v", got, want)
	}
}

// expire --yes also moves approvals past their deadline to expired, so
// that lists of waiting approvals stay short; the others stay as they are.
func TestExpire_AlsoExpiresApprovalsPastTheirDeadline(t *testing.T) {
	t.Parallel()
	path := filepath.Join(t.TempDir(), "ledger.db")
	ids := approvalFixture(t, path)
	r := runL(t, path, "expire", "--yes")
	want(t, r, exitOK, "expired 1 approval past its deadline")
	for role, st := range map[string]ledger.ApprovalStatus{"expired": ledger.ApprovalExpired, "apply": ledger.ApprovalWaiting, "used": ledger.ApprovalUsed, "declined": ledger.ApprovalDeclined} {
		a, _ := readApproval(t, path, ids[role])
		if a.Status != st {
			t.Errorf("%s: approval is %s, want %s", role, a.Status, st)
		}
	}
	r = runL(t, path, "expire", "--yes")
	want(t, r, exitOK, "expired 0 changes")
	if strings.Contains(r.stdout, "approval") {
		t.Errorf("a second expire mentions approvals:\n%s", r.stdout)
	}
}
