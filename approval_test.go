package changeset_test

import (
	"context"
	"strings"
	"testing"
	"time"

	changeset "github.com/mcp-changeset/changeset-go"
	"github.com/modelcontextprotocol/go-sdk/mcp"
)

const approvedBy = "agent (approved by the user)"

func TestApproval_BothProtocolsAskAndApplyOnAccept(t *testing.T) {
	t.Parallel()
	onEachBackend(t, func(t *testing.T, kit backendKit) {
		for _, proto := range []string{protoMRTR, protoLegacy} {
			t.Run(proto, func(t *testing.T) {
				f := newApprovalFixtureOn(t, kit)
				u := says(yes)
				cs := f.connect(clientOptions{protocol: proto, user: u})
				id := f.preview(cs, "theme", "dark")

				out := mustCall(t, cs, "apply_change", map[string]any{"change_id": id})
				if out["status"] != "applied" || out["change_id"] != id {
					t.Fatalf("apply = %v", out)
				}
				if _, ok := out["undo_token"]; ok {
					t.Errorf("apply with user approval returned an undo token: %v", out)
				}
				if f.store.get("theme") != "dark" || f.store.applies.Load() != 1 {
					t.Fatalf("store theme = %q after %d applies", f.store.get("theme"), f.store.applies.Load())
				}
				rec, err := f.guard.Record(context.Background(), id)
				if err != nil || rec.Status != "applied" || rec.AppliedBy != approvedBy {
					t.Fatalf("ledger row = %+v, %v", rec, err)
				}
				n, q := u.asked()
				if n != 1 {
					t.Fatalf("the user was asked %d times, want 1", n)
				}
				if !strings.Contains(q.Message, `theme: "light" → "dark"`) || !strings.Contains(q.Message, id) {
					t.Errorf("question does not show the change:\n%s", q.Message)
				}
				if !strings.Contains(cs.InitializeResult().Instructions, f.guard.Instructions()) || !strings.Contains(f.guard.Instructions(), "asks the user itself") {
					t.Errorf("instructions are not the approval ones:\n%s", cs.InitializeResult().Instructions)
				}
				if q.Mode != "form" {
					t.Errorf("mode = %q, want form", q.Mode)
				}
			})
		}
	})
}

func TestApproval_PreviewHasNoTokenAndSaysTheUserWillBeAsked(t *testing.T) {
	t.Parallel()
	onEachBackend(t, func(t *testing.T, kit backendKit) {
		f := newApprovalFixtureOn(t, kit)
		cs := f.connect(clientOptions{user: says(yes)})
		out := mustCall(t, cs, "preview_set", map[string]any{"key": "theme", "value": "dark"})
		if _, ok := out["confirmation_token"]; ok {
			t.Fatalf("preview returned a token: %v", out)
		}
		if !strings.Contains(out["next_step"].(string), "their client asks them to approve") {
			t.Errorf("next_step = %q", out["next_step"])
		}
		if got := cs.InitializeResult().Instructions; !strings.Contains(got, f.guard.Instructions()) ||
			!strings.Contains(got, "asks the user itself") || strings.Contains(got, "confirmation_token") {
			t.Errorf("instructions are not the approval ones:\n%s", cs.InitializeResult().Instructions)
		}
		tools, err := cs.ListTools(context.Background(), nil)
		if err != nil {
			t.Fatal(err)
		}
		for _, tool := range tools.Tools {
			if tool.Name != "apply_change" {
				continue
			}
			schema := decodeMap(t, tool.InputSchema)
			if req, _ := schema["required"].([]any); len(req) != 1 || req[0] != "change_id" {
				t.Errorf("apply_change requires %v, want only change_id", schema["required"])
			}
		}
	})
}

