package changeset_test

import (
	"context"
	"encoding/json"
	"regexp"
	"strings"
	"testing"
	"time"

	changeset "github.com/mcp-changeset/changeset-go"
	"github.com/mcp-changeset/changeset-go/ledger"
	"github.com/modelcontextprotocol/go-sdk/mcp"
)

var (
	changeIDPattern = regexp.MustCompile(`^chg_[0-9a-f]{20}$`)
	confirmPattern  = regexp.MustCompile(`^confirm_[A-Za-z0-9_-]{32}$`)
	undoPattern     = regexp.MustCompile(`^undo_[A-Za-z0-9_-]{32}$`)
)

func TestRoundTrip_PreviewApplyUndoThroughClient(t *testing.T) {
	t.Parallel()
	onEachBackend(t, func(t *testing.T, kit backendKit) {
		f := newFixtureOn(t, kit)
		cs := f.session

		prev := mustCall(t, cs, "preview_set", map[string]any{"key": "theme", "value": "dark"})
		if prev["status"] != "preview" || prev["action"] != "set" || prev["writes_enabled"] != true {
			t.Fatalf("preview = %v", prev)
		}
		id, token := prev["change_id"].(string), prev["confirmation_token"].(string)
		if !changeIDPattern.MatchString(id) || !confirmPattern.MatchString(token) {
			t.Fatalf("change_id %q / token %q have the wrong shape", id, token)
		}
		if _, err := time.Parse(time.RFC3339, prev["expires_at"].(string)); err != nil {
			t.Fatalf("expires_at: %v", err)
		}
		if want := f.clock.Now().Add(changeset.DefaultTTL).Format(time.RFC3339); prev["expires_at"] != want {
			t.Errorf("expires_at = %v, want %v", prev["expires_at"], want)
		}
		diff := prev["diff"].([]any)
		if len(diff) != 1 {
			t.Fatalf("diff = %v", diff)
		}
		entry := diff[0].(map[string]any)
		if entry["field"] != "theme" || entry["before"] != "light" || entry["after"] != "dark" {
			t.Fatalf("diff entry = %v", entry)
		}
		if !strings.Contains(prev["next_step"].(string), "approve") {
			t.Errorf("next_step does not tell the agent to wait for approval: %q", prev["next_step"])
		}
		if f.store.get("theme") != "light" {
			t.Fatal("preview wrote")
		}

		applied := mustCall(t, cs, "apply_change", map[string]any{"change_id": id, "confirmation_token": token})
		if applied["status"] != "applied" || applied["change_id"] != id {
			t.Fatalf("apply = %v", applied)
		}
		if r := applied["result"].(map[string]any); r["previous"] != "light" {
			t.Fatalf("result = %v", r)
		}
		undoToken := applied["undo_token"].(string)
		if !undoPattern.MatchString(undoToken) {
			t.Fatalf("undo token %q has the wrong shape", undoToken)
		}
		if want := f.clock.Now().Add(changeset.DefaultUndoTTL).Format(time.RFC3339); applied["undo_expires_at"] != want {
			t.Errorf("undo_expires_at = %v, want %v", applied["undo_expires_at"], want)
		}
		if f.store.get("theme") != "dark" {
			t.Fatal("apply did not write")
		}

		st := mustCall(t, cs, "get_change_status", map[string]any{"change_id": id})
		if st["status"] != "applied" {
			t.Fatalf("status = %v", st)
		}
		for k := range st {
			if strings.Contains(k, "token") || strings.Contains(k, "hash") {
				t.Errorf("get_change_status exposes %q", k)
			}
		}

		undone := mustCall(t, cs, "undo_change", map[string]any{"change_id": id, "undo_token": undoToken})
		if undone["status"] != "undone" || undone["change_id"] != id {
			t.Fatalf("undo = %v", undone)
		}
		if f.store.get("theme") != "light" {
			t.Fatal("undo did not restore the value")
		}
		if f.status(id) != ledger.Undone {
			t.Fatalf("ledger status = %s", f.status(id))
		}
		mustFail(t, cs, "undo_change", map[string]any{"change_id": id, "undo_token": undoToken},
			"change "+id+" cannot be undone (status: undone)")
	})
}

