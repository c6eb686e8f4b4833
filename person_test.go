package changeset_test

import (
	"context"
	"errors"
	"strings"
	"sync"
	"testing"
	"time"

	changeset "github.com/mcp-changeset/changeset-go"
	"github.com/mcp-changeset/changeset-go/ledger"
	"github.com/modelcontextprotocol/go-sdk/mcp"
)

// dashboardURL is the base of approval links in these tests.
const dashboardURL = "https://changes.example.com/team"

// newPersonFixture is a fixture under PersonApproval on kit's backend,
// whose waits are short: the tests approve before or between calls, or
// from the wait itself.
func newPersonFixture(t *testing.T, kit backendKit, edit ...func(*changeset.Options)) *fixture {
	t.Helper()
	return newFixtureOn(t, kit, append([]func(*changeset.Options){func(o *changeset.Options) {
		o.Approval, o.ApprovalWait, o.DashboardURL = changeset.PersonApproval, 10*time.Millisecond, dashboardURL
	}}, edit...)...)
}

// approvalOf reads the approval a preview or dry run returned.
func approvalOf(t *testing.T, out map[string]any) (id, url string, needed int) {
	t.Helper()
	a, ok := out["approval"].(map[string]any)
	if !ok {
		t.Fatalf("the result names no approval: %v", out)
	}
	id, _ = a["id"].(string)
	url, _ = a["url"].(string)
	n, _ := a["needed"].(float64)
	if !strings.HasPrefix(id, "apr_") || len(id) != len("apr_")+20 {
		t.Fatalf("approval id %q", id)
	}
	return id, url, int(n)
}

// TestPerson_ApplyWaitsForAPerson: over a client that declares no
// elicitation, the preview names the approval and its link, the apply is
// refused while it waits (nothing written, token not spent, the refusal
// names the apr_ ID and the link), a person approves through the Go API,
// and the same call then applies, recorded as the person's approval.
func TestPerson_ApplyWaitsForAPerson(t *testing.T) {
	onEachBackend(t, func(t *testing.T, kit backendKit) {
		f := newPersonFixture(t, kit)
		ctx := context.Background()
		out := mustCall(t, f.session, "preview_set", map[string]any{"key": "theme", "value": "dark"})
		id, tok := out["change_id"].(string), out["confirmation_token"].(string)
		aid, url, needed := approvalOf(t, out)
		if url != dashboardURL+"/approvals/"+aid || needed != 1 {
			t.Fatalf("approval url %q needed %d", url, needed)
		}
		if next := out["next_step"].(string); !strings.Contains(next, `"`+url+`"`) || !strings.Contains(next, "apply_change") {
			t.Fatalf("next_step does not give the quoted link: %s", next)
		}
		args := map[string]any{"change_id": id, "confirmation_token": tok}
		msg := mustFail(t, f.session, "apply_change", args, aid)
		for _, want := range []string{`"` + url + `"`, "Nothing was written and no token was spent", "0 of 1", "call apply_change again later"} {
			if !strings.Contains(msg, want) {
				t.Errorf("the waiting refusal %q lacks %q", msg, want)
			}
		}
		if f.store.get("theme") != "light" || f.store.applies.Load() != 0 || f.status(id) != ledger.Pending {
			t.Fatalf("a waiting apply wrote: theme %q, %d applies, status %s", f.store.get("theme"), f.store.applies.Load(), f.status(id))
		}
		_, err := f.guard.Apply(ctx, id, tok)
		if !errors.Is(err, changeset.ErrAwaitingApproval) {
			t.Fatalf("Guard.Apply while waiting: %v, want ErrAwaitingApproval", err)
		}

		if w, err := f.guard.WaitingApprovals(ctx, 0); err != nil || len(w) != 1 || w[0].ID != aid {
			t.Fatalf("WaitingApprovals before the decision: %v, %v", w, err)
		}
		a, err := f.guard.Approve(ctx, aid, "alice", "looks right")
		if err != nil || a.Status != ledger.ApprovalApproved || a.DecidedBy != "person:alice" {
			t.Fatalf("Approve: %+v, %v", a, err)
		}
		if w, err := f.guard.WaitingApprovals(ctx, 0); err != nil || len(w) != 0 {
			t.Fatalf("WaitingApprovals after the decision: %v, %v", w, err)
		}
		res := mustCall(t, f.session, "apply_change", args)
		if res["status"] != "applied" || f.store.get("theme") != "dark" {
			t.Fatalf("apply after approval: %v, theme %q", res, f.store.get("theme"))
		}
		used, err := f.guard.Ledger().Approval(ctx, aid)
		if err != nil || used.Status != ledger.ApprovalUsed {
			t.Fatalf("the approval after the apply: %+v, %v", used, err)
		}
		hist, err := f.guard.Ledger().History(ctx, ledger.HistoryFilter{ApprovalID: aid})
		if err != nil {
			t.Fatal(err)
		}
		var byAlice bool
		for _, h := range hist {
			byAlice = byAlice || (h.By == "person:alice" && h.To == string(ledger.ApprovalApproved))
		}
		if !byAlice {
			t.Fatalf("the history of %s records no approval by person:alice: %+v", aid, hist)
		}
		mustFail(t, f.session, "apply_change", args, "cannot be applied")
		if f.store.applies.Load() != 1 {
			t.Fatalf("%d applies, want 1", f.store.applies.Load())
		}
	})
}

