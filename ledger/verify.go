package ledger

import (
	"context"
	"fmt"
	"iter"
)

// VerifyOptions say what [Ledger.Verify] checks besides the chain and the
// rows.
type VerifyOptions struct {
	// Checkpoints are links taken earlier and kept elsewhere (signed
	// checkpoints, see package checkpoint; receipts an agent was given):
	// the history must still hold, for each, an entry or a pruned entry's
	// link with its Seq and its Hash. A history rewritten after one, even
	// into a chain that holds together, or cut back to an earlier end,
	// fails that.
	Checkpoints []Link
	// After, when not zero, is a link Verify checked before (the last
	// checkpoint's, say): Verify then trusts the history up to it. It
	// checks that the history still holds that link, hashes only the
	// entries after it, and checks only the rows they name, so that its
	// cost follows what was written since, not the ledger's size. The
	// count of pruned entries' links against the prune entries, which
	// needs the whole history, is left out.
	After Link
	// Progress, if set, is called as Verify reads: stage is "history",
	// "runs" or "changes", done how many of them it has read, total how
	// many there are (0 when unknown).
	Progress func(stage string, done, total int)
}

// Verification is what [Ledger.Verify] found.
type Verification struct {
	// Entries is how many history entries Verify hashed again, Pruned how
	// many links of pruned entries it read.
	Entries, Pruned int
	// Head is the newest link of the chain (zero for an empty history).
	Head Link
	// FirstBad is the Seq of the first entry or link that does not chain
	// to the one before it; 0 when every one does.
	FirstBad int64
	// Problems says what is wrong, one line each, in the order of the
	// history; empty when the history and the rows agree.
	Problems []string
	// Checkpoints says, for each of VerifyOptions.Checkpoints in its
	// order, what is wrong with the history against it ("" when the
	// history holds it); each line is among Problems too.
	Checkpoints []string
}

// OK reports whether Verify found nothing wrong.
func (v *Verification) OK() bool { return len(v.Problems) == 0 }

// maxChainProblems is how many broken links Verify describes; it counts
// the rest.
const maxChainProblems = 100

// Verify reads the whole history as one consistent snapshot and checks
// that it is the chain the ledger wrote (see [HistoryHash]): every entry's
// hash again from its fields and the link before it, every pruned entry's
// link in its place, as many links of pruned entries as the prune entries
// record, the head the backend keeps (on PostgreSQL a row of its own, so
// that deleting the newest entries shows there too), and each of
// opts.Checkpoints still there. It then checks every
// change and run against the status of its last entry and the invariants
// of [Ledger.CheckWith]. An entry edited, re-timed, deleted or moved makes
// the entry itself, or the one after it, fail to chain: Verification
// names the first (FirstBad) and describes each.
//
// It only reads, so it works on a ledger opened read-only, and takes no
// lock a writer waits for; on SQLite its snapshot keeps the write-ahead
// log from being checkpointed past it while it runs. Its cost grows with
// the ledger (docs/benchmarks.md).
func (l *Ledger) Verify(ctx context.Context, opts VerifyOptions) (*Verification, error) {
	progress := opts.Progress
	if progress == nil {
		progress = func(string, int, int) {}
	}
	ctx, cancel := context.WithCancel(ctx) // ends the snapshot with Verify
	defer cancel()
	tx, err := l.b.BeginSnapshot(ctx)
	if err != nil {
		return nil, err
	}
	defer tx.Rollback()
	w := chainWalk{v: &Verification{}, reached: map[string]string{}}
	if !opts.After.IsZero() {
		found, err := l.linkAt(ctx, tx, opts.After.Seq)
		if err != nil {
			return nil, err
		}
		if found == nil || found.Hash != opts.After.Hash {
			w.v.FirstBad = opts.After.Seq
			w.v.Problems = append(w.v.Problems, fmt.Sprintf("entry %d is no longer in the history as it was verified before: the history was rewritten or cut back since", opts.After.Seq))
			return w.v, nil
		}
		w.prev, w.v.Head, w.linkAfter, w.named = opts.After, opts.After, opts.After.Seq, map[string]bool{}
	}
	entries := l.historyPages(ctx, tx, HistoryFilter{After: opts.After.Seq})
	links := pages(func() ([]Link, error) { return l.b.ListPrunedLinks(ctx, tx, w.linkAfter, scanPage) },
		func(last Link) { w.linkAfter = last.Seq })
	if err := w.merge(entries, links, func() { progress("history", w.v.Entries+w.v.Pruned, 0) }); err != nil {
		return nil, err
	}
	head, err := l.b.ChainHead(ctx, tx)
	if err != nil {
		return nil, err
	}
	switch {
	case head.Seq != w.v.Head.Seq:
		w.v.Problems = append(w.v.Problems, fmt.Sprintf("the chain's head is entry %d, but the history ends at entry %d: the newest entries were deleted, or entries added outside the ledger", head.Seq, w.v.Head.Seq))
	case head.Hash != w.v.Head.Hash:
		w.v.Problems = append(w.v.Problems, fmt.Sprintf("the chain's head holds another hash for entry %d than the history: the history was rewritten", head.Seq))
	}
	w.finish(opts.After.IsZero())
	for _, cp := range opts.Checkpoints {
		problem, err := l.checkpointProblem(ctx, tx, cp, w.v.Head)
		if err != nil {
			return nil, err
		}
		w.v.Checkpoints = append(w.v.Checkpoints, problem)
		if problem != "" {
			w.v.Problems = append(w.v.Problems, problem)
		}
	}
	var rows []string
	if opts.After.IsZero() {
		rows, err = l.checkAgainst(ctx, tx, w.reached, progress)
	} else {
		rows, err = l.checkNamed(ctx, tx, w.changes, w.runs, progress)
	}
	w.v.Problems = append(w.v.Problems, rows...)
	if err != nil {
		return w.v, err
	}
	return w.v, nil
}

