package ledgertest

import (
	"context"
	"fmt"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/mcp-changeset/changeset-go/ledger"
)

func exerciseChain(t *testing.T, h Harness) {
	runAll(t, h, []test{
		{"EveryEntryChained", testChainEveryEntry},
		{"TamperedEntryNamed", testChainTampered},
		{"RowDisagreeingWithItsHistory", testChainRowDisagrees},
		{"PruneKeepsItVerifiable", testChainPrune},
		{"EntryDeletedOutsideAPrune", testChainDeletedAsPruned},
		{"CheckpointDetectsARewrite", testChainCheckpoint},
		{"ConcurrentWritersChainInCommitOrder", testChainConcurrent},
		{"AfterATrustedLinkReadsOnlyWhatCame", testChainAfter},
	})
}

// life writes the life of change id, in run run ("" for none): previewed,
// applied, undone, one second apart from the clock's time.
func life(t *testing.T, l *ledger.Ledger, clk *clock, id, run string) {
	t.Helper()
	ctx := context.Background()
	c := pendingChange(id, clk.Now())
	c.RunID, c.PreviewedBy = run, "agent:alice"
	if err := l.WithTx(ctx, func(tx *ledger.Tx) error { return tx.InsertChange(c) }); err != nil {
		t.Fatal(err)
	}
	moves := []struct {
		from, to ledger.Status
		edit     func(*ledger.Change)
	}{
		{ledger.Pending, ledger.Applying, func(c *ledger.Change) { c.ConfirmHash, c.AppliedBy = "", "agent:alice" }},
		{ledger.Applying, ledger.Applied, func(c *ledger.Change) { c.AppliedAt = c.UpdatedAt }},
		{ledger.Applied, ledger.Undoing, func(c *ledger.Change) { c.UndoneBy = "person:ann" }},
		{ledger.Undoing, ledger.Undone, func(c *ledger.Change) { c.UndoneAt = c.UpdatedAt }},
	}
	for _, m := range moves {
		clk.Set(clk.Now().Add(time.Second))
		if err := step(ctx, l, id, m.from, m.to, m.edit); err != nil {
			t.Fatal(err)
		}
	}
}

// verify runs Verify and fails the test on an error.
func verify(t *testing.T, l *ledger.Ledger, cp ledger.Link) *ledger.Verification {
	t.Helper()
	var cps []ledger.Link
	if !cp.IsZero() {
		cps = []ledger.Link{cp}
	}
	v, err := l.Verify(context.Background(), ledger.VerifyOptions{Checkpoints: cps})
	if err != nil {
		t.Fatalf("Verify: %v", err)
	}
	return v
}

// tamper runs statements on l's database directly, as someone with access
// to it would; "?" marks a parameter on every backend.
func tamper(t *testing.T, l *ledger.Ledger, query string, args ...any) {
	t.Helper()
	if strings.HasPrefix(l.Location(), "postgres") {
		for i := 1; strings.Contains(query, "?"); i++ {
			query = strings.Replace(query, "?", fmt.Sprintf("$%d", i), 1)
		}
	}
	if _, err := l.DB().ExecContext(context.Background(), query, args...); err != nil {
		t.Fatalf("%s: %v", query, err)
	}
}

// keepsHead reports whether l's backend keeps the chain's head in a row
// of its own (PostgreSQL's ledger_chain_head), which a rewrite must set
// too to go unnoticed.
func keepsHead(l *ledger.Ledger) bool { return strings.HasPrefix(l.Location(), "postgres") }

// rewriteHead sets the head row, where the backend keeps one, to link, as
// someone covering their tracks would; it checks first that Verify sees
// the head out of step.
func rewriteHead(t *testing.T, l *ledger.Ledger, link ledger.Link) {
	t.Helper()
	if !keepsHead(l) {
		return
	}
	if v := verify(t, l, ledger.Link{}); v.OK() || !strings.Contains(strings.Join(v.Problems, "\n"), "the chain's head") {
		t.Fatalf("Verify with the head row out of step = %q; want the head named", v.Problems)
	}
	tamper(t, l, `UPDATE ledger_chain_head SET seq = ?, hash = ?`, link.Seq, link.Hash[:])
}

// allEntries reads the whole history.
func allEntries(t *testing.T, l *ledger.Ledger) []ledger.HistoryEntry {
	t.Helper()
	all, err := l.History(context.Background(), ledger.HistoryFilter{})
	if err != nil {
		t.Fatal(err)
	}
	return all
}

