package changeset_test

import (
	"encoding/base64"
	"strings"
	"testing"
	"time"

	changeset "github.com/mcp-changeset/changeset-go"
)

// The sealed request state: these tests answer by hand, on clients whose
// automatic retry is off, as a client that forges or replays would.

func TestApproval_ReplayedStateAfterApplyRefused(t *testing.T) {
	t.Parallel()
	onEachBackend(t, func(t *testing.T, kit backendKit) {
		f := newApprovalFixtureOn(t, kit)
		cs := f.connect(clientOptions{protocol: protoMRTR, user: says(yes), manual: true})
		id := f.preview(cs, "theme", "dark")
		args := map[string]any{"change_id": id}

		state, _ := question(t, cs, "apply_change", args)
		if out, errText := answer(t, cs, "apply_change", args, state, yes); errText != "" || out["status"] != "applied" {
			t.Fatalf("first answer: %v %s", out, errText)
		}
		_, errText := answer(t, cs, "apply_change", args, state, yes)
		if want := "change " + id + " cannot be applied (status: applied)"; errText != want {
			t.Fatalf("replay: %q, want %q", errText, want)
		}
		if f.store.applies.Load() != 1 {
			t.Fatalf("applied %d times", f.store.applies.Load())
		}
	})
}

func TestApproval_StateOfAnotherChangeRefused(t *testing.T) {
	t.Parallel()
	onEachBackend(t, func(t *testing.T, kit backendKit) {
		f := newApprovalFixtureOn(t, kit)
		cs := f.connect(clientOptions{protocol: protoMRTR, user: says(yes), manual: true})
		a := f.preview(cs, "theme", "dark")
		b := f.preview(cs, "language", "fr")

		stateA, _ := question(t, cs, "apply_change", map[string]any{"change_id": a})
		_, errText := answer(t, cs, "apply_change", map[string]any{"change_id": b}, stateA, yes)
		if !strings.Contains(errText, "did not issue for this call") {
			t.Fatalf("state of A with B: %q", errText)
		}
		// Nor does an apply state open for the undo of the same change.
		_, errText = answer(t, cs, "undo_change", map[string]any{"change_id": a}, stateA, yes)
		if !strings.Contains(errText, "did not issue for this call") {
			t.Fatalf("apply state with undo_change: %q", errText)
		}
		if f.status(a) != "pending" || f.status(b) != "pending" || f.store.applies.Load() != 0 {
			t.Fatal("something was applied")
		}
	})
}

func TestApproval_TamperedStateRefused(t *testing.T) {
	t.Parallel()
	onEachBackend(t, func(t *testing.T, kit backendKit) {
		f := newApprovalFixtureOn(t, kit)
		cs := f.connect(clientOptions{protocol: protoMRTR, user: says(yes), manual: true})
		id := f.preview(cs, "theme", "dark")
		args := map[string]any{"change_id": id}
		state, _ := question(t, cs, "apply_change", args)

		raw, err := base64.RawURLEncoding.DecodeString(state)
		if err != nil {
			t.Fatal(err)
		}
		for _, i := range []int{0, 5, len(raw) / 2, len(raw) - 1} {
			flipped := append([]byte(nil), raw...)
			flipped[i] ^= 0x01
			_, errText := answer(t, cs, "apply_change", args, base64.RawURLEncoding.EncodeToString(flipped), yes)
			if !strings.Contains(errText, "did not issue for this call") {
				t.Fatalf("bit %d flipped: %q", i*8, errText)
			}
		}
		for _, bad := range []string{"", "not base64!", state[:20], state + "AA"} {
			if _, errText := answer(t, cs, "apply_change", args, bad, yes); !strings.Contains(errText, "did not issue for this call") {
				t.Fatalf("state %q: %q", bad, errText)
			}
		}
		if f.status(id) != "pending" || f.store.applies.Load() != 0 {
			t.Fatal("a tampered state applied the change")
		}
	})
}

