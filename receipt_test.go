package changeset_test

import (
	"context"
	"encoding/json"
	"regexp"
	"slices"
	"strings"
	"testing"
	"time"

	changeset "github.com/mcp-changeset/changeset-go"
	"github.com/mcp-changeset/changeset-go/ledger"
)

// hexHash is the form of a receipt's hash.
var hexHash = regexp.MustCompile(`^[0-9a-f]{64}$`)

// receiptIn reads the receipt out of a tool's result, failing the test
// when it has none or one of the wrong shape.
func receiptIn(t *testing.T, out map[string]any) ledger.Link {
	t.Helper()
	r, ok := out["receipt"].(map[string]any)
	if !ok {
		t.Fatalf("the result carries no receipt: %v", out)
	}
	return linkOf(t, r)
}

// linkOf reads a receipt's {seq, hash} as the ledger's link.
func linkOf(t *testing.T, r map[string]any) ledger.Link {
	t.Helper()
	seq, _ := r["seq"].(float64)
	hash, _ := r["hash"].(string)
	if seq < 1 || !hexHash.MatchString(hash) {
		t.Fatalf("receipt %v: want a positive seq and 64 lower-case hex", r)
	}
	h, err := ledger.ParseHash(hash)
	if err != nil {
		t.Fatal(err)
	}
	return ledger.Link{Seq: int64(seq), Hash: h}
}

// ownEntries returns the history entries of change id's own transitions,
// oldest first: its approvals' entries left out.
func ownEntries(t *testing.T, l *ledger.Ledger, id string) []ledger.HistoryEntry {
	t.Helper()
	all, err := l.History(context.Background(), ledger.HistoryFilter{ChangeID: id})
	if err != nil {
		t.Fatal(err)
	}
	return slices.DeleteFunc(all, func(e ledger.HistoryEntry) bool { return e.ApprovalID != "" })
}

// entryTo returns the link of the entry of change id that moved it to
// status to, failing when there is not exactly one.
func entryTo(t *testing.T, l *ledger.Ledger, id string, to ledger.Status) ledger.Link {
	t.Helper()
	var found []ledger.Link
	for _, e := range ownEntries(t, l, id) {
		if e.To == string(to) {
			found = append(found, ledger.Link{Seq: e.Seq, Hash: e.Hash})
		}
	}
	if len(found) != 1 {
		t.Fatalf("change %s has %d entries to %s, want 1", id, len(found), to)
	}
	return found[0]
}

// verifiesWith checks that the ledger's chain holds and still contains
// link, as a checkpoint kept elsewhere would be checked.
func verifiesWith(t *testing.T, l *ledger.Ledger, link ledger.Link) {
	t.Helper()
	v, err := l.Verify(context.Background(), ledger.VerifyOptions{Checkpoints: []ledger.Link{link}})
	if err != nil {
		t.Fatal(err)
	}
	if !v.OK() {
		t.Fatalf("Verify with the receipt %d %s as checkpoint: %v", link.Seq, link.Hash, v.Problems)
	}
}

// TestReceipt_ApplyAndUndoNameTheirHistoryEntries: apply_change and
// undo_change each return the link of the history entry that moved the
// change to applied and to undone; the chain verifies with either as a
// checkpoint; get_change_status lists the receipts of every transition,
// oldest first, with the status each moved to and when.
func TestReceipt_ApplyAndUndoNameTheirHistoryEntries(t *testing.T) {
	onEachBackend(t, func(t *testing.T, kit backendKit) {
		f := newFixtureOn(t, kit)
		l := f.guard.Ledger()
		id, token := f.preview("set", "theme", "dark")
		f.clock.Advance(time.Second)
		applied := mustCall(t, f.session, "apply_change", map[string]any{"change_id": id, "confirmation_token": token})
		got := receiptIn(t, applied)
		if want := entryTo(t, l, id, ledger.Applied); got != want {
			t.Fatalf("apply's receipt %d %s, the applied entry is %d %s", got.Seq, got.Hash, want.Seq, want.Hash)
		}
		verifiesWith(t, l, got)

		f.clock.Advance(time.Second)
		undone := mustCall(t, f.session, "undo_change", map[string]any{"change_id": id, "undo_token": applied["undo_token"]})
		undoReceipt := receiptIn(t, undone)
		if want := entryTo(t, l, id, ledger.Undone); undoReceipt != want {
			t.Fatalf("undo's receipt %d %s, the undone entry is %d %s", undoReceipt.Seq, undoReceipt.Hash, want.Seq, want.Hash)
		}
		if undoReceipt.Seq <= got.Seq {
			t.Fatalf("the undo's receipt %d is not after the apply's %d", undoReceipt.Seq, got.Seq)
		}
		verifiesWith(t, l, undoReceipt)

		st := mustCall(t, f.session, "get_change_status", map[string]any{"change_id": id})
		list, _ := st["receipts"].([]any)
		entries := ownEntries(t, l, id)
		if len(list) != len(entries) {
			t.Fatalf("get_change_status lists %d receipts, the history holds %d transitions: %v", len(list), len(entries), list)
		}
		var tos []string
		for i, item := range list {
			r, _ := item.(map[string]any)
			e := entries[i]
			if link := linkOf(t, r); link != (ledger.Link{Seq: e.Seq, Hash: e.Hash}) {
				t.Errorf("receipt %d is %d %s, the entry is %d %s", i, link.Seq, link.Hash, e.Seq, e.Hash)
			}
			if at, _ := r["at"].(string); at != e.At.UTC().Format(time.RFC3339) {
				t.Errorf("receipt %d at %q, the entry at %s", i, at, e.At)
			}
			to, _ := r["to"].(string)
			tos = append(tos, to)
		}
		if want := []string{"pending", "applying", "applied", "undoing", "undone"}; !slices.Equal(tos, want) {
			t.Errorf("the receipts move to %v, want %v", tos, want)
		}
	})
}