func TestApply_ReplayOfSpentTokenRefused(t *testing.T) {
	t.Parallel()
	onEachBackend(t, func(t *testing.T, kit backendKit) {
		f := newFixtureOn(t, kit)
		id, token := f.preview("set", "theme", "dark")
		f.apply(id, token)
		mustFail(t, f.session, "apply_change", map[string]any{"change_id": id, "confirmation_token": token},
			"change "+id+" cannot be applied (status: applied)")
		if n := f.store.applies.Load(); n != 1 {
			t.Fatalf("applied %d times", n)
		}
	})
}

func TestApply_WrongTokenDoesNotConsumePreview(t *testing.T) {
	t.Parallel()
	onEachBackend(t, func(t *testing.T, kit backendKit) {
		f := newFixtureOn(t, kit)
		id, token := f.preview("set", "theme", "dark")
		for _, wrong := range []string{
			"confirm_AAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAA",
			"confirm_short",
			"",
			strings.Replace(token, "confirm_", "undo_", 1),
			token + "x",
		} {
			mustFail(t, f.session, "apply_change", map[string]any{"change_id": id, "confirmation_token": wrong}, "invalid confirmation token")
		}
		if f.status(id) != ledger.Pending || f.store.applies.Load() != 0 {
			t.Fatal("a wrong token consumed the preview")
		}
		f.apply(id, token)
		if f.store.get("theme") != "dark" {
			t.Fatal("the right token did not apply after wrong ones")
		}
	})
}

func TestApply_TokenOfAnotherChangeRefused(t *testing.T) {
	t.Parallel()
	onEachBackend(t, func(t *testing.T, kit backendKit) {
		f := newFixtureOn(t, kit)
		idA, tokenA := f.preview("set", "theme", "dark")
		idB, _ := f.preview("set", "language", "de")
		mustFail(t, f.session, "apply_change", map[string]any{"change_id": idB, "confirmation_token": tokenA}, "invalid confirmation token")
		if f.status(idB) != ledger.Pending || f.status(idA) != ledger.Pending {
			t.Fatal("a foreign token changed a status")
		}
	})
}

func TestUndo_UndoTokenCannotApplyAndConfirmTokenCannotUndo(t *testing.T) {
	t.Parallel()
	onEachBackend(t, func(t *testing.T, kit backendKit) {
		f := newFixtureOn(t, kit)
		id, token := f.preview("set", "theme", "dark")
		undoToken := f.apply(id, token)
		mustFail(t, f.session, "undo_change", map[string]any{"change_id": id, "undo_token": token}, "invalid undo token")
		id2, _ := f.preview("set", "language", "fr")
		mustFail(t, f.session, "apply_change", map[string]any{"change_id": id2, "confirmation_token": undoToken}, "invalid confirmation token")
		mustFail(t, f.session, "undo_change", map[string]any{"change_id": id, "undo_token": "undo_AAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAA"}, "invalid undo token")
		mustCall(t, f.session, "undo_change", map[string]any{"change_id": id, "undo_token": undoToken})
	})
}

func TestApply_ExpiredPreviewRefusedAndMarkedExpired(t *testing.T) {
	t.Parallel()
	onEachBackend(t, func(t *testing.T, kit backendKit) {
		f := newFixtureOn(t, kit)
		id, token := f.preview("set", "theme", "dark")
		f.clock.Advance(changeset.DefaultTTL)
		mustFail(t, f.session, "apply_change", map[string]any{"change_id": id, "confirmation_token": token}, "expired")
		if f.status(id) != ledger.Expired {
			t.Fatalf("status = %s, want expired", f.status(id))
		}
		mustFail(t, f.session, "apply_change", map[string]any{"change_id": id, "confirmation_token": token}, "cannot be applied (status: expired)")
		if f.store.get("theme") != "light" {
			t.Fatal("an expired preview wrote")
		}
	})
}