func TestApproval_ExpiredStateRefused(t *testing.T) {
	t.Parallel()
	onEachBackend(t, func(t *testing.T, kit backendKit) {
		f := newApprovalFixtureOn(t, kit)
		cs := f.connect(clientOptions{protocol: protoMRTR, user: says(yes), manual: true})
		id := f.preview(cs, "theme", "dark")
		args := map[string]any{"change_id": id}
		state, _ := question(t, cs, "apply_change", args)

		f.clock.Advance(10*time.Minute + time.Second) // the preview itself lives 15 minutes
		_, errText := answer(t, cs, "apply_change", args, state, yes)
		if !strings.Contains(errText, "expired") {
			t.Fatalf("expired state: %q", errText)
		}
		if f.status(id) != "pending" {
			t.Fatalf("status %s", f.status(id))
		}
		// A fresh question still works while the preview lives.
		state, _ = question(t, cs, "apply_change", args)
		if out, errText := answer(t, cs, "apply_change", args, state, yes); errText != "" || out["status"] != "applied" {
			t.Fatalf("fresh question: %v %s", out, errText)
		}
	})
}

func TestApproval_StateNeverOutlivesThePreview(t *testing.T) {
	t.Parallel()
	onEachBackend(t, func(t *testing.T, kit backendKit) {
		f := newApprovalFixtureOn(t, kit, func(o *changeset.Options) { o.TTL = 2 * time.Minute })
		cs := f.connect(clientOptions{protocol: protoMRTR, user: says(yes), manual: true})
		id := f.preview(cs, "theme", "dark")
		args := map[string]any{"change_id": id}
		state, _ := question(t, cs, "apply_change", args)
		f.clock.Advance(2 * time.Minute)
		if _, errText := answer(t, cs, "apply_change", args, state, yes); !strings.Contains(errText, "expired") {
			t.Fatalf("state past the preview's expiry: %q", errText)
		}
	})
}

// go-sdk hands a pre-2026 client's own inputResponses and requestState to
// the handler unchanged: a client must not be able to approve for the user.
func TestApproval_ClientsOwnAnswerOnLegacySessionRefused(t *testing.T) {
	t.Parallel()
	onEachBackend(t, func(t *testing.T, kit backendKit) {
		f := newApprovalFixtureOn(t, kit)
		u := says(yes)
		cs := f.connect(clientOptions{protocol: protoLegacy, user: u})
		id := f.preview(cs, "theme", "dark")
		args := map[string]any{"change_id": id}

		for _, state := range []string{"", "made-up", base64.RawURLEncoding.EncodeToString(make([]byte, 64))} {
			_, errText := answer(t, cs, "apply_change", args, state, yes)
			if !strings.Contains(errText, "did not issue for this call") {
				t.Fatalf("forged answer with state %q: %q", state, errText)
			}
		}
		// A state without an answer is no approval either.
		if _, errText := answer(t, cs, "apply_change", args, "made-up", nil); !strings.Contains(errText, "did not issue") {
			t.Fatalf("state without answer: %q", errText)
		}
		if n, _ := u.asked(); n != 0 {
			t.Errorf("the user was asked %d times through a forged call", n)
		}
		if f.status(id) != "pending" || f.store.applies.Load() != 0 {
			t.Fatal("a client's own answer applied the change")
		}
	})
}

func TestApproval_ReplicasShareTheLedgersKeyAndOtherKeysAreRefused(t *testing.T) {
	t.Parallel()
	onEachBackend(t, func(t *testing.T, kit backendKit) {
		a := newApprovalFixtureOn(t, kit)
		replica := buildApprovalFixture(t, changeset.Options{Ledger: kit.Reopen(t, a.guard.Ledger())}, nil)
		foreign := buildApprovalFixture(t, changeset.Options{Ledger: kit.Reopen(t, a.guard.Ledger())}, []func(*changeset.Options){func(o *changeset.Options) {
			o.ApprovalKey = []byte(strings.Repeat("k", changeset.ApprovalKeySize))
		}})
		csA := a.connect(clientOptions{protocol: protoMRTR, user: says(yes), manual: true})
		id := a.preview(csA, "theme", "dark")
		args := map[string]any{"change_id": id}
		state, _ := question(t, csA, "apply_change", args)

		csF := foreign.connect(clientOptions{protocol: protoMRTR, user: says(yes), manual: true})
		if _, errText := answer(t, csF, "apply_change", args, state, yes); !strings.Contains(errText, "did not issue for this call") {
			t.Fatalf("a state sealed under another key: %q", errText)
		}
		csR := replica.connect(clientOptions{protocol: protoMRTR, user: says(yes), manual: true})
		if out, errText := answer(t, csR, "apply_change", args, state, yes); errText != "" || out["status"] != "applied" {
			t.Fatalf("a replica sharing the ledger refused the state: %v %s", out, errText)
		}
		if replica.store.get("theme") != "dark" {
			t.Fatal("the replica did not apply")
		}
	})
}