// TestReceipt_TrustedCodeGetsTheSameReceipts: Guard.Apply and
// Guard.UndoAs return the receipts the tools do, and Guard.Status lists
// them.
func TestReceipt_TrustedCodeGetsTheSameReceipts(t *testing.T) {
	f := newFixture(t)
	ctx := context.Background()
	l := f.guard.Ledger()
	p, err := f.guard.Preview(ctx, "set", map[string]any{"key": "language", "value": "fr"})
	if err != nil {
		t.Fatal(err)
	}
	res, err := f.guard.Apply(ctx, p.ChangeID, p.ConfirmationToken)
	if err != nil {
		t.Fatal(err)
	}
	want := entryTo(t, l, p.ChangeID, ledger.Applied)
	if res.Receipt == nil || res.Receipt.Seq != want.Seq || res.Receipt.Hash != want.Hash.String() {
		t.Fatalf("Apply's receipt %+v, the applied entry is %d %s", res.Receipt, want.Seq, want.Hash)
	}
	u, err := f.guard.UndoAs(ctx, p.ChangeID, changeset.Person("alice"))
	if err != nil {
		t.Fatal(err)
	}
	want = entryTo(t, l, p.ChangeID, ledger.Undone)
	if u.Receipt == nil || u.Receipt.Seq != want.Seq || u.Receipt.Hash != want.Hash.String() {
		t.Fatalf("UndoAs's receipt %+v, the undone entry is %d %s", u.Receipt, want.Seq, want.Hash)
	}
	st, err := f.guard.Status(ctx, p.ChangeID)
	if err != nil {
		t.Fatal(err)
	}
	if n := len(st.Receipts); n != 5 || st.Receipts[n-1].Seq != u.Receipt.Seq || st.Receipts[n-1].Hash != u.Receipt.Hash || st.Receipts[n-1].To != "undone" {
		t.Fatalf("Status lists %+v, want 5 receipts ending with the undo's %+v", st.Receipts, u.Receipt)
	}
}

// TestReceipt_FailedApplyCarriesNoneAndItsStatusShowsTheFailure: an
// apply that fails is a tool error, with no receipt and nothing shaped
// like a hash in its text; get_change_status then lists the receipt of
// the apply_failed entry, which verifies. A refused apply (a wrong token)
// writes no entry, so the status lists only the preview's.
func TestReceipt_FailedApplyCarriesNoneAndItsStatusShowsTheFailure(t *testing.T) {
	onEachBackend(t, func(t *testing.T, kit backendKit) {
		f := newFixtureOn(t, kit)
		l := f.guard.Ledger()
		id, token := f.preview("fail", "theme", "dark")
		text := mustFail(t, f.session, "apply_change", map[string]any{"change_id": id, "confirmation_token": token}, "PathError")
		if strings.Contains(text, "receipt") || regexp.MustCompile(`[0-9a-f]{64}`).MatchString(text) {
			t.Fatalf("the failed apply's error carries a receipt or a hash: %s", text)
		}
		st := mustCall(t, f.session, "get_change_status", map[string]any{"change_id": id})
		list, _ := st["receipts"].([]any)
		if len(list) == 0 {
			t.Fatalf("no receipts in %v", st)
		}
		last, _ := list[len(list)-1].(map[string]any)
		if last["to"] != "apply_failed" {
			t.Fatalf("the last receipt moved to %v, want apply_failed: %v", last["to"], list)
		}
		link := linkOf(t, last)
		if want := entryTo(t, l, id, ledger.ApplyFailed); link != want {
			t.Fatalf("the apply_failed receipt %d %s, the entry is %d %s", link.Seq, link.Hash, want.Seq, want.Hash)
		}
		verifiesWith(t, l, link)

		other, _ := f.preview("set", "language", "fr")
		mustFail(t, f.session, "apply_change", map[string]any{"change_id": other, "confirmation_token": "confirm_" + strings.Repeat("A", 43)}, "invalid confirmation token")
		st = mustCall(t, f.session, "get_change_status", map[string]any{"change_id": other})
		if list, _ := st["receipts"].([]any); len(list) != 1 || list[0].(map[string]any)["to"] != "pending" {
			t.Fatalf("a refused apply's change lists %v, want the preview's receipt alone", st["receipts"])
		}
	})
}