// chainWalk is the state of Verify's walk along the chain.
type chainWalk struct {
	v         *Verification
	prev      Link              // the link before the next one
	removed   int               // the entries the prune entries say they deleted
	broken    int               // links that did not chain, described or not
	reached   map[string]string // change or run ID → its last entry's status
	linkAfter int64             // where the next page of pruned links starts
	// named, when not nil (Verify with After), collects in changes and
	// runs the rows the entries read name, each once.
	named         map[string]bool
	changes, runs []string
}

// name adds id to list unless it is empty or named already.
func (w *chainWalk) name(list *[]string, id string) {
	if id != "" && !w.named[id] {
		w.named[id] = true
		*list = append(*list, id)
	}
}

// merge walks the entries and the pruned links together, in the order of
// their Seq, calling tick after each page.
func (w *chainWalk) merge(entries iter.Seq2[[]HistoryEntry, error], links iter.Seq2[[]Link, error], tick func()) error {
	nextLink, stop := pull(links)
	defer stop()
	link, more, err := nextLink()
	if err != nil {
		return err
	}
	step := func(before int64) error {
		for more && link.Seq < before {
			w.pruned(link)
			if link, more, err = nextLink(); err != nil {
				return err
			}
		}
		return nil
	}
	for page, err := range entries {
		if err != nil {
			return err
		}
		for _, e := range page {
			if err := step(e.Seq); err != nil {
				return err
			}
			if more && link.Seq == e.Seq {
				w.fail(e.Seq, fmt.Sprintf("entry %d is in the history and among the pruned entries' links at once", e.Seq))
				if link, more, err = nextLink(); err != nil {
					return err
				}
			}
			w.entry(e)
		}
		tick()
	}
	return step(1<<63 - 1)
}

// pull turns a sequence of pages into a function that returns one item
// at a time, more false at the end.
func pull[T any](seq iter.Seq2[[]T, error]) (next func() (item T, more bool, err error), stop func()) {
	nextPage, stop := iter.Pull2(seq)
	var page []T
	next = func() (T, bool, error) {
		var zero T
		for len(page) == 0 {
			p, err, ok := nextPage()
			if !ok {
				return zero, false, nil
			}
			if err != nil {
				return zero, false, err
			}
			page = p
		}
		item := page[0]
		page = page[1:]
		return item, true, nil
	}
	return next, stop
}