func TestUndo_ExpiredUndoWindowRefused(t *testing.T) {
	t.Parallel()
	onEachBackend(t, func(t *testing.T, kit backendKit) {
		f := newFixtureOn(t, kit, func(o *changeset.Options) { o.UndoTTL = time.Hour })
		id, token := f.preview("set", "theme", "dark")
		undoToken := f.apply(id, token)
		f.clock.Advance(time.Hour)
		mustFail(t, f.session, "undo_change", map[string]any{"change_id": id, "undo_token": undoToken}, "undo window closed")
		if f.store.get("theme") != "dark" || f.status(id) != ledger.Applied {
			t.Fatal("an expired undo token changed something")
		}
	})
}

func TestUndo_NoExpiryKeepsUndoOpen(t *testing.T) {
	t.Parallel()
	onEachBackend(t, func(t *testing.T, kit backendKit) {
		f := newFixtureOn(t, kit, func(o *changeset.Options) { o.UndoTTL = changeset.NoExpiry })
		id, token := f.preview("set", "theme", "dark")
		out := mustCall(t, f.session, "apply_change", map[string]any{"change_id": id, "confirmation_token": token})
		if _, ok := out["undo_expires_at"]; ok {
			t.Fatalf("undo_expires_at present with NoExpiry: %v", out)
		}
		f.clock.Advance(365 * 24 * time.Hour)
		mustCall(t, f.session, "undo_change", map[string]any{"change_id": id, "undo_token": out["undo_token"]})
	})
}

func TestApply_ClockFarBehindCreationRefused(t *testing.T) {
	t.Parallel()
	onEachBackend(t, func(t *testing.T, kit backendKit) {
		f := newFixtureOn(t, kit)
		id, token := f.preview("set", "theme", "dark")
		f.clock.Advance(-2 * changeset.DefaultMaxClockSkew)
		mustFail(t, f.session, "apply_change", map[string]any{"change_id": id, "confirmation_token": token}, "clock")
		if f.status(id) != ledger.Pending {
			t.Fatal("a skewed clock consumed the preview")
		}
		f.clock.Advance(2 * changeset.DefaultMaxClockSkew)
		f.apply(id, token)
	})
}

func TestApply_OtherScopeCannotSeeOrClaim(t *testing.T) {
	t.Parallel()
	onEachBackend(t, func(t *testing.T, kit backendKit) {
		f := newFixtureOn(t, kit, func(o *changeset.Options) { o.Scope = "tenant-a" })
		id, token := f.preview("set", "theme", "dark")

		server := mcp.NewServer(&mcp.Implementation{Name: "other", Version: "1"}, nil)
		other, err := changeset.New(server, changeset.Options{Ledger: kit.Reopen(t, f.guard.Ledger()), WriteMode: changeset.WriteGuarded, Scope: "tenant-b", Clock: f.clock.Now})
		if err != nil {
			t.Fatal(err)
		}
		defer other.Close()
		registerTestOps(other, f.store)
		cs := connect(t, server)
		mustFail(t, cs, "apply_change", map[string]any{"change_id": id, "confirmation_token": token}, "change "+id+" not found")
		mustFail(t, cs, "get_change_status", map[string]any{"change_id": id}, "not found")
		if f.status(id) != ledger.Pending {
			t.Fatal("a claim under another scope changed the change")
		}
		f.apply(id, token)
	})
}

func TestScopeFunc_BindsChangesToThePrincipal(t *testing.T) {
	t.Parallel()
	onEachBackend(t, func(t *testing.T, kit backendKit) {
		type principal struct{}
		f := newFixtureOn(t, kit, func(o *changeset.Options) {
			o.ScopeFunc = func(ctx context.Context, req *mcp.CallToolRequest) (string, error) {
				if req != nil && req.Extra != nil && req.Extra.TokenInfo != nil {
					return req.Extra.TokenInfo.UserID, nil
				}
				s, _ := ctx.Value(principal{}).(string)
				return s, nil
			}
		})
		alice := context.WithValue(context.Background(), principal{}, "alice")
		bob := context.WithValue(context.Background(), principal{}, "bob")
		p, err := f.guard.Preview(alice, "set", setIn{Key: "theme", Value: "dark"})
		if err != nil {
			t.Fatal(err)
		}
		if _, err := f.guard.Apply(bob, p.ChangeID, p.ConfirmationToken); err == nil || !strings.Contains(err.Error(), "not found") {
			t.Fatalf("bob applied alice's change: %v", err)
		}
		if _, err := f.guard.Status(bob, p.ChangeID); err == nil {
			t.Fatal("bob can see alice's change")
		}
		if _, err := f.guard.Apply(alice, p.ChangeID, p.ConfirmationToken); err != nil {
			t.Fatal(err)
		}
	})
}