// testChainEveryEntry writes the transitions of changes, a run and a prune
// and checks that each entry is numbered one above the one before it and
// carries the hash of its fields chained to that one's.
func testChainEveryEntry(t *testing.T, h Harness) {
	ctx := context.Background()
	l, clk := open(t, h)
	if v := verify(t, l, ledger.Link{}); !v.OK() || !v.Head.IsZero() || v.Entries != 0 {
		t.Fatalf("Verify of an empty ledger = %+v", v)
	}
	if err := l.WithTx(ctx, func(tx *ledger.Tx) error {
		return tx.InsertRunBy(&ledger.Run{ID: "run_1", Status: ledger.RunOpen, CreatedAt: t0, UpdatedAt: t0}, "agent:alice")
	}); err != nil {
		t.Fatal(err)
	}
	life(t, l, clk, "chg_1", "run_1")
	life(t, l, clk, "chg_2", "")
	all := allEntries(t, l)
	if len(all) != 11 {
		t.Fatalf("History holds %d entries, want 11", len(all))
	}
	var prev ledger.Hash
	for i, e := range all {
		if e.Seq != int64(i+1) {
			t.Errorf("entry %d has seq %d, want %d", i, e.Seq, i+1)
		}
		if want := ledger.HistoryHash(prev, e); e.Hash != want || e.Hash.IsZero() {
			t.Errorf("entry %d: hash %s, want %s", e.Seq, e.Hash, want)
		}
		prev = e.Hash
	}
	v := verify(t, l, ledger.Link{})
	last := all[len(all)-1]
	if !v.OK() || v.Entries != 11 || v.Pruned != 0 || v.Head != (ledger.Link{Seq: last.Seq, Hash: last.Hash}) || v.FirstBad != 0 {
		t.Fatalf("Verify = %+v, want intact with head %d", v, last.Seq)
	}
	// A hash changes with every field it covers.
	base := last
	for name, edit := range map[string]func(e *ledger.HistoryEntry){
		"seq": func(e *ledger.HistoryEntry) { e.Seq++ }, "at": func(e *ledger.HistoryEntry) { e.At = e.At.Add(time.Microsecond) },
		"change": func(e *ledger.HistoryEntry) { e.ChangeID += "x" }, "run": func(e *ledger.HistoryEntry) { e.RunID = "run_x" },
		"approval": func(e *ledger.HistoryEntry) { e.ApprovalID = "apr_x" }, "from": func(e *ledger.HistoryEntry) { e.From = "pending" },
		"to": func(e *ledger.HistoryEntry) { e.To = "expired" }, "by": func(e *ledger.HistoryEntry) { e.By = "agent:eve" },
		"note": func(e *ledger.HistoryEntry) { e.Note = "x" }, "removed": func(e *ledger.HistoryEntry) { e.Removed = 1 },
		// Two fields that would encode alike if the lengths were not part of the hash.
		"boundary": func(e *ledger.HistoryEntry) { e.ChangeID, e.RunID = e.ChangeID[:3], e.ChangeID[3:]+e.RunID },
	} {
		e := base
		edit(&e)
		if ledger.HistoryHash(all[len(all)-2].Hash, e) == last.Hash {
			t.Errorf("changing %s leaves the hash as it was", name)
		}
	}
}

