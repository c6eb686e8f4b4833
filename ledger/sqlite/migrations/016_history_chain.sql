-- 016: the history becomes a hash chain (see ledger.HistoryHash).
--
-- ledger_history.hash is the SHA-256 hash of the entry's fields and of the
-- hash of the entry before it by seq (32 bytes); the ledger writes it, with
-- an explicit seq one above the chain's newest link, when the transaction
-- of a transition commits. The entries already here are chained by Go
-- right after this SQL, in the same transaction (sqlval.ChainExisting).
--
-- ledger_history.removed is, on a prune's entry, how many entries the
-- prune deleted with its rows (0 on every other entry), and
-- ledger_history_pruned keeps the link (seq, hash) of each entry a prune
-- deleted, so that the chain stays whole without the entry. No foreign key
-- ties a link to a row: a link is never deleted.

ALTER TABLE ledger_history ADD COLUMN removed INTEGER NOT NULL DEFAULT 0;
ALTER TABLE ledger_history ADD COLUMN hash BLOB;

CREATE TABLE ledger_history_pruned (
    seq  INTEGER PRIMARY KEY,
    hash BLOB NOT NULL
) STRICT;