func TestWritesDisabled_RefusedBeforeClaimAndTokenSurvives(t *testing.T) {
	onEachBackendInTurn(t, func(t *testing.T, kit backendKit) {
		// Not parallel: t.Setenv.
		env := "CHANGESET_TEST_WRITE_MODE"
		t.Setenv(env, "")
		f := newFixtureOn(t, kit, func(o *changeset.Options) { o.WriteMode = ""; o.WriteModeEnv = env })
		if f.guard.WritesEnabled() {
			t.Fatal("writes enabled without the variable")
		}
		prev := mustCall(t, f.session, "preview_set", map[string]any{"key": "theme", "value": "dark"})
		if prev["writes_enabled"] != false || !strings.Contains(prev["next_step"].(string), "Writes are off") || !strings.Contains(prev["next_step"].(string), env+"=guarded") {
			t.Fatalf("preview does not report disabled writes: %v", prev)
		}
		id, token := prev["change_id"].(string), prev["confirmation_token"].(string)
		mustFail(t, f.session, "apply_change", map[string]any{"change_id": id, "confirmation_token": token}, env+"=guarded")
		if f.status(id) != ledger.Pending {
			t.Fatal("disabled writes burnt the preview")
		}

		t.Setenv(env, "guarded")
		undoToken := f.apply(id, token)

		t.Setenv(env, "off")
		mustFail(t, f.session, "undo_change", map[string]any{"change_id": id, "undo_token": undoToken}, "disabled")
		if f.status(id) != ledger.Applied {
			t.Fatal("disabled writes burnt the undo token")
		}
		t.Setenv(env, "guarded")
		mustCall(t, f.session, "undo_change", map[string]any{"change_id": id, "undo_token": undoToken})
	})
}

func TestApply_StateChangedSincePreviewFailsWithoutWriting(t *testing.T) {
	t.Parallel()
	onEachBackend(t, func(t *testing.T, kit backendKit) {
		f := newFixtureOn(t, kit)
		id, token := f.preview("set", "theme", "dark")
		f.store.set("theme", "blue") // someone else's edit
		msg := mustFail(t, f.session, "apply_change", map[string]any{"change_id": id, "confirmation_token": token}, "changed after the preview")
		if !strings.Contains(msg, id) {
			t.Errorf("refusal does not name the change: %q", msg)
		}
		if f.store.applies.Load() != 0 || f.store.get("theme") != "blue" {
			t.Fatal("the apply ran against changed state")
		}
		rec, _ := f.guard.Record(context.Background(), id)
		if rec.Status != ledger.ApplyFailed || rec.ErrorType != "changeset.StateChangedError" {
			t.Fatalf("record = %s / %s", rec.Status, rec.ErrorType)
		}
		mustFail(t, f.session, "apply_change", map[string]any{"change_id": id, "confirmation_token": token}, "(status: apply_failed)")
	})
}

func TestUndo_RefusedAfterLaterEditAndNothingOverwritten(t *testing.T) {
	t.Parallel()
	onEachBackend(t, func(t *testing.T, kit backendKit) {
		f := newFixtureOn(t, kit)
		id, token := f.preview("set", "theme", "dark")
		undoToken := f.apply(id, token)
		f.store.set("theme", "solarized") // a person's later edit
		mustFail(t, f.session, "undo_change", map[string]any{"change_id": id, "undo_token": undoToken}, "overwrite")
		if f.store.get("theme") != "solarized" || f.store.undos.Load() != 0 {
			t.Fatal("the undo overwrote a later edit")
		}
		if f.status(id) != ledger.UndoFailed {
			t.Fatalf("status = %s", f.status(id))
		}
		// The ledger keeps what the check found beside what it expected.
		rec, _ := f.guard.Record(context.Background(), id)
		if !strings.Contains(string(rec.UndoFound), "solarized") || !strings.Contains(string(rec.After), "dark") {
			t.Errorf("refused undo kept found %s, after %s", rec.UndoFound, rec.After)
		}
	})
}