// TestPerson_DeclineEndsTheChange: a declined apply ends the change
// declined, and the agent reads who declined and the note, quoted.
func TestPerson_DeclineEndsTheChange(t *testing.T) {
	onEachBackend(t, func(t *testing.T, kit backendKit) {
		f := newPersonFixture(t, kit)
		out := mustCall(t, f.session, "preview_set", map[string]any{"key": "theme", "value": "dark"})
		id, tok := out["change_id"].(string), out["confirmation_token"].(string)
		aid, _, _ := approvalOf(t, out)
		if _, err := f.guard.Decline(context.Background(), aid, "bob", "not on a Friday.\nIgnore this"); err != nil {
			t.Fatal(err)
		}
		if s := f.status(id); s != ledger.Declined {
			t.Fatalf("status %s after a decline, want declined", s)
		}
		msg := mustFail(t, f.session, "apply_change", map[string]any{"change_id": id, "confirmation_token": tok}, `"person:bob" declined it`)
		if !strings.Contains(msg, `"not on a Friday.\nIgnore this"`) || !strings.Contains(msg, "can never be applied") {
			t.Fatalf("the decline does not quote the note: %s", msg)
		}
		_, err := f.guard.Apply(context.Background(), id, tok)
		if !errors.Is(err, changeset.ErrDeclined) {
			t.Fatalf("Guard.Apply of a declined change: %v, want ErrDeclined", err)
		}
		st := mustCall(t, f.session, "get_change_status", map[string]any{"change_id": id})
		if st["status"] != "declined" || f.store.applies.Load() != 0 {
			t.Fatalf("status %v, %d applies", st["status"], f.store.applies.Load())
		}
		if a, _ := st["approval"].(map[string]any); a["id"] != aid || a["status"] != "declined" {
			t.Fatalf("get_change_status's approval: %v", st["approval"])
		}
	})
}

// TestPerson_TwoPersonRule: with Approvers 2 the apply waits until two
// different people approved; one person approving twice is one approval.
func TestPerson_TwoPersonRule(t *testing.T) {
	onEachBackend(t, func(t *testing.T, kit backendKit) {
		f := newPersonFixture(t, kit, func(o *changeset.Options) { o.Approvers = 2 })
		ctx := context.Background()
		out := mustCall(t, f.session, "preview_set", map[string]any{"key": "theme", "value": "dark"})
		args := map[string]any{"change_id": out["change_id"], "confirmation_token": out["confirmation_token"]}
		aid, _, needed := approvalOf(t, out)
		if needed != 2 || !strings.Contains(out["next_step"].(string), "2 different people") {
			t.Fatalf("needed %d, next_step %q", needed, out["next_step"])
		}
		if _, err := f.guard.Approve(ctx, aid, "alice", ""); err != nil {
			t.Fatal(err)
		}
		mustFail(t, f.session, "apply_change", args, "1 of 2 approvals")
		if _, err := f.guard.Approve(ctx, aid, "person:alice", "again"); !errors.Is(err, ledger.ErrDecided) {
			t.Fatalf("alice approving twice: %v, want ledger.ErrDecided", err)
		}
		mustFail(t, f.session, "apply_change", args, "1 of 2 approvals")
		if f.store.applies.Load() != 0 {
			t.Fatal("applied with one person's approval")
		}
		if _, err := f.guard.Approve(ctx, aid, "carol", ""); err != nil {
			t.Fatal(err)
		}
		if res := mustCall(t, f.session, "apply_change", args); res["status"] != "applied" {
			t.Fatalf("apply after two people: %v", res)
		}
	})
}

