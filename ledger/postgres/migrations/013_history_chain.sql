-- 013: the history becomes a hash chain, as in the SQLite ledger's
-- migration 016 (see ledger.HistoryHash).
--
-- ledger_history.hash is the SHA-256 hash of the entry's fields and of the
-- hash of the entry before it by seq. ledger_chain_head holds the chain's
-- newest link, in its one row: when the transaction of a transition
-- commits, one statement per entry updates that row (seq + 1, the new
-- hash, computed here with sha256() from the fields Go encodes) and
-- inserts the entry with them. The row's lock makes the appends of
-- concurrent transactions take turns until each ends, so seq is also the
-- order in which they committed. The sequence behind seq's default is no
-- longer used. The entries already here are chained by Go right after
-- this SQL, in the same transaction (sqlval.ChainExisting), and the head
-- set to the newest of them.
--
-- ledger_history.removed is, on a prune's entry, how many entries the
-- prune deleted with its rows, and ledger_history_pruned keeps the link
-- (seq, hash) of each deleted entry, so that the chain stays whole.

ALTER TABLE ledger_history ADD COLUMN removed integer NOT NULL DEFAULT 0;
ALTER TABLE ledger_history ADD COLUMN hash bytea;

CREATE TABLE ledger_chain_head (
    id   integer NOT NULL DEFAULT 1,
    seq  bigint  NOT NULL,
    hash bytea   NOT NULL,
    CONSTRAINT ledger_chain_head_pkey PRIMARY KEY (id),
    CONSTRAINT ledger_chain_head_one CHECK (id = 1)
);

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