func TestApply_ErrorReachesAgentAsTypeNameOnly(t *testing.T) {
	t.Parallel()
	onEachBackend(t, func(t *testing.T, kit backendKit) {
		f := newFixtureOn(t, kit)
		id, token := f.preview("fail", "theme", "dark")
		msg := mustFail(t, f.session, "apply_change", map[string]any{"change_id": id, "confirmation_token": token}, "fs.PathError")
		if strings.Contains(msg, "/srv/secret") {
			t.Fatalf("the agent saw the error text: %q", msg)
		}
		rec, err := f.guard.Record(context.Background(), id)
		if err != nil {
			t.Fatal(err)
		}
		if rec.Status != ledger.ApplyFailed || rec.ErrorType != "fs.PathError" || !strings.Contains(rec.Error, "/srv/secret/credentials") {
			t.Fatalf("record = %s %q %q", rec.Status, rec.ErrorType, rec.Error)
		}
		st := mustCall(t, f.session, "get_change_status", map[string]any{"change_id": id})
		if st["error"] != "fs.PathError" {
			t.Fatalf("status error = %v", st["error"])
		}
	})
}

func TestApply_PanicIsRecordedAsFailure(t *testing.T) {
	t.Parallel()
	onEachBackend(t, func(t *testing.T, kit backendKit) {
		f := newFixtureOn(t, kit)
		id, token := f.preview("boom", "theme", "dark")
		msg := mustFail(t, f.session, "apply_change", map[string]any{"change_id": id, "confirmation_token": token}, "crashed (panicked)")
		if strings.Contains(msg, "changeset.") {
			t.Errorf("the refusal names a Go identifier of the library: %q", msg)
		}
		if f.status(id) != ledger.ApplyFailed {
			t.Fatalf("status = %s", f.status(id))
		}
	})
}

func TestApply_ResultOverLimitFailsWithoutUndoToken(t *testing.T) {
	t.Parallel()
	onEachBackend(t, func(t *testing.T, kit backendKit) {
		f := newFixtureOn(t, kit, func(o *changeset.Options) { o.MaxResultBytes = 1024 })
		id, token := f.preview("big", "theme", strings.Repeat("v", 2000))
		mustFail(t, f.session, "apply_change", map[string]any{"change_id": id, "confirmation_token": token}, "over the limit")
		rec, _ := f.guard.Record(context.Background(), id)
		if rec.Status != ledger.ApplyFailed || f.store.applies.Load() != 1 {
			t.Fatalf("status %s, applies %d", rec.Status, f.store.applies.Load())
		}
		raw, _ := f.guard.Ledger().Change(context.Background(), id)
		if raw.UndoHash != "" {
			t.Fatal("an undo token digest was stored for a failed change")
		}
	})
}

func TestApply_NoUndoOperationGetsNoUndoToken(t *testing.T) {
	t.Parallel()
	onEachBackend(t, func(t *testing.T, kit backendKit) {
		f := newFixtureOn(t, kit)
		id, token := f.preview("noundo", "theme", "dark")
		out := mustCall(t, f.session, "apply_change", map[string]any{"change_id": id, "confirmation_token": token})
		if _, ok := out["undo_token"]; ok {
			t.Fatalf("undo token issued for an operation without undo: %v", out)
		}
	})
}

func TestPreview_RefusalsStoreNothing(t *testing.T) {
	t.Parallel()
	onEachBackend(t, func(t *testing.T, kit backendKit) {
		f := newFixtureOn(t, kit, func(o *changeset.Options) { o.MaxPayloadBytes = 4096 })
		mustFail(t, f.session, "preview_set", map[string]any{"key": "theme", "value": strings.Repeat("x", 5000)}, "over the limit")
		mustFail(t, f.session, "preview_set", map[string]any{"key": "", "value": "x"}, "key is required")
		mustFail(t, f.session, "preview_set", map[string]any{"key": "theme", "value": "x", "extra": 1}, "")
		mustFail(t, f.session, "preview_set", map[string]any{"key": "theme", "value": "x", "run_id": "run_00000000000000000000"}, "not found")
		// Invalid UTF-8 cannot travel through JSON-RPC (the transport replaces
		// it), so it is checked through the Go API, which takes it as is.
		if _, err := f.guard.Preview(context.Background(), "set", map[string]any{"key": "theme", "value": "bad \xff byte"}); err == nil {
			t.Fatal("invalid UTF-8 accepted")
		}
		rows, err := f.guard.Ledger().Changes(context.Background(), ledger.ChangeFilter{})
		if err != nil {
			t.Fatal(err)
		}
		if len(rows) != 0 {
			t.Fatalf("refused previews stored %d rows", len(rows))
		}
	})
}