// TestPerson_ApprovalIsForItsOwnChange: approving one change lets no
// other change through, and a decision after the deadline, or an apply
// after it, is refused with nothing written.
func TestPerson_ApprovalIsForItsOwnChange(t *testing.T) {
	onEachBackend(t, func(t *testing.T, kit backendKit) {
		f := newPersonFixture(t, kit)
		ctx := context.Background()
		a := mustCall(t, f.session, "preview_set", map[string]any{"key": "theme", "value": "dark"})
		b := mustCall(t, f.session, "preview_set", map[string]any{"key": "language", "value": "fr"})
		aid, _, _ := approvalOf(t, a)
		bid, _, _ := approvalOf(t, b)
		if aid == bid {
			t.Fatal("two changes share one approval")
		}
		if _, err := f.guard.Approve(ctx, aid, "alice", ""); err != nil {
			t.Fatal(err)
		}
		mustFail(t, f.session, "apply_change", map[string]any{"change_id": b["change_id"], "confirmation_token": b["confirmation_token"]}, bid)
		if f.store.get("language") != "en" {
			t.Fatal("another change's approval applied this one")
		}

		// Past the deadline (the token's expiry): approved or not, nothing goes.
		f.clock.Advance(changeset.DefaultTTL + time.Second)
		if _, err := f.guard.Approve(ctx, bid, "alice", ""); !errors.Is(err, ledger.ErrApprovalExpired) {
			t.Fatalf("a decision after the deadline: %v, want ErrApprovalExpired", err)
		}
		_, err := f.guard.Apply(ctx, a["change_id"].(string), a["confirmation_token"].(string))
		if !errors.Is(err, changeset.ErrExpired) || f.store.get("theme") != "light" {
			t.Fatalf("an approved apply after its deadline: %v, theme %q", err, f.store.get("theme"))
		}
	})
}

// TestPerson_EditedPayloadIsRefused: a payload edited in the ledger after
// a person approved it is not applied.
func TestPerson_EditedPayloadIsRefused(t *testing.T) {
	for _, b := range integrityBackends {
		t.Run(b.name, func(t *testing.T) {
			f := newFixture(t, b.open(t), func(o *changeset.Options) {
				o.Approval, o.ApprovalWait = changeset.PersonApproval, 10*time.Millisecond
			})
			out := mustCall(t, f.session, "preview_set", map[string]any{"key": "theme", "value": "dark"})
			id := out["change_id"].(string)
			aid, url, _ := approvalOf(t, out)
			if url != "" {
				t.Fatalf("a link %q without a DashboardURL", url)
			}
			if _, err := f.guard.Approve(context.Background(), aid, "alice", ""); err != nil {
				t.Fatal(err)
			}
			tamperer{t, f.guard, b}.edit(id, `{"key":"theme","value":"pwned"}`, true)
			_, errText := call(t, f.session, "apply_change", map[string]any{"change_id": id, "confirmation_token": out["confirmation_token"]})
			if errText == "" || f.store.get("theme") != "light" || f.store.applies.Load() != 0 {
				t.Fatalf("an edited payload went through: %q, theme %q", errText, f.store.get("theme"))
			}
		})
	}
}

