package sqlval

import (
	"context"
	"database/sql"

	"github.com/mcp-changeset/changeset-go/ledger"
)

// chainPage is how many entries ChainExisting reads at a time.
const chainPage = 5000

// ChainExisting hashes the history written before the ledger chained it
// (see ledger.HistoryHash), in the migration's transaction tx: every entry,
// in the order of its seq, the first chained to the zero hash. The entries
// keep their seq; entries pruned before the chain have no link and are
// not missed. ph formats the n-th placeholder of the database's SQL
// ("?" or "$n"); the tables are found on the transaction's search path.
func ChainExisting(ctx context.Context, tx *sql.Tx, ph func(int) string) error {
	update, err := tx.PrepareContext(ctx, `UPDATE ledger_history SET hash = `+ph(1)+` WHERE seq = `+ph(2))
	if err != nil {
		return err
	}
	defer update.Close()
	var prev ledger.Hash
	var after int64
	for {
		rows, err := tx.QueryContext(ctx, `SELECT `+HistorySelect+` FROM ledger_history WHERE seq > `+ph(1)+
			` ORDER BY seq LIMIT `+ph(2), after, chainPage)
		if err != nil {
			return err
		}
		page, err := ScanAll(rows, ScanHistory)
		if err != nil {
			return err
		}
		for _, e := range page {
			e.Hash = ledger.HistoryHash(prev, e)
			if _, err := update.ExecContext(ctx, e.Hash[:], e.Seq); err != nil {
				return err
			}
			prev, after = e.Hash, e.Seq
		}
		if len(page) < chainPage {
			return nil
		}
	}
}

// ScanLink reads one row of (seq, hash), as the table of pruned entries'
// links holds them.
func ScanLink(s Scanner) (ledger.Link, error) {
	var l ledger.Link
	var hash []byte
	if err := s.Scan(&l.Seq, &hash); err != nil {
		return l, err
	}
	if len(hash) == len(l.Hash) {
		l.Hash = ledger.Hash(hash)
	}
	return l, nil
}