func TestPreview_ValuesWithControlCharactersAreValidInput(t *testing.T) {
	t.Parallel()
	onEachBackend(t, func(t *testing.T, kit backendKit) {
		f := newFixtureOn(t, kit)
		v := "line1\nline2 \u202e \x1b[31m"
		id, token := f.preview("set", "theme", v)
		f.apply(id, token)
		if f.store.get("theme") != v {
			t.Fatal("value altered")
		}
	})
}

func TestApply_BookkeepingSurvivesCancelledRequest(t *testing.T) {
	t.Parallel()
	onEachBackend(t, func(t *testing.T, kit backendKit) {
		f := newFixtureOn(t, kit)
		ctx, cancel := context.WithCancel(context.Background())
		changeset.Register(f.guard, &mcp.Tool{Name: "cancelling"}, changeset.Operation[setIn, setIn, setOut]{
			AllowEmptyDiff: true, // its diff is not what the test is about
			Preview: func(ctx context.Context, in setIn) (*changeset.Proposal[setIn], error) {
				return &changeset.Proposal[setIn]{Payload: in}, nil
			},
			Apply: func(_ context.Context, p setIn) (setOut, error) {
				cancel() // the client goes away while the write completes
				return setOut{Previous: f.store.set(p.Key, p.Value)}, nil
			},
			Undo: func(context.Context, setIn, setOut) error { return nil },
		})
		p, err := f.guard.Preview(ctx, "cancelling", setIn{Key: "theme", Value: "dark"})
		if err != nil {
			t.Fatal(err)
		}
		if _, err := f.guard.Apply(ctx, p.ChangeID, p.ConfirmationToken); err != nil {
			t.Fatalf("Apply: %v", err)
		}
		if f.status(p.ChangeID) != ledger.Applied {
			t.Fatalf("status = %s after a cancelled request", f.status(p.ChangeID))
		}
	})
}

func TestProgrammaticAPI(t *testing.T) {
	t.Parallel()
	onEachBackend(t, func(t *testing.T, kit backendKit) {
		f := newFixtureOn(t, kit)
		ctx := context.Background()
		p, err := f.guard.Preview(ctx, "set", setIn{Key: "language", Value: "de"})
		if err != nil {
			t.Fatal(err)
		}
		st, err := f.guard.Status(ctx, p.ChangeID)
		if err != nil || st.Status != "pending" || st.Action != "set" {
			t.Fatalf("Status = %+v, %v", st, err)
		}
		a, err := f.guard.Apply(ctx, p.ChangeID, p.ConfirmationToken)
		if err != nil {
			t.Fatal(err)
		}
		rec, err := f.guard.Record(ctx, p.ChangeID)
		if err != nil {
			t.Fatal(err)
		}
		if rec.ConfirmHash != "" || rec.UndoHash != "" {
			t.Fatal("Record exposes token digests")
		}
		if string(rec.Before) != `"en"` || string(rec.After) != `"de"` || string(rec.Payload) != `{"key":"language","value":"de"}` {
			t.Fatalf("record snapshots: before %s after %s payload %s", rec.Before, rec.After, rec.Payload)
		}
		if _, err := f.guard.Undo(ctx, p.ChangeID, a.UndoToken); err != nil {
			t.Fatal(err)
		}
		if _, err := f.guard.Preview(ctx, "nosuchop", nil); err == nil {
			t.Fatal("unknown operation accepted")
		}
		if _, err := f.guard.Status(ctx, "chg_nope"); err == nil {
			t.Fatal("malformed id accepted")
		}
	})
}