func TestApproval_DeclineCancelAndNoSpendNothing(t *testing.T) {
	t.Parallel()
	onEachBackend(t, func(t *testing.T, kit backendKit) {
		for _, tc := range []struct {
			name   string
			answer *mcp.ElicitResult
			want   string
		}{
			{"decline", decline, "the user declined it"},
			{"cancel", cancel, "dismissed the question"},
			{"accept-false", no, "did not approve"},
		} {
			for _, proto := range []string{protoMRTR, protoLegacy} {
				t.Run(tc.name+"/"+proto, func(t *testing.T) {
					f := newApprovalFixtureOn(t, kit)
					u := says(tc.answer, yes)
					cs := f.connect(clientOptions{protocol: proto, user: u})
					id := f.preview(cs, "theme", "dark")

					msg := mustFail(t, cs, "apply_change", map[string]any{"change_id": id}, tc.want)
					if !strings.Contains(msg, "nothing was spent") {
						t.Errorf("refusal %q does not say nothing was spent", msg)
					}
					if f.status(id) != "pending" || f.store.get("theme") != "light" || f.store.applies.Load() != 0 {
						t.Fatalf("after %s: status %s, theme %q", tc.name, f.status(id), f.store.get("theme"))
					}
					// Approvable afterwards.
					mustCall(t, cs, "apply_change", map[string]any{"change_id": id})
					if f.status(id) != "applied" || f.store.get("theme") != "dark" {
						t.Fatalf("the second, accepted call did not apply: %s", f.status(id))
					}
					if n, _ := u.asked(); n != 2 {
						t.Errorf("asked %d times, want 2", n)
					}
				})
			}
		}
	})
}

func TestApproval_MessageIsNeutralisedAndBounded(t *testing.T) {
	t.Parallel()
	onEachBackend(t, func(t *testing.T, kit backendKit) {
		f := newApprovalFixtureOn(t, kit)
		u := says(decline)
		cs := f.connect(clientOptions{protocol: protoMRTR, user: u})
		long := "HEAD-" + strings.Repeat("x", 10_000) + "-TAIL"
		out := mustCall(t, cs, "preview_multi", map[string]any{"fields": map[string]any{
			"bidi":            "abc\u202edef",
			"ansi":            "\x1b[31mred\x1b[0m",
			"lines":           "one\ntwo\r\nthree\u2028four",
			"long":            long,
			"zero\u200bwidth": "ok",
		}})
		id := out["change_id"].(string)
		mustFail(t, cs, "apply_change", map[string]any{"change_id": id}, "declined")
		_, q := u.asked()
		want := "Apply this change?\n\n" +
			"Operation: multi\n" +
			"Summary: Set 5 fields\n" +
			"Change: " + id + "\n" +
			"Part of run: " + out["run_id"].(string) + "\n\n" +
			"Fields (before → after):\n" +
			`• ansi: (none) → "\u001b[31mred\u001b[0m"` + "\n" +
			`• bidi: (none) → "abc<U+202E>def"` + "\n" +
			`• lines: (none) → "one\ntwo\r\nthree<U+2028>four"` + "\n" +
			`• long: (none) → "HEAD-` + strings.Repeat("x", 97) + `… [9806 characters omitted] …` + strings.Repeat("x", 97) + `-TAIL"` + "\n" +
			`• zero<U+200B>width: (none) → "ok"` + "\n\n" +
			"Answer yes only if you want this change made exactly as shown."
		if q.Message != want {
			t.Fatalf("message:\n%s\nwant:\n%s", q.Message, want)
		}
		for _, bad := range []string{"\u202e", "\x1b", "\u200b", "\u2028", "\r"} {
			if strings.Contains(q.Message, bad) {
				t.Errorf("message contains raw %q", bad)
			}
		}
	})
}

func TestApproval_ManyFieldsStayUnder4000(t *testing.T) {
	t.Parallel()
	onEachBackend(t, func(t *testing.T, kit backendKit) {
		f := newApprovalFixtureOn(t, kit)
		u := says(decline)
		cs := f.connect(clientOptions{user: u})
		fields := map[string]any{}
		for i := range 60 {
			fields[strings.Repeat("f", 3)+string(rune('a'+i%26))+strings.Repeat("z", i)] = strings.Repeat("v\u202e", 100)
		}
		id := mustCall(t, cs, "preview_multi", map[string]any{"fields": fields})["change_id"].(string)
		mustFail(t, cs, "apply_change", map[string]any{"change_id": id}, "declined")
		_, q := u.asked()
		if len(q.Message) >= 4000 {
			t.Fatalf("message is %d bytes", len(q.Message))
		}
		if !strings.Contains(q.Message, "more fields, not shown here") || !strings.HasSuffix(q.Message, "exactly as shown.") {
			t.Fatalf("message does not count the fields it left out or lost its footer:\n%s", q.Message)
		}
	})
}