// TestPerson_WaitEndsWhenApprovedMeanwhile: a person approves while the
// apply waits (from the client's progress handler, in another
// goroutine): the waiting call applies, and the client received progress
// notifications naming the approval.
func TestPerson_WaitEndsWhenApprovedMeanwhile(t *testing.T) {
	onEachBackend(t, func(t *testing.T, kit backendKit) {
		f := newPersonFixture(t, kit, func(o *changeset.Options) { o.ApprovalWait = changeset.MaxApprovalWait })
		out := mustCall(t, f.session, "preview_set", map[string]any{"key": "theme", "value": "dark"})
		aid, _, _ := approvalOf(t, out)

		var (
			mu       sync.Mutex
			messages []string
			once     sync.Once
			approved = make(chan error, 1)
		)
		progress := func(ctx context.Context, req *mcp.ProgressNotificationClientRequest) {
			mu.Lock()
			messages = append(messages, req.Params.Message)
			mu.Unlock()
			once.Do(func() {
				go func() { // a person, elsewhere
					_, err := f.guard.Approve(context.Background(), aid, "alice", "")
					approved <- err
				}()
			})
		}
		cs := connectWith(t, f, &mcp.ClientOptions{ProgressNotificationHandler: progress})
		params := &mcp.CallToolParams{Name: "apply_change", Arguments: map[string]any{"change_id": out["change_id"], "confirmation_token": out["confirmation_token"]}}
		params.SetProgressToken("apply-1")
		res, errText := callParams(t, cs, params)
		if errText != "" || res["status"] != "applied" {
			t.Fatalf("the waiting apply: %v %s", res, errText)
		}
		if err := <-approved; err != nil {
			t.Fatal(err)
		}
		mu.Lock()
		defer mu.Unlock()
		if len(messages) == 0 || !strings.Contains(messages[0], aid) || !strings.Contains(messages[0], dashboardURL) {
			t.Fatalf("progress messages %q name no approval", messages)
		}
	})
}

// connectWith connects a client with opts to the fixture's server.
func connectWith(t *testing.T, f *fixture, opts *mcp.ClientOptions) *mcp.ClientSession {
	t.Helper()
	return connectServer(t, f.server, opts, nil)
}

// Under person approval with a Prefix, every text the agent reads about
// an approval (instructions, descriptions, next steps, the waiting and
// declined refusals, the dry run's next step) names the prefixed tools.
func TestPerson_TextsNameThePrefixedTools(t *testing.T) {
	f := prefixedServer(t, changeset.Options{Prefix: "crm_", WriteMode: changeset.WriteGuarded,
		Approval: changeset.PersonApproval, ApprovalWait: time.Millisecond, DashboardURL: dashboardURL})
	a := &agentTexts{t: t}
	cs := f.connect(clientOptions{})
	a.connect(cs)
	ctx := context.Background()
	run := a.must(cs, "crm_start_run", map[string]any{"label": "task"})["run_id"].(string)
	p := a.must(cs, "crm_preview_set", map[string]any{"key": "theme", "value": "dark", "run_id": run})
	aid, _, _ := approvalOf(t, p)
	args := map[string]any{"change_id": p["change_id"], "confirmation_token": p["confirmation_token"]}
	a.call(cs, "crm_apply_change", args)
	if _, err := f.guard.Approve(ctx, aid, "alice", ""); err != nil {
		t.Fatal(err)
	}
	applied := a.must(cs, "crm_apply_change", args)
	undo := map[string]any{"change_id": p["change_id"], "undo_token": applied["undo_token"]}
	a.call(cs, "crm_undo_change", undo)
	a.must(cs, "crm_undo_run", map[string]any{"run_id": run})
	p2 := a.must(cs, "crm_preview_set", map[string]any{"key": "language", "value": "fr"})
	aid2, _, _ := approvalOf(t, p2)
	if _, err := f.guard.Decline(ctx, aid2, "bob", "no"); err != nil {
		t.Fatal(err)
	}
	a.call(cs, "crm_apply_change", map[string]any{"change_id": p2["change_id"], "confirmation_token": p2["confirmation_token"]})

	var refusals, people int
	for _, x := range a.texts {
		if x.err {
			refusals++
		}
		if strings.Contains(x.text, "person") {
			people++
		}
		if m := unprefixedTool.FindString(x.text); m != "" {
			t.Errorf("%s names the unprefixed tool %q: %q", x.where, strings.TrimLeft(m, " (\"'"), x.text)
		}
	}
	if refusals < 3 || people < 5 {
		t.Fatalf("the session met %d refusals and %d texts about people: %+v", refusals, people, a.texts)
	}
}
