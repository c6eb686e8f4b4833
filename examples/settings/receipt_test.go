package main

import (
	"context"
	"path/filepath"
	"testing"

	"github.com/mcp-changeset/changeset-go/examples/internal/exampletest"
	"github.com/mcp-changeset/changeset-go/ledger"
)

// TestReceipts_AnAgentKeepsThemAndTheLedgerHoldsThem drives the settings
// server over stdio as an agent: the receipts its apply and its undo
// return are the links of the history entries that moved the change to
// applied and undone, get_change_status lists the same, and the ledger,
// opened read-only beside the running server, verifies with each receipt
// as a checkpoint. An apply refused because the setting changed after the
// preview returns no receipt; its status lists the apply_failed entry's.
func TestReceipts_AnAgentKeepsThemAndTheLedgerHoldsThem(t *testing.T) {
	path := filepath.Join(t.TempDir(), "ledger.db")
	c := exampletest.Start(t, "settings", []string{"--ledger", path}, exampletest.Guarded)

	p := c.Must("preview_set_setting", map[string]any{"key": "theme", "value": "dark"})
	id := p["change_id"].(string)
	applied := c.Must("apply_change", map[string]any{"change_id": id, "confirmation_token": p["confirmation_token"]})
	undone := c.Must("undo_change", map[string]any{"change_id": id, "undo_token": applied["undo_token"]})
	applyReceipt, undoReceipt := receiptOf(t, applied["receipt"]), receiptOf(t, undone["receipt"])

	st := c.Must("get_change_status", map[string]any{"change_id": id})
	listed := map[string]ledger.Link{}
	for _, item := range st["receipts"].([]any) {
		r := item.(map[string]any)
		listed[r["to"].(string)] = receiptOf(t, r)
	}
	if listed["applied"] != applyReceipt || listed["undone"] != undoReceipt {
		t.Fatalf("get_change_status lists %v; the apply returned %v and the undo %v", listed, applyReceipt, undoReceipt)
	}

	// A person's edit between the preview and the apply: the apply is
	// refused, with no receipt to give.
	stale := c.Must("preview_set_setting", map[string]any{"key": "language", "value": "fr"})
	edit := c.Must("preview_set_setting", map[string]any{"key": "language", "value": "de"})
	c.Must("apply_change", map[string]any{"change_id": edit["change_id"], "confirmation_token": edit["confirmation_token"]})
	c.Refused("apply_change", map[string]any{"change_id": stale["change_id"], "confirmation_token": stale["confirmation_token"]}, "changed")
	st = c.Must("get_change_status", map[string]any{"change_id": stale["change_id"]})
	list := st["receipts"].([]any)
	last := list[len(list)-1].(map[string]any)
	if last["to"] != "apply_failed" {
		t.Fatalf("the refused change's receipts end with %v, want apply_failed", last)
	}
	failed := receiptOf(t, last)

	ctx := context.Background()
	l, err := ledger.Open(ctx, path, ledger.OpenOptions{ReadOnly: true})
	if err != nil {
		t.Fatal(err)
	}
	defer l.Close()
	entries, err := l.History(ctx, ledger.HistoryFilter{ChangeID: id})
	if err != nil {
		t.Fatal(err)
	}
	found := map[string]ledger.Link{}
	for _, e := range entries {
		found[e.To] = ledger.Link{Seq: e.Seq, Hash: e.Hash}
	}
	if found["applied"] != applyReceipt || found["undone"] != undoReceipt {
		t.Fatalf("the ledger's entries %v; the receipts %v and %v", found, applyReceipt, undoReceipt)
	}
	for _, r := range []ledger.Link{applyReceipt, undoReceipt, failed} {
		v, err := l.Verify(ctx, ledger.VerifyOptions{Checkpoints: []ledger.Link{r}})
		if err != nil {
			t.Fatal(err)
		}
		if !v.OK() {
			t.Fatalf("Verify with the receipt %d %s: %v", r.Seq, r.Hash, v.Problems)
		}
	}
}

// receiptOf reads a receipt ({seq, hash}, and in a status also to and at)
// as the ledger's link.
func receiptOf(t *testing.T, v any) ledger.Link {
	t.Helper()
	r, ok := v.(map[string]any)
	if !ok {
		t.Fatalf("no receipt: %v", v)
	}
	seq, _ := r["seq"].(float64)
	hash, _ := r["hash"].(string)
	h, err := ledger.ParseHash(hash)
	if err != nil || seq < 1 {
		t.Fatalf("receipt %v: seq %v, hash %v", r, seq, err)
	}
	return ledger.Link{Seq: int64(seq), Hash: h}
}
