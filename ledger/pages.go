package ledger

import (
	"context"
	"iter"
)

// scanPage is how many rows the ledger's own scans (Prune, ExpireStale,
// Check) read at a time: memory holds a page, never the whole ledger.
const scanPage = 500

// pages yields what next reads, scanPage rows at a time, until a page
// comes back short or with an error; after each full page, from tells next
// where the following page starts.
func pages[T any](next func() ([]T, error), from func(last T)) iter.Seq2[[]T, error] {
	return func(yield func([]T, error) bool) {
		for {
			page, err := next()
			if !yield(page, err) || err != nil || len(page) < scanPage {
				return
			}
			from(page[len(page)-1])
		}
	}
}

// changePages yields the changes f selects in q, newest first, a page at a time
// (f's own Limit and Before are replaced).
func (l *Ledger) changePages(ctx context.Context, q querier, f ChangeFilter) iter.Seq2[[]*Change, error] {
	f.Limit, f.Before = scanPage, nil
	return pages(func() ([]*Change, error) { return l.b.ListChanges(ctx, q, f) },
		func(c *Change) { f.Before = &ChangeKey{CreatedAt: c.CreatedAt, ID: c.ID} })
}

// runPages yields the runs f selects, newest first, a page at a time.
func (l *Ledger) runPages(ctx context.Context, q querier, f RunFilter) iter.Seq2[[]*Run, error] {
	f.Limit, f.Before = scanPage, nil
	return pages(func() ([]*Run, error) { return l.b.ListRuns(ctx, q, f) },
		func(r *Run) { f.Before = &ChangeKey{CreatedAt: r.CreatedAt, ID: r.ID} })
}

// historyPages yields the history entries f selects, oldest first, a page
// at a time, from f.After on (f's own Limit is replaced).
func (l *Ledger) historyPages(ctx context.Context, q querier, f HistoryFilter) iter.Seq2[[]HistoryEntry, error] {
	f.Limit = scanPage
	return pages(func() ([]HistoryEntry, error) { return l.b.ListHistory(ctx, q, f) },
		func(e HistoryEntry) { f.After = e.Seq })
}
