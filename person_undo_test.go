package changeset_test

import (
	"context"
	"errors"
	"strings"
	"testing"
	"time"

	changeset "github.com/mcp-changeset/changeset-go"
	"github.com/mcp-changeset/changeset-go/ledger"
	"github.com/modelcontextprotocol/go-sdk/mcp"
)

// approveAndApply previews set(key, value) in run runID ("" for the
// session's), has alice approve it, applies it, and returns the change
// ID and undo token.
func (f *fixture) approveAndApply(key, value, runID string) (id, undoToken string) {
	f.t.Helper()
	args := map[string]any{"key": key, "value": value}
	if runID != "" {
		args["run_id"] = runID
	}
	out := mustCall(f.t, f.session, "preview_set", args)
	aid, _, _ := approvalOf(f.t, out)
	if _, err := f.guard.Approve(context.Background(), aid, "alice", ""); err != nil {
		f.t.Fatal(err)
	}
	res := mustCall(f.t, f.session, "apply_change", map[string]any{"change_id": out["change_id"], "confirmation_token": out["confirmation_token"]})
	tok, _ := res["undo_token"].(string)
	return out["change_id"].(string), tok
}

// waitingID is the apr_ ID a waiting refusal names.
func waitingID(t *testing.T, msg string) string {
	t.Helper()
	i := strings.Index(msg, "(approval apr_")
	if i < 0 || len(msg) < i+len("(approval ")+24 {
		t.Fatalf("the refusal names no approval: %s", msg)
	}
	return msg[i+len("(approval ") : i+len("(approval ")+24]
}

// TestPerson_UndoWaitsForAPerson: the agent's first undo_change requests
// the undo's approval and names it; a person approves; the undo goes
// through. A person's own undo (UndoAs) needs no approval.
func TestPerson_UndoWaitsForAPerson(t *testing.T) {
	onEachBackend(t, func(t *testing.T, kit backendKit) {
		f := newPersonFixture(t, kit)
		ctx := context.Background()
		id, undoTok := f.approveAndApply("theme", "dark", "")
		args := map[string]any{"change_id": id, "undo_token": undoTok}
		msg := mustFail(t, f.session, "undo_change", args, "was not undone: it waits to be approved")
		aid := waitingID(t, msg)
		if !strings.Contains(msg, dashboardURL+"/approvals/"+aid) || !strings.Contains(msg, "call undo_change again later") {
			t.Fatalf("the undo's refusal: %s", msg)
		}
		if again := mustFail(t, f.session, "undo_change", args, "waits"); waitingID(t, again) != aid {
			t.Fatalf("a second undo call named another approval: %s", again)
		}
		a, err := f.guard.Ledger().Approval(ctx, aid)
		if err != nil || a.Kind != ledger.ApproveUndo || a.ChangeID != id {
			t.Fatalf("the undo's approval: %+v, %v", a, err)
		}
		if f.store.get("theme") != "dark" || f.status(id) != ledger.Applied {
			t.Fatal("a waiting undo wrote")
		}
		if _, err := f.guard.Approve(ctx, aid, "alice", ""); err != nil {
			t.Fatal(err)
		}
		if res := mustCall(t, f.session, "undo_change", args); res["status"] != "undone" || f.store.get("theme") != "light" {
			t.Fatalf("undo after approval: %v, theme %q", res, f.store.get("theme"))
		}

		other, _ := f.approveAndApply("language", "fr", "")
		if _, err := f.guard.UndoAs(ctx, other, changeset.Person("carol")); err != nil || f.store.get("language") != "en" {
			t.Fatalf("UndoAs under person approval: %v, language %q", err, f.store.get("language"))
		}
	})
}

// TestPerson_DeclinedUndoStaysDeclined: a declined undo leaves the change
// applied, and the agent reads who declined it on every later call.
func TestPerson_DeclinedUndoStaysDeclined(t *testing.T) {
	onEachBackend(t, func(t *testing.T, kit backendKit) {
		f := newPersonFixture(t, kit)
		id, undoTok := f.approveAndApply("theme", "dark", "")
		args := map[string]any{"change_id": id, "undo_token": undoTok}
		aid := waitingID(t, mustFail(t, f.session, "undo_change", args, "waits"))
		if _, err := f.guard.Decline(context.Background(), aid, "dana", "keep it"); err != nil {
			t.Fatal(err)
		}
		for range 2 {
			msg := mustFail(t, f.session, "undo_change", args, `"person:dana" declined it`)
			if !strings.Contains(msg, `"keep it"`) || !strings.Contains(msg, "stays as it is") {
				t.Fatalf("the declined undo: %s", msg)
			}
		}
		if f.status(id) != ledger.Applied || f.store.get("theme") != "dark" {
			t.Fatalf("status %s, theme %q after a declined undo", f.status(id), f.store.get("theme"))
		}
	})
}