// testChainTampered edits, re-times, deletes and reorders entries in the
// database and checks that Verify names the first entry that no longer
// chains, and that an intact ledger is intact.
func testChainTampered(t *testing.T, h Harness) {
	for _, tc := range []struct {
		name  string
		do    func(t *testing.T, l *ledger.Ledger)
		first int64
	}{
		{"an edited note", func(t *testing.T, l *ledger.Ledger) {
			tamper(t, l, `UPDATE ledger_history SET note = 'nothing to see' WHERE seq = 4`)
		}, 4},
		{"an edited actor", func(t *testing.T, l *ledger.Ledger) {
			tamper(t, l, `UPDATE ledger_history SET actor = 'agent:bob' WHERE seq = 3`)
		}, 3},
		{"a re-timed entry", func(t *testing.T, l *ledger.Ledger) {
			tamper(t, l, `UPDATE ledger_history SET at = at + 3600000000 WHERE seq = 6`)
		}, 6},
		{"a deleted entry", func(t *testing.T, l *ledger.Ledger) {
			tamper(t, l, `DELETE FROM ledger_history WHERE seq = 5`)
		}, 6},
		{"two entries swapped", func(t *testing.T, l *ledger.Ledger) {
			tamper(t, l, `UPDATE ledger_history SET seq = 1000 WHERE seq = 7`)
			tamper(t, l, `UPDATE ledger_history SET seq = 7 WHERE seq = 8`)
			tamper(t, l, `UPDATE ledger_history SET seq = 8 WHERE seq = 1000`)
		}, 7},
		{"a hash removed", func(t *testing.T, l *ledger.Ledger) {
			tamper(t, l, `UPDATE ledger_history SET hash = NULL WHERE seq = 2`)
		}, 2},
		{"an entry inserted", func(t *testing.T, l *ledger.Ledger) {
			tamper(t, l, `UPDATE ledger_history SET seq = seq + 1 WHERE seq = 10`)
			tamper(t, l, `INSERT INTO ledger_history (seq, at, change_id, from_status, to_status, actor, note, removed, hash)
				SELECT 10, at, change_id, from_status, to_status, actor, 'forged', 0, hash FROM ledger_history WHERE seq = 9`)
		}, 10},
	} {
		t.Run(tc.name, func(t *testing.T) {
			l, clk := open(t, h)
			life(t, l, clk, "chg_1", "")
			life(t, l, clk, "chg_2", "")
			if v := verify(t, l, ledger.Link{}); !v.OK() {
				t.Fatalf("Verify before tampering = %q", v.Problems)
			}
			tc.do(t, l)
			v := verify(t, l, ledger.Link{})
			if v.OK() || v.FirstBad != tc.first {
				t.Fatalf("Verify = first bad %d, %q; want entry %d named", v.FirstBad, v.Problems, tc.first)
			}
			if want := fmt.Sprintf("entry %d ", tc.first); !strings.HasPrefix(v.Problems[0], want) {
				t.Errorf("the first problem %q does not start %q", v.Problems[0], want)
			}
		})
	}
}

// testChainRowDisagrees moves a row without its history entry: the chain
// holds, the row does not agree with its last entry.
func testChainRowDisagrees(t *testing.T, h Harness) {
	l, clk := open(t, h)
	life(t, l, clk, "chg_1", "")
	tamper(t, l, `UPDATE changes SET status = 'applied' WHERE id = 'chg_1'`)
	v := verify(t, l, ledger.Link{})
	if v.OK() || v.FirstBad != 0 || len(v.Problems) != 1 || !strings.Contains(v.Problems[0], "change chg_1: applied, but its history ends at undone") {
		t.Fatalf("Verify = %+v; want the row named, the chain whole", v)
	}
}

// testChainPrune prunes changes and a run: the chain stays verifiable
// through the links the prune kept, and the prune entries count them.
func testChainPrune(t *testing.T, h Harness) {
	ctx := context.Background()
	l, clk := open(t, h)
	insertRuns(t, l, "run_1")
	life(t, l, clk, "chg_1", "run_1")
	life(t, l, clk, "chg_2", "")
	clk.Set(clk.Now().Add(48 * time.Hour))
	life(t, l, clk, "chg_3", "")
	before := allEntries(t, l)
	res, err := l.Prune(ctx, ledger.PruneOptions{OlderThan: 24 * time.Hour, By: "operator:dan", BatchSize: 1})
	if err != nil || len(res.Changes) != 2 || len(res.Runs) != 1 {
		t.Fatalf("Prune = %+v, %v", res, err)
	}
	after := allEntries(t, l)
	removed, prunes := 0, 0
	for _, e := range after {
		if e.To == ledger.HistoryPruned {
			prunes++
			removed += e.Removed
		}
	}
	// Two changes of five entries each, one a transaction; the run had no
	// entry of its own (inserted beside the ledger's transitions).
	if prunes != 3 || removed != 10 || len(after) != len(before)-10+3 {
		t.Fatalf("after the prune: %d prune entries recording %d deleted, %d entries (%d before)", prunes, removed, len(after), len(before))
	}
	v := verify(t, l, ledger.Link{})
	if !v.OK() || v.Pruned != 10 || v.Entries != len(after) || v.Head.Seq != after[len(after)-1].Seq {
		t.Fatalf("Verify after a prune = %+v", v)
	}
	// A checkpoint taken before the prune, on an entry it deleted, still
	// holds: the link of the entry is kept.
	if v := verify(t, l, ledger.Link{Seq: before[2].Seq, Hash: before[2].Hash}); !v.OK() {
		t.Fatalf("Verify with a checkpoint on a pruned entry = %q", v.Problems)
	}
	// Deleting a kept link breaks the chain at the entry after it, and
	// the count.
	tamper(t, l, `DELETE FROM ledger_history_pruned WHERE seq = 10`)
	v = verify(t, l, ledger.Link{})
	if v.OK() || v.FirstBad != 11 || len(v.Problems) != 2 || !strings.Contains(v.Problems[1], "keeps 9 links of pruned entries, but its prune entries record 10") {
		t.Fatalf("Verify without a pruned entry's link = first bad %d, %q; want 11 and the count", v.FirstBad, v.Problems)
	}
}