// TestReceipt_RunChangesAndReportsCarryNone: a run's list of changes
// leaves the receipts out (get_change_status has them), and so does the
// report of a run's undo.
func TestReceipt_RunChangesAndReportsCarryNone(t *testing.T) {
	f := newFixture(t)
	run := mustCall(t, f.session, "start_run", map[string]any{"label": "receipts"})["run_id"]
	p := mustCall(t, f.session, "preview_set", map[string]any{"key": "theme", "value": "dark", "run_id": run})
	f.apply(p["change_id"].(string), p["confirmation_token"].(string))
	dry := mustCall(t, f.session, "undo_run", map[string]any{"run_id": run})
	rep := mustCall(t, f.session, "undo_run", map[string]any{"run_id": run, "dry_run": false, "confirmation_token": dry["confirmation_token"]})
	if _, ok := rep["receipt"]; ok {
		t.Fatalf("the run's report carries a receipt: %v", rep)
	}
	detail := mustCall(t, f.session, "get_run", map[string]any{"run_id": run})
	changes, _ := detail["changes"].([]any)
	if len(changes) != 1 {
		t.Fatalf("get_run lists %v", detail["changes"])
	}
	if _, ok := changes[0].(map[string]any)["receipts"]; ok {
		t.Fatalf("a run's change carries receipts: %v", changes[0])
	}
	st := mustCall(t, f.session, "get_change_status", map[string]any{"change_id": p["change_id"]})
	if list, _ := st["receipts"].([]any); len(list) != 5 || list[4].(map[string]any)["to"] != "undone" {
		t.Fatalf("the undone change lists %v", st["receipts"])
	}
}

// TestReceipt_TheOnlyHashesAnAgentSeesAreTheChains: a hash in a receipt
// is no secret, and it is the only thing shaped like a digest that
// reaches the agent. Across a preview, an apply, an undo and their
// statuses, no digest the ledger keeps for the change (of its payload,
// its state, its scope, its tokens) appears in a result, and every
// 64-hex string that does is the hash of an entry of the history.
func TestReceipt_TheOnlyHashesAnAgentSeesAreTheChains(t *testing.T) {
	f := newFixture(t)
	ctx := context.Background()
	l := f.guard.Ledger()
	var outputs []map[string]any
	var digests []string
	keep := func(id string) {
		c, err := l.Change(ctx, id)
		if err != nil {
			t.Fatal(err)
		}
		for _, d := range []string{string(c.PayloadHash), string(c.StateHash), string(c.ScopeHash), string(c.ConfirmHash), string(c.UndoHash)} {
			if d != "" {
				digests = append(digests, d)
			}
		}
	}
	p := mustCall(t, f.session, "preview_set", map[string]any{"key": "theme", "value": "dark"})
	id := p["change_id"].(string)
	keep(id)
	a := mustCall(t, f.session, "apply_change", map[string]any{"change_id": id, "confirmation_token": p["confirmation_token"]})
	keep(id) // the undo token's digest, live now
	outputs = append(outputs, p, a, mustCall(t, f.session, "get_change_status", map[string]any{"change_id": id}))
	u := mustCall(t, f.session, "undo_change", map[string]any{"change_id": id, "undo_token": a["undo_token"]})
	outputs = append(outputs, u, mustCall(t, f.session, "get_change_status", map[string]any{"change_id": id}))
	if len(digests) < 5 {
		t.Fatalf("only %d digests to look for", len(digests))
	}

	chain := map[string]bool{}
	all, err := l.History(ctx, ledger.HistoryFilter{})
	if err != nil {
		t.Fatal(err)
	}
	for _, e := range all {
		chain[e.Hash.String()] = true
	}
	shaped := regexp.MustCompile(`[0-9a-fA-F]{64}`)
	seen := 0
	for _, out := range outputs {
		raw, _ := json.Marshal(out)
		for _, d := range digests {
			if strings.Contains(string(raw), d) {
				t.Errorf("a result holds the digest %s: %s", d, raw)
			}
		}
		for _, m := range shaped.FindAllString(string(raw), -1) {
			if !chain[m] {
				t.Errorf("a result holds %s, shaped like a digest and no hash of the history: %s", m, raw)
			}
			seen++
		}
	}
	if seen == 0 {
		t.Fatal("no receipt hash in any result")
	}
}
