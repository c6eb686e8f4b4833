package ledger

import (
	"context"
	"iter"
)

// scanPage is how many rows the ledger's own scans (Prune, ExpireStale,
// Check) read at a time: memory holds a page, never the whole ledger.
const scanPage = 500

// changePages yields the changes f selects, newest first, scanPage at a
// time (f's own Limit and Before are replaced).
func (l *Ledger) changePages(ctx context.Context, f ChangeFilter) iter.Seq2[[]*Change, error] {
	return func(yield func([]*Change, error) bool) {
		f.Limit, f.Before = scanPage, nil
		for {
			page, err := l.b.ListChanges(ctx, l.b.DB(), f)
			if !yield(page, err) || err != nil || len(page) < scanPage {
				return
			}
			last := page[len(page)-1]
			f.Before = &ChangeKey{CreatedAt: last.CreatedAt, ID: last.ID}
		}
	}
}

// runPages yields the runs f selects, newest first, scanPage at a time.
func (l *Ledger) runPages(ctx context.Context, f RunFilter) iter.Seq2[[]*Run, error] {
	return func(yield func([]*Run, error) bool) {
		f.Limit, f.Before = scanPage, nil
		for {
			page, err := l.b.ListRuns(ctx, l.b.DB(), f)
			if !yield(page, err) || err != nil || len(page) < scanPage {
				return
			}
			last := page[len(page)-1]
			f.Before = &ChangeKey{CreatedAt: last.CreatedAt, ID: last.ID}
		}
	}
}

// historyPages yields the history entries f selects, oldest first,
// scanPage at a time (f's own Limit and After are replaced).
func (l *Ledger) historyPages(ctx context.Context, f HistoryFilter) iter.Seq2[[]HistoryEntry, error] {
	return func(yield func([]HistoryEntry, error) bool) {
		f.Limit, f.After = scanPage, 0
		for {
			page, err := l.b.ListHistory(ctx, l.b.DB(), f)
			if !yield(page, err) || err != nil || len(page) < scanPage {
				return
			}
			f.After = page[len(page)-1].Seq
		}
	}
}