func TestApproval_ClientWithoutElicitationGetsToolError(t *testing.T) {
	t.Parallel()
	onEachBackend(t, func(t *testing.T, kit backendKit) {
		for _, proto := range []string{protoMRTR, protoLegacy} {
			t.Run(proto, func(t *testing.T) {
				f := newApprovalFixtureOn(t, kit)
				cs := f.connect(clientOptions{protocol: proto})
				id := f.preview(cs, "theme", "dark")
				msg := mustFail(t, cs, "apply_change", map[string]any{"change_id": id}, "this client does not support it")
				if !strings.Contains(msg, "token approval") {
					t.Errorf("refusal does not name the alternative: %q", msg)
				}
				if f.status(id) != "pending" {
					t.Fatalf("status %s", f.status(id))
				}
			})
		}
	})
}

func TestApproval_FailingElicitationIsToolError(t *testing.T) {
	t.Parallel()
	onEachBackend(t, func(t *testing.T, kit backendKit) {
		f := newApprovalFixtureOn(t, kit)
		u := says(yes)
		u.fail = errUserAgentFailed
		cs := f.connect(clientOptions{protocol: protoLegacy, user: u})
		id := f.preview(cs, "theme", "dark")
		mustFail(t, cs, "apply_change", map[string]any{"change_id": id}, "could not ask the user")
		if f.status(id) != "pending" {
			t.Fatalf("status %s", f.status(id))
		}
	})
}

func TestApproval_RefusalsBeforeAskingLeaveTheUserAlone(t *testing.T) {
	t.Parallel()
	onEachBackend(t, func(t *testing.T, kit backendKit) {
		f := newApprovalFixtureOn(t, kit, func(o *changeset.Options) { o.WriteMode = changeset.WriteDisabled })
		u := says(yes)
		cs := f.connect(clientOptions{user: u})
		id := f.preview(cs, "theme", "dark")
		mustFail(t, cs, "apply_change", map[string]any{"change_id": id}, "writes are off")
		mustFail(t, cs, "apply_change", map[string]any{"change_id": "chg_00000000000000000000"}, "not found")
		mustFail(t, cs, "undo_change", map[string]any{"change_id": id}, "cannot be undone (status: pending)")

		g := newApprovalFixtureOn(t, kit)
		cs = g.connect(clientOptions{user: u})
		id = g.preview(cs, "theme", "dark")
		mustFail(t, cs, "apply_change", map[string]any{"change_id": id, "confirmation_token": "confirm_" + strings.Repeat("A", 32)}, "invalid confirmation token")
		g.store.set("theme", "blue") // edited since the preview
		mustFail(t, cs, "apply_change", map[string]any{"change_id": id}, "changed after the preview")
		if n, _ := u.asked(); n != 0 {
			t.Errorf("the user was asked %d times about calls that were refused anyway", n)
		}
		if g.status(id) != "pending" {
			t.Errorf("status %s; the checks before asking must write nothing", g.status(id))
		}
	})
}

func TestApproval_UndoChangeAsksAndHonoursDecline(t *testing.T) {
	t.Parallel()
	onEachBackend(t, func(t *testing.T, kit backendKit) {
		f := newApprovalFixtureOn(t, kit)
		u := says(yes, decline, yes)
		cs := f.connect(clientOptions{protocol: protoLegacy, user: u})
		id := f.preview(cs, "theme", "dark")
		mustCall(t, cs, "apply_change", map[string]any{"change_id": id})

		mustFail(t, cs, "undo_change", map[string]any{"change_id": id}, "the user declined it")
		if f.status(id) != "applied" || f.store.get("theme") != "dark" {
			t.Fatalf("declined undo changed something: %s %q", f.status(id), f.store.get("theme"))
		}
		_, q := u.asked()
		if !strings.HasPrefix(q.Message, "Undo this change?") || !strings.Contains(q.Message, `theme: "dark" → "light"`) {
			t.Errorf("undo question:\n%s", q.Message)
		}
		out := mustCall(t, cs, "undo_change", map[string]any{"change_id": id})
		if out["status"] != "undone" || f.store.get("theme") != "light" || f.status(id) != "undone" {
			t.Fatalf("undo = %v, theme %q", out, f.store.get("theme"))
		}
	})
}

