-- 013: the history becomes a hash chain, as in the SQLite ledger's
-- migration 016 (see ledger.HistoryHash).
--
-- ledger_history.hash is the SHA-256 hash of the entry's fields and of the
-- hash of the entry before it by seq; the ledger writes it, with an
-- explicit seq one above the chain's newest link, when the transaction of
-- a transition commits, holding a transaction-scoped advisory lock that
-- makes the appends of concurrent transactions take turns (so seq is also
-- the order in which they committed). The sequence behind seq's default is
-- no longer used. The entries already here are chained by Go right after
-- this SQL, in the same transaction (sqlval.ChainExisting).
--
-- ledger_history.removed is, on a prune's entry, how many entries the
-- prune deleted with its rows, and ledger_history_pruned keeps the link
-- (seq, hash) of each deleted entry, so that the chain stays whole.

ALTER TABLE ledger_history ADD COLUMN removed integer NOT NULL DEFAULT 0;
ALTER TABLE ledger_history ADD COLUMN hash bytea;

CREATE TABLE ledger_history_pruned (
    seq  bigint NOT NULL,
    hash bytea  NOT NULL,
    CONSTRAINT ledger_history_pruned_pkey PRIMARY KEY (seq)
);

-- The history's foreign keys go. Their cascades made a deleted change or
-- run take its entries along, where a prune now deletes the entries
-- itself and keeps their links; and the key-share lock each insert took on
-- the change, run and approval it names could make an append, which runs
-- under the chain's lock, wait for a row another transaction holds while
-- that one waits for the chain.
ALTER TABLE ledger_history DROP CONSTRAINT ledger_history_change_fkey;
ALTER TABLE ledger_history DROP CONSTRAINT ledger_history_run_fkey;
ALTER TABLE ledger_history DROP CONSTRAINT ledger_history_approval_fkey;