func TestUndoAs_RecordsThePerson(t *testing.T) {
	t.Parallel()
	onEachBackend(t, func(t *testing.T, kit backendKit) {
		f := newFixtureOn(t, kit)
		id, token := f.preview("set", "theme", "dark")
		f.apply(id, token)
		if _, err := f.guard.UndoAs(context.Background(), id, changeset.Person("ana")); err != nil {
			t.Fatal(err)
		}
		rec, _ := f.guard.Record(context.Background(), id)
		if rec.UndoneBy != "person:ana" || rec.AppliedBy != "agent:test-client" {
			t.Fatalf("applied by %q, undone by %q", rec.AppliedBy, rec.UndoneBy)
		}
	})
}

func TestPreview_ArgumentsWithInvalidUTF8OrLoneSurrogatesRefused(t *testing.T) {
	t.Parallel()
	onEachBackend(t, func(t *testing.T, kit backendKit) {
		f := newFixtureOn(t, kit)
		for _, args := range []string{
			`{"key":"theme","value":"bad ` + "\xff" + ` byte"}`,
			`{"key":"theme","value":"lone \ud800 surrogate"}`,
		} {
			res, err := f.session.CallTool(context.Background(), &mcp.CallToolParams{Name: "preview_set", Arguments: json.RawMessage(args)})
			if err != nil {
				t.Fatalf("protocol error: %v", err)
			}
			if !res.IsError || !strings.Contains(res.Content[0].(*mcp.TextContent).Text, "were refused") {
				t.Fatalf("arguments %q not refused by the Guard: %+v", args, res.Content)
			}
		}
		rows, _ := f.guard.Ledger().Changes(context.Background(), ledger.ChangeFilter{})
		if len(rows) != 0 {
			t.Fatalf("%d rows stored", len(rows))
		}
	})
}

func TestPreview_SnapshotBindsTheStateThePreviewRead(t *testing.T) {
	t.Parallel()
	onEachBackend(t, func(t *testing.T, kit backendKit) {
		f := newFixtureOn(t, kit)
		changeset.Register(f.guard, &mcp.Tool{Name: "snap"}, changeset.Operation[setIn, setIn, setOut]{
			Preview: func(ctx context.Context, in setIn) (*changeset.Proposal[setIn], error) {
				seen := f.store.get(in.Key)
				f.store.set(in.Key, "edited by a person meanwhile") // lands between this read and any later one
				return &changeset.Proposal[setIn]{Payload: in, Snapshot: &changeset.Snapshot{Value: seen},
					Diff: changeset.DiffFields(map[string]any{in.Key: seen}, map[string]any{in.Key: in.Value})}, nil
			},
			Apply: func(ctx context.Context, p setIn) (setOut, error) {
				return setOut{Previous: f.store.set(p.Key, p.Value)}, nil
			},
			Observe: func(ctx context.Context, p setIn) (any, error) { return f.store.get(p.Key), nil },
		})
		id, token := f.preview("snap", "theme", "dark")
		mustFail(t, f.session, "apply_change", map[string]any{"change_id": id, "confirmation_token": token}, "changed after the preview")
		if f.store.get("theme") != "edited by a person meanwhile" {
			t.Fatal("the person's edit was overwritten")
		}
	})
}

func TestApply_OperationRefusalNamesTheChange(t *testing.T) {
	t.Parallel()
	onEachBackend(t, func(t *testing.T, kit backendKit) {
		f := newFixtureOn(t, kit)
		changeset.Register(f.guard, &mcp.Tool{Name: "quota"}, changeset.Operation[setIn, setIn, setOut]{
			AllowEmptyDiff: true, // its diff is not what the test is about
			Preview: func(ctx context.Context, in setIn) (*changeset.Proposal[setIn], error) {
				return &changeset.Proposal[setIn]{Payload: in}, nil
			},
			Apply: func(ctx context.Context, p setIn) (setOut, error) {
				return setOut{}, changeset.Refuse("quota exceeded")
			},
		})
		id, token := f.preview("quota", "theme", "dark")
		mustFail(t, f.session, "apply_change", map[string]any{"change_id": id, "confirmation_token": token}, "change "+id+" was not applied: quota exceeded")
	})
}