// testChainDeletedAsPruned deletes an entry and puts its link where a
// prune would: every link chains, but the prune entries do not account
// for it.
func testChainDeletedAsPruned(t *testing.T, h Harness) {
	l, clk := open(t, h)
	life(t, l, clk, "chg_1", "")
	life(t, l, clk, "chg_2", "")
	tamper(t, l, `INSERT INTO ledger_history_pruned (seq, hash) SELECT seq, hash FROM ledger_history WHERE seq = 6`)
	tamper(t, l, `DELETE FROM ledger_history WHERE seq = 6`)
	v := verify(t, l, ledger.Link{})
	if v.OK() || v.FirstBad != 0 || !strings.Contains(strings.Join(v.Problems, "\n"), "keeps 1 links of pruned entries, but its prune entries record 0") {
		t.Fatalf("Verify = %+v; want the unaccounted link reported", v)
	}
}

// testChainCheckpoint rewrites the history into a chain that holds
// together, and cuts it back to an earlier end: only a checkpoint taken
// before tells.
func testChainCheckpoint(t *testing.T, h Harness) {
	t.Run("rewritten", func(t *testing.T) {
		l, clk := open(t, h)
		life(t, l, clk, "chg_1", "")
		v := verify(t, l, ledger.Link{})
		cp := v.Head
		life(t, l, clk, "chg_2", "")
		if v := verify(t, l, cp); !v.OK() {
			t.Fatalf("Verify with a checkpoint of an earlier head = %q", v.Problems)
		}
		// Rewrite the actor of entry 2 and hash every entry again.
		tamper(t, l, `UPDATE ledger_history SET actor = 'agent:bob' WHERE seq = 2`)
		var prev ledger.Link
		for _, e := range allEntries(t, l) {
			e.Hash = ledger.HistoryHash(prev.Hash, e)
			tamper(t, l, `UPDATE ledger_history SET hash = ? WHERE seq = ?`, e.Hash[:], e.Seq)
			prev = ledger.Link{Seq: e.Seq, Hash: e.Hash}
		}
		rewriteHead(t, l, prev)
		if v := verify(t, l, ledger.Link{}); !v.OK() {
			t.Fatalf("Verify of the rewritten chain alone = %q; the rewrite should hold together", v.Problems)
		}
		v = verify(t, l, cp)
		if v.OK() || !strings.Contains(v.Problems[0], fmt.Sprintf("entry %d's hash is not the checkpoint's", cp.Seq)) {
			t.Fatalf("Verify with the checkpoint = %q; want the rewrite detected", v.Problems)
		}
	})
	t.Run("cut back", func(t *testing.T) {
		l, clk := open(t, h)
		life(t, l, clk, "chg_1", "")
		life(t, l, clk, "chg_2", "")
		cp := verify(t, l, ledger.Link{}).Head
		// chg_2 vanishes with its entries, the newest: what is left is a
		// chain whose rows agree with it.
		tamper(t, l, `DELETE FROM ledger_history WHERE change_id = 'chg_2'`)
		tamper(t, l, `DELETE FROM changes WHERE id = 'chg_2'`)
		all := allEntries(t, l)
		rewriteHead(t, l, ledger.Link{Seq: all[len(all)-1].Seq, Hash: all[len(all)-1].Hash})
		if v := verify(t, l, ledger.Link{}); !v.OK() {
			t.Fatalf("Verify of the cut history alone = %q; the cut should hold together", v.Problems)
		}
		v := verify(t, l, cp)
		if v.OK() || !strings.Contains(v.Problems[0], fmt.Sprintf("ends at entry 5, before the checkpoint's entry %d", cp.Seq)) {
			t.Fatalf("Verify with the checkpoint = %q; want the cut detected", v.Problems)
		}
	})
}