func TestApproval_UndoRunAsksAboutThePlanAndHonoursDecline(t *testing.T) {
	t.Parallel()
	onEachBackend(t, func(t *testing.T, kit backendKit) {
		f := newApprovalFixtureOn(t, kit)
		u := says(yes, yes, decline, yes)
		cs := f.connect(clientOptions{protocol: protoMRTR, user: u})
		run := mustCall(t, cs, "start_run", map[string]any{"label": "Dark\u202emode"})["run_id"].(string)
		a := f.preview(cs, "theme", "dark", map[string]any{"run_id": run})
		mustCall(t, cs, "apply_change", map[string]any{"change_id": a})
		f.clock.Advance(time.Second)
		b := f.preview(cs, "language", "fr", map[string]any{"run_id": run})
		mustCall(t, cs, "apply_change", map[string]any{"change_id": b})

		dry := mustCall(t, cs, "undo_run", map[string]any{"run_id": run})
		if _, ok := dry["confirmation_token"]; ok {
			t.Fatalf("dry run returned a token: %v", dry)
		}
		mustFail(t, cs, "undo_run", map[string]any{"run_id": run, "dry_run": false}, "the user declined it")
		if f.store.get("theme") != "dark" || f.status(a) != "applied" {
			t.Fatal("a declined run undo changed something")
		}
		_, q := u.asked()
		for _, want := range []string{"Undo the changes of this run?", "Label: Dark<U+202E>mode", "Will be undone, newest first:\n• " + b} {
			if !strings.Contains(q.Message, want) {
				t.Errorf("run question lacks %q:\n%s", want, q.Message)
			}
		}
		rep := mustCall(t, cs, "undo_run", map[string]any{"run_id": run, "dry_run": false})
		if rep["status"] != "undone" || rep["undone_by"] != approvedBy || f.store.get("theme") != "light" || f.store.get("language") != "en" {
			t.Fatalf("undo_run = %v", rep)
		}
	})
}

func TestApproval_UndoRunRefusedWhenThePlanChangedAfterTheQuestion(t *testing.T) {
	t.Parallel()
	onEachBackend(t, func(t *testing.T, kit backendKit) {
		f := newApprovalFixtureOn(t, kit)
		cs := f.connect(clientOptions{protocol: protoMRTR, user: says(yes)})
		run := mustCall(t, cs, "start_run", map[string]any{"label": "theme"})["run_id"].(string)
		id := f.preview(cs, "theme", "dark", map[string]any{"run_id": run})
		mustCall(t, cs, "apply_change", map[string]any{"change_id": id})

		manual := f.connect(clientOptions{protocol: protoMRTR, user: says(yes), manual: true})
		args := map[string]any{"run_id": run, "dry_run": false}
		state, q := question(t, manual, "undo_run", args)
		if !strings.Contains(q.Message, "Will be undone") {
			t.Fatalf("question:\n%s", q.Message)
		}
		f.store.set("theme", "blue") // a person edits it while the user reads
		_, errText := answer(t, manual, "undo_run", args, state, yes)
		if !strings.Contains(errText, "has changed since the user was asked") {
			t.Fatalf("answer after the plan changed: %q", errText)
		}
		if f.store.get("theme") != "blue" || f.status(id) != "applied" {
			t.Fatal("the undo ran on a plan the user never saw")
		}
	})
}

func TestApproval_OptionsAreValidated(t *testing.T) {
	t.Parallel()
	onEachBackend(t, func(t *testing.T, kit backendKit) {
		l := kit.Ledger(t)
		for _, opts := range []changeset.Options{
			{Ledger: l, Approval: changeset.UserApproval, ApprovalKey: make([]byte, 16)},
			{Ledger: l, ApprovalKey: make([]byte, 33)},
			{Ledger: l, Approval: changeset.Approval(7)},
		} {
			if g, err := changeset.New(nil, opts); err == nil {
				g.Close()
				t.Errorf("New(%+v) succeeded", opts)
			}
		}
	})
}

func TestApproval_TokenModeIsUnchanged(t *testing.T) {
	t.Parallel()
	onEachBackend(t, func(t *testing.T, kit backendKit) {
		f := newFixtureOn(t, kit)
		id, token := f.preview("set", "theme", "dark")
		if token == "" {
			t.Fatal("token mode returned no token")
		}
		mustFail(t, f.session, "apply_change", map[string]any{"change_id": id}, "confirmation_token")
		if f.status(id) != "pending" {
			t.Fatal("a call without a token did something")
		}
	})
}