// entry checks one entry against the link before it.
func (w *chainWalk) entry(e HistoryEntry) {
	w.v.Entries++
	w.v.Head = Link{Seq: e.Seq, Hash: e.Hash}
	if e.To == HistoryPruned {
		w.removed += e.Removed
	}
	if w.named != nil {
		w.name(&w.changes, e.ChangeID)
		w.name(&w.runs, e.RunID)
	}
	reach(w.reached, e)
	switch {
	case e.Hash.IsZero():
		w.fail(e.Seq, fmt.Sprintf("entry %d (%s) has no hash: it was written outside the ledger, or its hash was removed", e.Seq, e.About()+" to "+e.To))
	case HistoryHash(w.prev.Hash, e) != e.Hash:
		after := "the start of the history"
		if w.prev.Seq != 0 {
			after = fmt.Sprintf("entry %d", w.prev.Seq)
		}
		w.fail(e.Seq, fmt.Sprintf("entry %d (%s) does not match its hash after %s: it was edited, re-timed or moved, or an entry between them was deleted", e.Seq, e.About()+" to "+e.To, after))
	}
	w.prev = Link{Seq: e.Seq, Hash: e.Hash}
}

// pruned takes the link of a pruned entry: its hash cannot be computed
// again (the entry is gone), but the entry after it must chain to it.
func (w *chainWalk) pruned(l Link) {
	w.v.Pruned++
	w.v.Head = l
	if l.Hash.IsZero() {
		w.fail(l.Seq, fmt.Sprintf("the link of pruned entry %d has no hash", l.Seq))
	}
	w.prev = l
}

// fail records a link that does not chain: the first is FirstBad, and
// the first maxChainProblems are described.
func (w *chainWalk) fail(seq int64, problem string) {
	if w.v.FirstBad == 0 {
		w.v.FirstBad = seq
	}
	w.broken++
	if w.broken <= maxChainProblems {
		w.v.Problems = append(w.v.Problems, problem)
	}
}

// finish adds what can be told only at the end: links past the ones
// described, and the pruned links against the prune entries' counts
// (when the walk read the whole history).
func (w *chainWalk) finish(whole bool) {
	if w.broken > maxChainProblems {
		w.v.Problems = append(w.v.Problems, fmt.Sprintf("and %d more entries that do not chain", w.broken-maxChainProblems))
	}
	if whole && w.v.Pruned != w.removed {
		w.v.Problems = append(w.v.Problems, fmt.Sprintf("the history keeps %d links of pruned entries, but its prune entries record %d deleted: entries were deleted, or links removed, outside a prune", w.v.Pruned, w.removed))
	}
}

// checkpointProblem says what is wrong with the history, whose newest
// link is head, against the checkpoint cp: "" when it holds cp. It reads
// cp's entry or pruned link in q (the chain's walk vouched for the hashes
// stored there).
func (l *Ledger) checkpointProblem(ctx context.Context, q querier, cp Link, head Link) (string, error) {
	if head.Seq < cp.Seq {
		return fmt.Sprintf("the history ends at entry %d, before the checkpoint's entry %d: it was cut back after the checkpoint", head.Seq, cp.Seq), nil
	}
	found, err := l.linkAt(ctx, q, cp.Seq)
	switch {
	case err != nil:
		return "", err
	case found == nil:
		return fmt.Sprintf("the history holds no entry %d, the checkpoint's: it was rewritten after the checkpoint", cp.Seq), nil
	case found.Hash != cp.Hash:
		return fmt.Sprintf("entry %d's hash is not the checkpoint's: the history was rewritten after the checkpoint", cp.Seq), nil
	}
	return "", nil
}

// linkAt returns the link at seq, of an entry or of a pruned entry, or
// nil when the history holds neither.
func (l *Ledger) linkAt(ctx context.Context, q querier, seq int64) (*Link, error) {
	entries, err := l.b.ListHistory(ctx, q, HistoryFilter{After: seq - 1, Limit: 1})
	if err != nil {
		return nil, err
	}
	if len(entries) == 1 && entries[0].Seq == seq {
		return &Link{Seq: seq, Hash: entries[0].Hash}, nil
	}
	links, err := l.b.ListPrunedLinks(ctx, q, seq-1, 1)
	if err != nil {
		return nil, err
	}
	if len(links) == 1 && links[0].Seq == seq {
		return &links[0], nil
	}
	return nil, nil
}