// testChainConcurrent has writers of two handles (as two processes) make
// transitions at once: the entries are numbered without gaps in the order
// they committed, and the chain verifies.
func testChainConcurrent(t *testing.T, h Harness) {
	if h.OpenSecond == nil {
		t.Skip("the harness opens no second handle")
	}
	ctx := ctxFor(t)
	l, _ := open(t, h)
	l2 := second(t, h, l)
	const writers, each = 8, 10
	var wg sync.WaitGroup
	errs := make(chan error, writers)
	for w := range writers {
		wg.Add(1)
		go func() {
			defer wg.Done()
			on := l
			if w%2 == 1 {
				on = l2
			}
			for i := range each {
				c := pendingChange(fmt.Sprintf("chg_%d_%d", w, i), t0)
				if err := on.WithTx(ctx, func(tx *ledger.Tx) error { return tx.InsertChange(c) }); err != nil {
					errs <- err
					return
				}
				if err := step(ctx, on, c.ID, ledger.Pending, ledger.Expired, func(c *ledger.Change) { c.ConfirmHash = "" }); err != nil {
					errs <- err
					return
				}
			}
		}()
	}
	wg.Wait()
	close(errs)
	for err := range errs {
		t.Fatal(err)
	}
	all := allEntries(t, l)
	if len(all) != 2*writers*each {
		t.Fatalf("History holds %d entries, want %d", len(all), 2*writers*each)
	}
	for i, e := range all {
		if e.Seq != int64(i+1) {
			t.Fatalf("entry %d has seq %d: the numbering has a gap or a repeat", i, e.Seq)
		}
	}
	if v := verify(t, l2, ledger.Link{}); !v.OK() || v.Entries != len(all) {
		t.Fatalf("Verify = %+v", v)
	}
}

// testChainAfter verifies from a link verified before: only what came
// after it is read, a damaged entry after it is named, and a history that
// no longer holds the link fails.
func testChainAfter(t *testing.T, h Harness) {
	ctx := context.Background()
	l, clk := open(t, h)
	life(t, l, clk, "chg_1", "")
	trusted := verify(t, l, ledger.Link{}).Head
	life(t, l, clk, "chg_2", "")
	v, err := l.Verify(ctx, ledger.VerifyOptions{After: trusted})
	if err != nil || !v.OK() || v.Entries != 5 || v.Head.Seq != 10 {
		t.Fatalf("Verify after entry %d = %+v, %v; want the 5 entries after it", trusted.Seq, v, err)
	}
	// A row before the trusted link that disagrees is not read; one after
	// it is.
	tamper(t, l, `UPDATE changes SET status = 'applied' WHERE id = 'chg_1'`)
	if v, _ := l.Verify(ctx, ledger.VerifyOptions{After: trusted}); !v.OK() {
		t.Errorf("Verify after entry %d read chg_1, named only before it: %q", trusted.Seq, v.Problems)
	}
	tamper(t, l, `UPDATE changes SET status = 'applied' WHERE id = 'chg_2'`)
	if v, _ := l.Verify(ctx, ledger.VerifyOptions{After: trusted}); v.OK() || !strings.Contains(v.Problems[0], "change chg_2: applied") {
		t.Errorf("Verify after entry %d = %q; want chg_2 named", trusted.Seq, v.Problems)
	}
	tamper(t, l, `UPDATE changes SET status = 'undone' WHERE id IN ('chg_1', 'chg_2')`)
	// An entry after it edited: named.
	tamper(t, l, `UPDATE ledger_history SET note = 'x' WHERE seq = 8`)
	if v, _ := l.Verify(ctx, ledger.VerifyOptions{After: trusted}); v.OK() || v.FirstBad != 8 {
		t.Errorf("Verify after entry %d with entry 8 edited = first bad %d, %q", trusted.Seq, v.FirstBad, v.Problems)
	}
	tamper(t, l, `UPDATE ledger_history SET note = '' WHERE seq = 8`)
	// The trusted entry itself rewritten: refused.
	tamper(t, l, `UPDATE ledger_history SET hash = ? WHERE seq = ?`, make([]byte, 32), trusted.Seq)
	if v, _ := l.Verify(ctx, ledger.VerifyOptions{After: trusted}); v.OK() || v.FirstBad != trusted.Seq || !strings.Contains(v.Problems[0], "no longer in the history") {
		t.Errorf("Verify after a rewritten entry %d = first bad %d, %q", trusted.Seq, v.FirstBad, v.Problems)
	}
	tamper(t, l, `UPDATE ledger_history SET hash = ? WHERE seq = ?`, trusted.Hash[:], trusted.Seq)
	// A trusted link whose entry a prune deleted still holds.
	clk.Set(clk.Now().Add(48 * time.Hour))
	if _, err := l.Prune(ctx, ledger.PruneOptions{OlderThan: 24 * time.Hour, By: "operator:dan"}); err != nil {
		t.Fatal(err)
	}
	if v, err := l.Verify(ctx, ledger.VerifyOptions{After: trusted}); err != nil || !v.OK() || v.Pruned != 5 {
		t.Errorf("Verify after a pruned entry %d = %+v, %v", trusted.Seq, v, err)
	}
}