// TestPerson_RunUndoNeedsItsPlanApproved: a run undo's dry run requests
// the approval of its plan; the real undo waits for it; an approval of an
// earlier plan does not serve a later one; once the plan shown is
// approved, the undo runs. A person's own UndoRun needs no approval.
func TestPerson_RunUndoNeedsItsPlanApproved(t *testing.T) {
	onEachBackend(t, func(t *testing.T, kit backendKit) {
		f := newPersonFixture(t, kit)
		ctx := context.Background()
		run := mustCall(t, f.session, "start_run", map[string]any{"label": "dark mode"})["run_id"].(string)
		f.approveAndApply("theme", "dark", run)

		dry := mustCall(t, f.session, "undo_run", map[string]any{"run_id": run})
		first, url, _ := approvalOf(t, dry)
		if url != dashboardURL+"/approvals/"+first || !strings.Contains(dry["next_step"].(string), `"`+url+`"`) {
			t.Fatalf("the dry run's approval %q and next step %q", url, dry["next_step"])
		}
		if _, err := f.guard.Approve(ctx, first, "alice", ""); err != nil {
			t.Fatal(err)
		}

		// The run grows: the approved plan is no longer the plan.
		f.approveAndApply("language", "fr", run)
		dry = mustCall(t, f.session, "undo_run", map[string]any{"run_id": run})
		second, _, _ := approvalOf(t, dry)
		if second == first {
			t.Fatal("a new plan reuses the approval of the old one")
		}
		real := map[string]any{"run_id": run, "dry_run": false, "confirmation_token": dry["confirmation_token"]}
		msg := mustFail(t, f.session, "undo_run", real, second)
		if !strings.Contains(msg, "run "+run+" was not undone") || f.store.get("theme") != "dark" || f.store.get("language") != "fr" {
			t.Fatalf("the run undo went ahead on the old plan's approval: %s", msg)
		}
		if _, err := f.guard.Approve(ctx, second, "alice", ""); err != nil {
			t.Fatal(err)
		}
		rep := mustCall(t, f.session, "undo_run", real)
		if rep["status"] != string(ledger.RunUndone) || f.store.get("theme") != "light" || f.store.get("language") != "en" {
			t.Fatalf("the approved run undo: %v", rep)
		}

		other := mustCall(t, f.session, "start_run", map[string]any{"label": "other"})["run_id"].(string)
		f.approveAndApply("theme", "blue", other)
		if rep, err := f.guard.UndoRun(ctx, other, false, changeset.Person("carol")); err != nil || rep.Status != string(ledger.RunUndone) {
			t.Fatalf("a person's UndoRun under person approval: %+v, %v", rep, err)
		}
	})
}

// TestPerson_OperationOverrides: on a token server, one operation can
// need a person (and a number of people) while the others do not.
func TestPerson_OperationOverrides(t *testing.T) {
	f := newFixture(t, func(o *changeset.Options) { o.ApprovalWait = 10 * time.Millisecond })
	changeset.Register(f.guard, &mcp.Tool{Name: "guarded_set"}, changeset.Operation[setIn, setIn, setOut]{
		Approval: changeset.PersonApproval, Approvers: 2,
		Preview: func(ctx context.Context, in setIn) (*changeset.Proposal[setIn], error) {
			return &changeset.Proposal[setIn]{Payload: in, Summary: "Set " + in.Key, Resource: "setting:" + in.Key,
				Diff: changeset.DiffFields(map[string]any{in.Key: f.store.get(in.Key)}, map[string]any{in.Key: in.Value})}, nil
		},
		Apply: func(ctx context.Context, p setIn) (setOut, error) {
			return setOut{Previous: f.store.set(p.Key, p.Value)}, nil
		},
	})
	plain := mustCall(t, f.session, "preview_set", map[string]any{"key": "theme", "value": "dark"})
	if _, ok := plain["approval"]; ok {
		t.Fatalf("a token operation's preview asks people: %v", plain)
	}
	f.apply(plain["change_id"].(string), plain["confirmation_token"].(string))
	guarded := mustCall(t, f.session, "preview_guarded_set", map[string]any{"key": "language", "value": "fr"})
	if _, _, needed := approvalOf(t, guarded); needed != 2 {
		t.Fatalf("needed %d, want the operation's 2", needed)
	}
	_, err := f.guard.Apply(context.Background(), guarded["change_id"].(string), guarded["confirmation_token"].(string))
	if !errors.Is(err, changeset.ErrAwaitingApproval) || f.store.get("language") != "en" {
		t.Fatalf("the guarded operation's apply without people: %v", err)
	}
}
